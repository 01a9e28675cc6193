// Chat-template evaluator: runs a parsed template over the variables of one
// render (messages, add_generation_prompt, bos_token, ...) to a string.
// Scopes as the reference's: a loop has one scope for all its iterations
// (a `set` inside a loop does not leak out; namespace() attributes do), `if`
// has none, a macro call has its own over the template's globals.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "chat/ast.h"

namespace mt::chat {

struct EvalOptions {
  // strftime_now's clock: these seconds since the epoch in UTC when set,
  // else the local time now.
  std::optional<int64_t> now_epoch_s;
};

// Throws TemplateError (with the line) on a run-time error or raise_exception.
std::string evaluate(const Body& body, const Object& variables, const EvalOptions& options);

// Python's time.strftime over `t` for %Y %m %d %H %M %S %y %b %B %a %A %e %j %p %I %%
// (others kept as written, as the reference does).
std::string format_time(const std::string& format, int64_t epoch_s, bool utc);

}  // namespace mt::chat
