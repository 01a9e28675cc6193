// Decodes prompts from a checkpoint with megatron::DecodingSession, all at
// once, and writes each completion as one JSON line on stdout (rank 0):
//   decode --load CKPT [--tp N] [--max-tokens N] [--temperature T] [--seed S] PROMPT...
// Under mpirun -n N with --tp N the model is split over the N ranks.
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "megatron/decoding.h"

namespace {

// JSON string literal of `s` (control characters escaped).
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (const char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

}  // namespace

int main(int argc, char** argv) {
  megatron::DecodingOptions opt;
  megatron::Sampling sampling;
  std::vector<std::string> prompts;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool value = i + 1 < argc;
    if (a == "--load" && value) opt.load = argv[++i];
    else if (a == "--tp" && value) opt.tensor_parallel = std::atoi(argv[++i]);
    else if (a == "--max-tokens" && value) sampling.max_tokens = std::atoll(argv[++i]);
    else if (a == "--temperature" && value) sampling.temperature = std::atof(argv[++i]);
    else if (a == "--seed" && value) sampling.seed = std::strtoull(argv[++i], nullptr, 10);
    else prompts.push_back(a);
  }
  try {
    megatron::DecodingSession session(opt);
    const std::vector<megatron::Completion> out = session.generate(prompts, sampling);
    for (const megatron::Completion& c : out) {
      std::string tokens, log_probs;
      for (size_t i = 0; i < c.tokens.size(); ++i) {
        tokens += (i ? "," : "") + std::to_string(c.tokens[i]);
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.9g", c.log_probs[i]);
        log_probs += (i ? "," : "") + std::string(buf);
      }
      std::printf("{\"tokens\": [%s], \"log_probs\": [%s], \"text\": %s, \"finish\": \"%s\"}\n",
                  tokens.c_str(), log_probs.c_str(), quoted(c.text).c_str(), c.finish.c_str());
    }
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "decode: %s\n", e.what());
    return 2;
  }
  return 0;
}
