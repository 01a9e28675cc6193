#include "serve/openai_api.h"

#include <random>

#include "chat/error.h"
#include "core/error.h"
#include "serve/api_error.h"

namespace mt::serve {

namespace {

// Fields whose non-default values we cannot honour: refused by name.
void refuse_unsupported(const Json& body) {
  if (auto n = int_field(body, "n", 1, 128); n && *n != 1)
    throw ApiError(400, "'n' = " + std::to_string(*n) + " is not supported: this server returns "
                   "one choice per prompt; send n requests (or omit 'n')", "n");
  if (auto b = int_field(body, "best_of", 1, 128); b && *b != 1)
    throw ApiError(400, "'best_of' is not supported; omit it", "best_of");
  for (const char* p : {"presence_penalty", "frequency_penalty"})
    if (auto x = number_field(body, p, -2, 2); x && *x != 0)
      throw ApiError(400, std::string("'") + p + "' is not supported; omit it or send 0", p);
  if (const Json* lb = field(body, "logit_bias"); lb && !lb->empty())
    throw ApiError(400, "'logit_bias' is not supported; omit it", "logit_bias");
  if (auto s = string_field(body, "suffix"); s && !s->empty())
    throw ApiError(400, "'suffix' is not supported; omit it", "suffix");
  if (const Json* t = field(body, "tools"); t && !t->empty())
    throw ApiError(400, "'tools' (function calling) is not supported; omit it", "tools");
  if (const Json* rf = field(body, "response_format");
      rf && !(rf->is_object() && rf->value("type", "") == "text"))
    throw ApiError(400, "'response_format' other than {\"type\": \"text\"} is not supported",
                   "response_format");
}

std::vector<std::string> stop_strings(const Json& body) {
  const Json* s = field(body, "stop");
  if (!s) return {};
  if (s->is_string()) return {s->get<std::string>()};
  if (!s->is_array() || s->size() > 4)
    throw ApiError(400, "Invalid 'stop': expected a string or an array of at most 4 strings, "
                   "but got " + json_kind(*s) + (s->is_array() ? " of " + std::to_string(s->size()) : "") +
                   " instead.", "stop");
  std::vector<std::string> out;
  for (const Json& x : *s) {
    if (!x.is_string())
      throw ApiError(400, "Invalid 'stop': expected strings, but got " + json_kind(x) + " instead.",
                     "stop");
    out.push_back(x.get<std::string>());
  }
  return out;
}

// What every generation of the request shares: sampling, seed, lengths.
GenerationParams common_params(const Json& body, const ServedModel& m, int64_t default_max) {
  GenerationParams g;
  g.sampling.temperature = float(number_field(body, "temperature", 0, 2).value_or(1.0));
  g.sampling.top_p = float(number_field(body, "top_p", 0, 1).value_or(1.0));
  // top_k (vLLM's): -1 or 0 is off.
  const int64_t k = int_field(body, "top_k", -1, INT32_MAX).value_or(0);
  g.sampling.top_k = k < 0 ? 0 : k;
  g.seed = uint64_t(int_field(body, "seed", INT64_MIN, INT64_MAX).value_or(int64_t(fresh_seed())));
  g.max_tokens = default_max;
  g.stop_ids = {m.tok->eod()};
  return g;
}

void check_length(const GenerationParams& g, const ServedModel& m, bool chat) {
  const int64_t n = int64_t(g.prompt.size());
  if (n == 0)
    throw ApiError(400, chat ? "The messages render to an empty prompt." : "'prompt' is empty: "
                   "give at least one character or token.", chat ? "messages" : "prompt");
  if (n + g.max_tokens > m.max_length)
    throw ApiError(400, "This model's maximum context length is " + std::to_string(m.max_length) +
                   " tokens. However, you requested " + std::to_string(n + g.max_tokens) +
                   " tokens (" + std::to_string(n) + " in your prompt; " +
                   std::to_string(g.max_tokens) + " for the completion). Please reduce your "
                   "prompt; or completion length.", chat ? "messages" : "max_tokens",
                   "invalid_request_error", "context_length_exceeded");
}

std::vector<int32_t> token_ids(const Json& arr, const ServedModel& m) {
  std::vector<int32_t> ids;
  for (const Json& t : arr) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
        t.get<int64_t>() >= m.tok->vocab_size())
      throw ApiError(400, "Invalid 'prompt': token ids must be integers in [0, " +
                     std::to_string(m.tok->vocab_size()) + "), got " + t.dump() + ".", "prompt");
    ids.push_back(t.get<int32_t>());
  }
  return ids;
}

void read_stream_options(const Json& body, CompletionJob& job) {
  job.stream = bool_field(body, "stream").value_or(false);
  if (const Json* so = field(body, "stream_options")) {
    if (!so->is_object())
      throw ApiError(400, "Invalid type for 'stream_options': expected an object, but got " +
                     json_kind(*so) + " instead.", "stream_options");
    if (!job.stream)
      throw ApiError(400, "'stream_options' is only allowed when 'stream' is true.", "stream_options");
    job.include_usage = bool_field(*so, "include_usage").value_or(false);
  }
}

}  // namespace

std::vector<int32_t> tokenize_request_text(const Tokenizer& tok, const std::string& text,
                                           const char* param) {
  try {
    return tok.tokenize(text);
  } catch (const Error& e) {
    throw ApiError(400, std::string("Invalid '") + param + "': the model's tokenizer cannot "
                   "encode it: " + e.what(), param);
  }
}

