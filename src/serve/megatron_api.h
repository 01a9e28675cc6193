// Megatron-LM's text generation API (tools/run_text_generation_server.py,
// PUT /api): {"prompts": [...], "tokens_to_generate", "logprobs",
// "temperature", "top_k", "top_p", "random_seed", "add_BOS", "stop_token"},
// checked as Megatron checks them, with its messages; answered with "text"
// (each prompt and its continuation), "segments" (each token's text),
// "tokens" (prompt and new ids) and, when asked, "logprobs" (each token's
// after the first). A refusal is a 400 whose body is Megatron's message as a
// JSON string (Megatron's Flask server answers some of them with status 200:
// here they are all 400).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "serve/openai_api.h"

namespace mt::serve {

struct MegatronJob {
  std::vector<std::string> prompts;
  std::vector<GenerationParams> params;
  bool logprobs = false;
};

// Throws ApiError (400) with Megatron's message.
MegatronJob parse_megatron(const Json& body, const ServedModel& m);
// Waits for every generation; throws ApiError (503, 500) as CompletionRun::whole.
Json megatron_response(const MegatronJob& job, const ServedModel& m,
                       const std::vector<std::shared_ptr<RequestStream>>& streams);

}  // namespace mt::serve
