// OpenAI's completions and chat completions requests (POST /v1/completions,
// /v1/chat/completions), read into generation requests, and their answers:
// whole, or as server-sent events (serve/completion_runner.h writes them).
// Fields read: model, prompt | messages, max_tokens (max_completion_tokens),
// temperature (0: greedy), top_p, top_k, seed, stop, echo, logprobs,
// top_logprobs, stream, stream_options.include_usage, n (1 only); fields we
// cannot honour (n > 1, best_of > 1, penalties, logit_bias, suffix, tools
// calls) are refused by name rather than ignored.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "data/tokenizer.h"
#include "serve/json_fields.h"
#include "serve/request_stream.h"

namespace mt::serve {

// The model being served, as the request handlers see it.
struct ServedModel {
  const Tokenizer* tok = nullptr;
  std::string name;                         // --served-model-name
  int64_t max_length = 0;                   // prompt + new tokens, per request
  int64_t created = 0;                      // start time, seconds since the epoch
  const chat::ChatTemplate* chat = nullptr;  // null: no chat template
  std::string no_chat;                      // why there is none
  std::vector<int32_t> chat_stop_ids;       // the template's eos token, when one token
};

// A parsed request: one generation per prompt.
struct CompletionJob {
  bool chat = false;
  std::vector<std::string> prompt_texts;  // for echo
  std::vector<GenerationParams> params;
  std::vector<std::string> stop;          // stop strings
  std::vector<int32_t> hidden;            // stop tokens, not shown
  bool echo = false, stream = false, include_usage = false;
  int logprobs = -1;                      // -1: none; else alternatives per token
};

// Throw ApiError (400) on anything malformed.
CompletionJob parse_completion(const Json& body, const ServedModel& m);
CompletionJob parse_chat(const Json& body, const ServedModel& m);

// The ids of `text`; a 400 ApiError naming `param` when the tokenizer
// cannot encode it (a character outside a character vocabulary).
std::vector<int32_t> tokenize_request_text(const Tokenizer& tok, const std::string& text,
                                           const char* param);

// A seed for a request that gave none.
uint64_t fresh_seed();

}  // namespace mt::serve