uint64_t fresh_seed() {
  static std::random_device rd;
  return (uint64_t(rd()) << 32) ^ rd();
}

CompletionJob parse_completion(const Json& body, const ServedModel& m) {
  if (!body.is_object()) throw ApiError(400, "The request body must be a JSON object.");
  refuse_unsupported(body);
  CompletionJob job;
  const Json* prompt = field(body, "prompt");
  if (!prompt) throw ApiError(400, "Missing required parameter: 'prompt'.", "prompt");
  std::vector<std::vector<int32_t>> prompts;
  if (prompt->is_string()) {
    job.prompt_texts.push_back(prompt->get<std::string>());
  } else if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_string()) {
    for (const Json& p : *prompt) {
      if (!p.is_string())
        throw ApiError(400, "Invalid 'prompt': a list of prompts must hold strings only.", "prompt");
      job.prompt_texts.push_back(p.get<std::string>());
    }
  } else if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_number_integer()) {
    prompts.push_back(token_ids(*prompt, m));
  } else if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_array()) {
    for (const Json& p : *prompt) {
      if (!p.is_array())
        throw ApiError(400, "Invalid 'prompt': a list of token lists must hold lists only.", "prompt");
      prompts.push_back(token_ids(p, m));
    }
  } else {
    throw ApiError(400, "Invalid 'prompt': expected a string, an array of strings, an array of "
                   "token ids or an array of token-id arrays, but got " + json_kind(*prompt) +
                   (prompt->is_array() ? " (empty or of other values)" : "") + " instead.", "prompt");
  }
  if (prompts.empty())
    for (const std::string& t : job.prompt_texts)
      prompts.push_back(tokenize_request_text(*m.tok, t, "prompt"));
  else
    for (const auto& p : prompts) job.prompt_texts.push_back(m.tok->detokenize(p));
  if (prompts.size() > 128)
    throw ApiError(400, "Invalid 'prompt': at most 128 prompts per request, got " +
                   std::to_string(prompts.size()) + ".", "prompt");
  const int64_t max_tokens = int_field(body, "max_tokens", 0, INT64_MAX).value_or(16);
  GenerationParams g = common_params(body, m, max_tokens);
  job.echo = bool_field(body, "echo").value_or(false);
  if (auto lp = int_field(body, "logprobs", 0, 5)) job.logprobs = int(*lp);
  g.top_logprobs = std::max(job.logprobs, 0);
  g.prompt_logprobs = job.echo && job.logprobs >= 0;
  job.stop = stop_strings(body);
  job.hidden = g.stop_ids;
  read_stream_options(body, job);
  for (auto& p : prompts) {
    GenerationParams one = g;
    one.prompt = std::move(p);
    check_length(one, m, false);
    job.params.push_back(std::move(one));
  }
  return job;
}

CompletionJob parse_chat(const Json& body, const ServedModel& m) {
  if (!body.is_object()) throw ApiError(400, "The request body must be a JSON object.");
  refuse_unsupported(body);
  if (!m.chat) throw ApiError(400, "This model has no chat template: " + m.no_chat +
                              "; use /v1/completions instead.", "messages");
  const Json* messages = field(body, "messages");
  if (!messages) throw ApiError(400, "Missing required parameter: 'messages'.", "messages");
  if (!messages->is_array() || messages->empty())
    throw ApiError(400, "Invalid 'messages': expected a non-empty array of messages, but got " +
                   json_kind(*messages) + " instead.", "messages");
  for (const Json& msg : *messages)
    if (!msg.is_object() || !msg.contains("role") || !msg["role"].is_string())
      throw ApiError(400, "Invalid 'messages': each message must be an object with a string "
                     "'role'.", "messages");
  CompletionJob job;
  job.chat = true;
  std::string text;
  try {
    chat::RenderOptions ro;
    ro.add_generation_prompt = true;
    text = m.chat->render(chat::flatten_text_parts(*messages), ro);
  } catch (const chat::TemplateError& e) {
    throw ApiError(400, std::string("The chat template refused these messages: ") + e.what(),
                   "messages");
  }
  GenerationParams g = common_params(body, m, 0);
  g.prompt = tokenize_request_text(*m.tok, text, "messages");
  const int64_t room = std::max<int64_t>(m.max_length - int64_t(g.prompt.size()), 0);
  std::optional<int64_t> mt = int_field(body, "max_completion_tokens", 0, INT64_MAX);
  if (!mt) mt = int_field(body, "max_tokens", 0, INT64_MAX);
  g.max_tokens = mt.value_or(room);
  for (int32_t id : m.chat_stop_ids) g.stop_ids.push_back(id);
  if (bool_field(body, "logprobs").value_or(false))
    job.logprobs = int(int_field(body, "top_logprobs", 0, 20).value_or(0));
  else if (field(body, "top_logprobs"))
    throw ApiError(400, "'top_logprobs' needs 'logprobs': true.", "top_logprobs");
  g.top_logprobs = std::max(job.logprobs, 0);
  job.stop = stop_strings(body);
  job.hidden = g.stop_ids;
  read_stream_options(body, job);
  job.prompt_texts.push_back(text);
  check_length(g, m, true);
  job.params.push_back(std::move(g));
  return job;
}

}  // namespace mt::serve
