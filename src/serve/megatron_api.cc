#include "serve/megatron_api.h"

#include "core/error.h"
#include "serve/api_error.h"

namespace mt::serve {

namespace {
[[noreturn]] void refuse(const std::string& message) { throw ApiError(400, message); }
bool is_int(const Json& v) { return v.is_number_integer(); }
}  // namespace

MegatronJob parse_megatron(const Json& b, const ServedModel& m) {
  if (!b.is_object() || !b.contains("prompts")) refuse("prompts argument required");
  if (b.contains("max_len")) refuse("max_len is no longer used.  Replace with tokens_to_generate");
  if (b.contains("sentences")) refuse("sentences is no longer used.  Replace with prompts");
  if (b.contains("beam_width")) refuse("Beam search is no longer supported.");
  const Json& prompts = b["prompts"];
  if (!prompts.is_array()) refuse("prompts is not a list of strings");
  if (prompts.empty()) refuse("prompts is empty");
  if (prompts.size() > 128) refuse("Maximum number of prompts is 128");
  for (const Json& p : prompts)
    if (!p.is_string()) refuse("prompts is not a list of strings");
  int64_t tokens = 64;
  if (b.contains("tokens_to_generate")) {
    if (!is_int(b["tokens_to_generate"])) refuse("tokens_to_generate must be an integer greater than 0");
    tokens = b["tokens_to_generate"].get<int64_t>();
    if (tokens < 0) refuse("tokens_to_generate must be an integer greater than or equal to 0");
  }
  MegatronJob job;
  if (b.contains("logprobs")) {
    if (!b["logprobs"].is_boolean()) refuse("logprobs must be a boolean value");
    job.logprobs = b["logprobs"].get<bool>();
  }
  if (tokens == 0 && !job.logprobs) refuse("tokens_to_generate=0 implies logprobs should be True");
  GenerationParams g;
  g.sampling.temperature = 1;
  if (b.contains("temperature")) {
    const Json& t = b["temperature"];
    if (!t.is_number() || !(t.get<double>() > 0 && t.get<double>() <= 100))
      refuse("temperature must be a positive number less than or equal to 100.0");
    g.sampling.temperature = t.get<float>();
  }
  if (b.contains("top_k")) {
    const Json& k = b["top_k"];
    if (!is_int(k))
      refuse("top_k must be an integer equal to or greater than 0 and less than or equal to 1000");
    if (k.get<int64_t>() < 0 || k.get<int64_t>() > 1000)
      refuse("top_k must be equal to or greater than 0 and less than or equal to 1000");
    g.sampling.top_k = k.get<int64_t>();
  }
  if (b.contains("top_p")) {
    const Json& p = b["top_p"];
    if (!p.is_number_float()) refuse("top_p must be a positive float less than or equal to 1.0");
    if (p.get<double>() > 0 && g.sampling.top_k > 0) refuse("cannot set both top-k and top-p samplings.");
    if (!(p.get<double>() >= 0 && p.get<double>() <= 1)) refuse("top_p must be less than or equal to 1.0");
    g.sampling.top_p = p.get<float>();
  }
  for (const char* f : {"top_p_decay", "top_p_bound"})
    if (b.contains(f))
      refuse(std::string(f) + " is not supported by this server (Megatron's static engine only); "
             "omit it");
  bool add_bos = false;
  if (b.contains("add_BOS")) {
    if (!b["add_BOS"].is_boolean()) refuse("add_BOS must be a boolean value");
    add_bos = b["add_BOS"].get<bool>();
  }
  for (const Json& p : prompts)
    if (p.get<std::string>().empty() && !add_bos) refuse("Empty prompts require add_BOS=true");
  for (const char* f : {"stop_on_double_eol", "stop_on_eol", "prevent_newline_after_colon"})
    if (b.contains(f)) {
      if (!b[f].is_boolean()) refuse(std::string(f) + " must be a boolean value");
      if (b[f].get<bool>())
        refuse(std::string(f) + " is not supported by this server; use stop_token, or the "
               "OpenAI endpoint /v1/completions with 'stop'");
    }
  g.seed = fresh_seed();
  if (b.contains("random_seed")) {
    if (!is_int(b["random_seed"])) refuse("random_seed must be integer");
    if (b["random_seed"].get<int64_t>() < 0) refuse("random_seed must be a positive integer");
    g.seed = b["random_seed"].get<uint64_t>();
  }
  g.stop_ids = {m.tok->eod()};
  if (b.contains("stop_token")) {
    if (!is_int(b["stop_token"])) refuse("stop_token must be an integer");
    g.stop_ids = {b["stop_token"].get<int32_t>()};
  }
  if (b.contains("length_penalty") && !b["length_penalty"].is_number_float())
    refuse("length_penalty must be a float");
  g.max_tokens = tokens;
  g.prompt_logprobs = job.logprobs;
  // Megatron's BOS is the end-of-document token (tokenization.py).
  const int32_t bos = m.tok->eod() >= 0 ? m.tok->eod() : m.tok->bos();
  for (const Json& p : prompts) {
    GenerationParams one = g;
    if (add_bos) one.prompt.push_back(bos);
    try {
      m.tok->tokenize_append(p.get<std::string>(), one.prompt);
    } catch (const Error& e) {
      refuse(std::string("the model's tokenizer cannot encode a prompt: ") + e.what());
    }
    if (one.prompt.empty()) refuse("Empty prompts require add_BOS=true");
    if (int64_t(one.prompt.size()) + tokens > m.max_length)
      refuse("Length of prompt + tokens_to_generate longer than allowed: " +
             std::to_string(one.prompt.size()) + " + " + std::to_string(tokens) + " > " +
             std::to_string(m.max_length) + " (--inference-max-seq-length)");
    job.prompts.push_back(p.get<std::string>());
    job.params.push_back(std::move(one));
  }
  return job;
}

Json megatron_response(const MegatronJob& job, const ServedModel& m,
                       const std::vector<std::shared_ptr<RequestStream>>& streams) {
  Json text = Json::array(), segments = Json::array(), tokens = Json::array(),
       logprobs = Json::array();
  for (size_t i = 0; i < streams.size(); ++i) {
    StreamSnapshot s;
    do s = streams[i]->wait(0, std::chrono::milliseconds(200));
    while (s.finish == Finish::kRunning);
    if (s.finish == Finish::kCancelled)
      throw ApiError(503, "The server is shutting down; the request was not completed.");
    if (s.finish == Finish::kError) throw ApiError(500, "The engine failed: " + s.error);
    // As Megatron's detokenize_generations: text and segments from the same
    // ids, the stop token included.
    std::vector<int32_t> ids = job.params[i].prompt, generated;
    Json lp = Json::array(), seg = Json::array();
    for (const TokenInfo& t : s.prompt) lp.push_back(t.logprob);
    for (const TokenInfo& t : s.tokens) {
      ids.push_back(t.id);
      generated.push_back(t.id);
      lp.push_back(t.logprob);
    }
    for (int32_t id : ids) {
      const int32_t one[1] = {id};
      seg.push_back(m.tok->detokenize(one));
    }
    text.push_back(job.prompts[i] + m.tok->detokenize(generated));
    segments.push_back(seg);
    tokens.push_back(ids);
    logprobs.push_back(lp);
  }
  Json r = {{"text", text}, {"segments", segments}};
  if (job.logprobs) r["logprobs"] = logprobs;
  r["tokens"] = tokens;
  return r;
}

}  // namespace mt::serve
