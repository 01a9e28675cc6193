// The answer to an OpenAI completions or chat request, built as its
// generations progress: whole (one JSON object once all have ended) or as
// server-sent events ("data: {chunk}\n\n" ... "data: [DONE]\n\n"), both from
// the same TextOutput per choice, so a streamed answer is the whole one cut
// in pieces. Runs on the request's HTTP thread.
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "serve/openai_api.h"
#include "serve/text_output.h"

namespace mt::serve {

class CompletionRun {
 public:
  CompletionRun(CompletionJob job, const ServedModel& m,
                std::vector<std::shared_ptr<RequestStream>> streams);
  ~CompletionRun();
  // Waits for every choice; throws ApiError (503: the server is stopping,
  // 500: the engine failed).
  Json whole();
  // The events that are ready, waiting up to `wait` for some; "" when none.
  std::string next_events(std::chrono::milliseconds wait);
  bool done() const { return done_; }
  // The client went away: every generation ends now.
  void cancel();

 private:
  struct Choice;
  // Takes what the engine produced for choice c; true once it has ended.
  bool poll(Choice& c, std::chrono::milliseconds wait, std::string& text, size_t& first_new);
  Json logprobs(const Choice& c, size_t from, bool with_prompt) const;
  Json usage() const;
  Json chunk(size_t index, const std::string& text, const Json& lp, const Json& finish) const;
  std::string token_text(int32_t id) const;

  CompletionJob job_;
  const ServedModel& m_;
  std::vector<std::unique_ptr<Choice>> choices_;
  std::string id_;
  int64_t created_;
  bool done_ = false, started_ = false;
};

}  // namespace mt::serve
