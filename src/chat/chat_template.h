// Chat templates: the Jinja template of a checkpoint's tokenizer_config.json
// ("chat_template"), rendered over OpenAI-style messages the way transformers'
// apply_chat_template(..., tokenize=False) does (the reference being
// @huggingface/jinja). The public surface of src/chat: the lexer, parser,
// evaluator and builtins behind it are private.
//
//   ChatTemplate t = ChatTemplate::from_tokenizer_config(read_file(dir + "/tokenizer_config.json"));
//   std::string prompt = t.render(messages, {.add_generation_prompt = true});
//
// Errors are TemplateError (chat/error.h), one line naming the construct and
// the template line: at load time for syntax and any filter, test, method,
// function or statement the interpreter does not know; at render time for
// bad values and the template's own raise_exception(msg) (`raised`, with msg).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "chat/error.h"

namespace mt::chat {

struct RenderOptions {
  bool add_generation_prompt = false;
  // More template variables, e.g. {"enable_thinking": false} (Qwen3) or
  // {"tools": [...]}; they may override bos_token / eos_token.
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  // strftime_now's clock (seconds since the epoch, read as UTC); unset: the
  // local time now.
  std::optional<int64_t> now_epoch_s;
};

class ChatTemplate {
 public:
  // Parses `source` (throws TemplateError); bos/eos are the template's
  // bos_token and eos_token.
  ChatTemplate(std::string_view source, std::string bos_token, std::string eos_token);
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  // From the text of a tokenizer_config.json: "chat_template" (a string, or a
  // list of {name, template} from which "default" is taken), "bos_token" and
  // "eos_token" (strings or {"content": ...}). Throws TemplateError when the
  // file has no chat template or the template does not parse.
  static ChatTemplate from_tokenizer_config(std::string_view json_text);

  // `messages`: a JSON array of {"role", "content", ...}; content a string or
  // a list of parts ({"type": "text", "text": ...}), passed to the template as
  // they are. Throws TemplateError.
  std::string render(const nlohmann::ordered_json& messages, const RenderOptions& options = {}) const;

  const std::string& bos_token() const { return bos_; }
  const std::string& eos_token() const { return eos_; }

 private:
  struct Parsed;
  std::unique_ptr<Parsed> parsed_;
  std::string bos_, eos_;
};

// Messages whose content is a list of parts with the text parts joined by
// "\n" into one string (for templates that expect string content, as Qwen3's
// and Llama 3's); other parts are refused by type.
nlohmann::ordered_json flatten_text_parts(const nlohmann::ordered_json& messages);

}  // namespace mt::chat
