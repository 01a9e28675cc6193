#include "serve/completion_runner.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <ctime>

#include "serve/api_error.h"

namespace mt::serve {

struct CompletionRun::Choice {
  std::shared_ptr<RequestStream> req;
  TextOutput out;
  size_t seen = 0;                 // tokens taken from the engine
  std::string text;                // shown so far
  std::vector<TokenInfo> shown;    // the tokens behind it (stop tokens left out)
  std::vector<TokenInfo> prompt;   // prompt log-probabilities (echo + logprobs)
  Finish finish = Finish::kRunning;
  bool stopped_by_string = false;
  std::string error;
  bool ended_sent = false, echoed = false;
};

namespace {
std::string next_id(const char* prefix) {
  static std::atomic<uint64_t> n{0};
  char buf[32];
  std::snprintf(buf, sizeof buf, "%s-%016llx", prefix,
                static_cast<unsigned long long>((uint64_t(std::time(nullptr)) << 24) + n++));
  return buf;
}
const char* finish_reason(Finish f) { return f == Finish::kLength ? "length" : "stop"; }
}  // namespace

CompletionRun::CompletionRun(CompletionJob job, const ServedModel& m,
                             std::vector<std::shared_ptr<RequestStream>> streams)
    : job_(std::move(job)), m_(m), id_(next_id(job_.chat ? "chatcmpl" : "cmpl")),
      created_(int64_t(std::time(nullptr))) {
  for (auto& s : streams)
    choices_.push_back(std::make_unique<Choice>(
        Choice{std::move(s), TextOutput(*m.tok, job_.stop, job_.hidden)}));
}

CompletionRun::~CompletionRun() = default;

void CompletionRun::cancel() {
  for (auto& c : choices_) c->req->cancel();
}

bool CompletionRun::poll(Choice& c, std::chrono::milliseconds wait, std::string& text,
                         size_t& first_new) {
  first_new = c.shown.size();
  if (c.finish != Finish::kRunning) return true;
  StreamSnapshot s = c.req->wait(c.seen, wait);
  if (c.prompt.empty()) c.prompt = std::move(s.prompt);
  std::string piece;
  for (TokenInfo& t : s.tokens) {
    ++c.seen;
    const bool hidden =
        std::find(job_.hidden.begin(), job_.hidden.end(), t.id) != job_.hidden.end();
    piece += c.out.push(t.id);
    if (!hidden) c.shown.push_back(std::move(t));
    if (c.out.stopped()) {
      c.req->cancel();
      c.stopped_by_string = true;
      c.finish = Finish::kStop;
      break;
    }
  }
  if (c.finish == Finish::kRunning && s.finish != Finish::kRunning && s.tokens.empty()) {
    piece += c.out.finish();
    c.finish = c.out.stopped() ? Finish::kStop : s.finish;
    c.error = s.error;
  }
  c.text += piece;
  text += piece;
  return c.finish != Finish::kRunning;
}

std::string CompletionRun::token_text(int32_t id) const {
  const int32_t one[1] = {id};
  return m_.tok->detokenize(one);
}

Json CompletionRun::logprobs(const Choice& c, size_t from, bool with_prompt) const {
  const auto top_of = [&](const TokenInfo& t) {
    Json top = Json::object();
    for (const auto& [id, lp] : t.top) top[token_text(id)] = lp;
    return top;
  };
  if (job_.chat) {
    Json content = Json::array();
    for (size_t i = from; i < c.shown.size(); ++i) {
      const TokenInfo& t = c.shown[i];
      const std::string s = token_text(t.id);
      Json top = Json::array();
      for (const auto& [id, lp] : t.top) {
        const std::string ts = token_text(id);
        top.push_back({{"token", ts}, {"logprob", lp},
                       {"bytes", std::vector<int>(ts.begin(), ts.end())}});
      }
      content.push_back({{"token", s}, {"logprob", t.logprob},
                         {"bytes", std::vector<int>(s.begin(), s.end())}, {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  Json tokens = Json::array(), lps = Json::array(), tops = Json::array(), offsets = Json::array();
  size_t offset = 0;
  if (with_prompt) {
    const std::vector<int32_t>& prompt = c.req->params().prompt;
    for (size_t i = 0; i < prompt.size(); ++i) {
      const std::string s = token_text(prompt[i]);
      tokens.push_back(s);
      offsets.push_back(offset);
      offset += s.size();
      if (i == 0 || i - 1 >= c.prompt.size()) {
        lps.push_back(nullptr);
        tops.push_back(nullptr);
      } else {
        lps.push_back(c.prompt[i - 1].logprob);
        tops.push_back(top_of(c.prompt[i - 1]));
      }
    }
  }
  for (size_t i = from; i < c.shown.size(); ++i) {
    const std::string s = token_text(c.shown[i].id);
    tokens.push_back(s);
    offsets.push_back(offset);
    offset += s.size();
    lps.push_back(c.shown[i].logprob);
    tops.push_back(top_of(c.shown[i]));
  }
  return {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops},
          {"text_offset", offsets}};
}

Json CompletionRun::usage() const {
  int64_t prompt = 0, completion = 0;
  for (const auto& c : choices_) {
    prompt += int64_t(c->req->params().prompt.size());
    completion += int64_t(c->seen);
  }
  return {{"prompt_tokens", prompt}, {"completion_tokens", completion},
          {"total_tokens", prompt + completion}};
}

namespace {
void raise_if_failed(Finish f, const std::string& error) {
  if (f == Finish::kCancelled)
    throw ApiError(503, "The server is shutting down; the request was not completed.", "",
                   "server_error", "service_unavailable");
  if (f == Finish::kError)
    throw ApiError(500, "The engine failed on this request: " + error, "", "server_error");
}
}  // namespace

Json CompletionRun::whole() {
  Json choices = Json::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    Choice& c = *choices_[i];
    std::string text;
    size_t first;
    while (!poll(c, std::chrono::milliseconds(200), text, first)) {
    }
    raise_if_failed(c.finish, c.error);
    const std::string prompt = job_.echo ? job_.prompt_texts[i] : "";
    Json lp = job_.logprobs >= 0 ? logprobs(c, 0, job_.echo) : Json(nullptr);
    if (job_.chat)
      choices.push_back({{"index", i},
                         {"message", {{"role", "assistant"}, {"content", c.text}}},
                         {"logprobs", lp},
                         {"finish_reason", finish_reason(c.finish)}});
    else
      choices.push_back({{"index", i}, {"text", prompt + c.text}, {"logprobs", lp},
                         {"finish_reason", finish_reason(c.finish)}});
  }
  done_ = true;
  return {{"id", id_}, {"object", job_.chat ? "chat.completion" : "text_completion"},
          {"created", created_}, {"model", m_.name}, {"choices", choices}, {"usage", usage()}};
}

Json CompletionRun::chunk(size_t index, const std::string& text, const Json& lp,
                          const Json& finish) const {
  Json choice;
  if (job_.chat) {
    Json delta = Json::object();
    if (!started_) delta["role"] = "assistant";
    if (!text.empty() || !started_) delta["content"] = text;
    choice = {{"index", index}, {"delta", delta}, {"logprobs", lp}, {"finish_reason", finish}};
  } else {
    choice = {{"index", index}, {"text", text}, {"logprobs", lp}, {"finish_reason", finish}};
  }
  return {{"id", id_}, {"object", job_.chat ? "chat.completion.chunk" : "text_completion"},
          {"created", created_}, {"model", m_.name}, {"choices", Json::array({choice})}};
}

std::string CompletionRun::next_events(std::chrono::milliseconds wait) {
  const auto event = [](const Json& j) {
    return "data: " + j.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n\n";
  };
  std::string out;
  bool all_ended = true;
  for (size_t i = 0; i < choices_.size(); ++i) {
    Choice& c = *choices_[i];
    if (c.ended_sent) continue;
    std::string text;
    size_t first;
    // Block on the first choice still running only; look at the others.
    const bool ended = poll(c, out.empty() && all_ended ? wait : std::chrono::milliseconds(0),
                            text, first);
    if (ended && (c.finish == Finish::kCancelled || c.finish == Finish::kError)) {
      try {
        raise_if_failed(c.finish, c.error);
      } catch (const ApiError& e) {
        out += event(e.body());
      }
      cancel();
      done_ = true;
      return out;
    }
    const bool echo_now = job_.echo && !job_.chat && !c.echoed && (c.seen > 0 || ended);
    c.echoed = c.echoed || echo_now;
    const Json lp = job_.logprobs >= 0 && (first < c.shown.size() || echo_now)
                        ? logprobs(c, first, echo_now)
                        : Json(nullptr);
    if (echo_now) text = job_.prompt_texts[i] + text;
    if (!text.empty() || !lp.is_null() || (job_.chat && !started_)) {
      out += event(chunk(i, text, lp, nullptr));
      started_ = true;
    }
    if (ended) {
      out += event(chunk(i, "", nullptr, finish_reason(c.finish)));
      c.ended_sent = true;
    } else {
      all_ended = false;
    }
  }
  if (all_ended) {
    if (job_.include_usage)
      out += event({{"id", id_}, {"object", job_.chat ? "chat.completion.chunk" : "text_completion"},
                    {"created", created_}, {"model", m_.name}, {"choices", Json::array()},
                    {"usage", usage()}});
    out += "data: [DONE]\n\n";
    done_ = true;
  }
  return out;
}

}  // namespace mt::serve
