// The one error type of the chat-template interpreter: a one-line message that
// names the construct and the template line ("chat template: unsupported filter
// 'xyz' at line 3"). raise_exception(msg) in a template gives one with
// `raised` set and `template_message` = msg (what a server returns to the client).
#pragma once
#include <string>

#include "core/error.h"

namespace mt::chat {

struct TemplateError : mt::Error {
  TemplateError(const std::string& what, int line, bool raised = false, std::string template_message = {})
      : mt::Error(what), line(line), raised(raised), template_message(std::move(template_message)) {}
  int line;               // 1-based line of the template, 0 when not known
  bool raised;            // raised by the template's raise_exception
  std::string template_message;
};

// Throws TemplateError("chat template: <what> at line <line>").
[[noreturn]] inline void template_fail(const std::string& what, int line) {
  throw TemplateError("chat template: " + what + (line > 0 ? " at line " + std::to_string(line) : ""), line);
}

}  // namespace mt::chat
