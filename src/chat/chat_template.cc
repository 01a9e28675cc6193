#include "chat/chat_template.h"

#include "chat/evaluator.h"
#include "chat/parser.h"

namespace mt::chat {

struct ChatTemplate::Parsed {
  Body body;
};

ChatTemplate::ChatTemplate(std::string_view source, std::string bos_token, std::string eos_token)
    : parsed_(std::make_unique<Parsed>(Parsed{parse_template(source)})),
      bos_(std::move(bos_token)),
      eos_(std::move(eos_token)) {}
ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

namespace {

std::string special_token(const nlohmann::ordered_json& config, const char* key) {
  if (!config.contains(key)) return "";
  const nlohmann::ordered_json& t = config[key];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_object() && t.contains("content") && t["content"].is_string()) return t["content"].get<std::string>();
  if (t.is_null()) return "";
  throw TemplateError(std::string("chat template: tokenizer_config.json's ") + key +
                          " is neither a string nor {\"content\": ...}", 0);
}

}  // namespace

ChatTemplate ChatTemplate::from_tokenizer_config(std::string_view json_text) {
  const nlohmann::ordered_json config = nlohmann::ordered_json::parse(json_text, nullptr, false);
  if (config.is_discarded() || !config.is_object())
    throw TemplateError("chat template: tokenizer_config.json is not a JSON object", 0);
  if (!config.contains("chat_template") || config["chat_template"].is_null())
    throw TemplateError("chat template: tokenizer_config.json has no chat_template", 0);
  const nlohmann::ordered_json& t = config["chat_template"];
  std::string source;
  if (t.is_string()) {
    source = t.get<std::string>();
  } else if (t.is_array()) {
    std::string names;
    for (const auto& entry : t) {
      if (!entry.is_object() || !entry.contains("name") || !entry.contains("template")) continue;
      names += (names.empty() ? "" : ", ") + entry["name"].get<std::string>();
      if (entry["name"] == "default") source = entry["template"].get<std::string>();
    }
    if (source.empty())
      throw TemplateError("chat template: tokenizer_config.json's chat_template list has no 'default' (has: " + names +
                              ")", 0);
  } else {
    throw TemplateError("chat template: tokenizer_config.json's chat_template is neither a string nor a list", 0);
  }
  return ChatTemplate(source, special_token(config, "bos_token"), special_token(config, "eos_token"));
}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, const RenderOptions& options) const {
  if (!messages.is_array()) throw TemplateError("chat template: messages must be a JSON array", 0);
  for (const auto& m : messages)
    if (!m.is_object() || !m.contains("role"))
      throw TemplateError("chat template: every message must be an object with a \"role\"", 0);
  Object vars;
  vars.set("messages", Value::from_json(messages));
  vars.set("add_generation_prompt", Value::boolean(options.add_generation_prompt));
  vars.set("bos_token", Value::string(bos_));
  vars.set("eos_token", Value::string(eos_));
  if (!options.extra.is_object()) throw TemplateError("chat template: extra variables must be a JSON object", 0);
  for (auto it = options.extra.begin(); it != options.extra.end(); ++it)
    vars.set(it.key(), Value::from_json(it.value()));
  return evaluate(parsed_->body, vars, EvalOptions{options.now_epoch_s});
}

nlohmann::ordered_json flatten_text_parts(const nlohmann::ordered_json& messages) {
  nlohmann::ordered_json out = messages;
  for (auto& m : out) {
    if (!m.is_object() || !m.contains("content") || !m["content"].is_array()) continue;
    std::string text;
    bool first = true;
    for (const auto& part : m["content"]) {
      const std::string type = part.is_object() && part.contains("type") ? part["type"].get<std::string>() : "?";
      if (type != "text" || !part.contains("text") || !part["text"].is_string())
        throw TemplateError("chat template: content part of type '" + type + "' cannot be flattened to text", 0);
      if (!first) text += '\n';
      text += part["text"].get<std::string>();
      first = false;
    }
    m["content"] = text;
  }
  return out;
}

}  // namespace mt::chat
