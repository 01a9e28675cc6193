#include "serve/request_stream.h"

namespace mt::serve {

StreamSnapshot RequestStream::wait(size_t from, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(m_);
  cv_.wait_for(lock, timeout, [&] { return tokens_.size() > from || finish_ != Finish::kRunning; });
  StreamSnapshot s;
  s.prompt = prompt_;
  if (tokens_.size() > from) s.tokens.assign(tokens_.begin() + std::ptrdiff_t(from), tokens_.end());
  s.finish = finish_;
  s.error = error_;
  return s;
}

double RequestStream::first_token_seconds() const {
  std::lock_guard<std::mutex> lock(m_);
  return first_token_s_;
}

void RequestStream::set_prompt_logprobs(std::vector<TokenInfo> lp) {
  std::lock_guard<std::mutex> lock(m_);
  prompt_ = std::move(lp);
}

void RequestStream::push(TokenInfo t) {
  {
    std::lock_guard<std::mutex> lock(m_);
    if (tokens_.empty())
      first_token_s_ =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - submitted_).count();
    tokens_.push_back(std::move(t));
  }
  cv_.notify_all();
}

void RequestStream::finish(Finish f, std::string error) {
  {
    std::lock_guard<std::mutex> lock(m_);
    finish_ = f;
    error_ = std::move(error);
  }
  cv_.notify_all();
}

}  // namespace mt::serve
