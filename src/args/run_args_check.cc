#include "args/run_args_check.h"

#include <cstdint>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace mt {

namespace {

// "with --train-iters 20", "with --bf16", "without --bf16", "without --load".
std::string launched_with(const std::string& flag, const std::string& value) {
  if (value == "true") return "with " + flag;
  if (value == "false" || value.empty()) return "without " + flag;
  return "with " + flag + " " + value;
}

const char kFix[] = "; fix: launch every rank with the same arguments";

// The length, then the bytes, of `text` from `root` to every rank.
std::string broadcast_text(const Communicator& world, const std::string& text, int root) {
  uint64_t n = text.size();
  world.broadcast(&n, sizeof n, root);
  std::string out = world.rank() == root ? text : std::string(size_t(n), '\0');
  if (n > 0) world.broadcast(out.data(), size_t(n), root);
  return out;
}

}  // namespace

std::string serialize_arguments(const ArgList& args) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& [flag, value] : args) j.push_back({flag, value});
  return j.dump();
}

ArgList parse_arguments(const std::string& text) {
  ArgList out;
  try {
    for (const nlohmann::json& pair : nlohmann::json::parse(text))
      out.emplace_back(pair.at(0).get<std::string>(), pair.at(1).get<std::string>());
  } catch (const nlohmann::json::exception& e) {
    MT_FAIL("rank 0's argument list is not a JSON array of [flag, value] pairs (", e.what(),
            "); fix: launch every rank with the same megatron build");
  }
  return out;
}

std::string argument_difference(const ArgList& mine, int my_rank, const ArgList& rank0) {
  const std::string me = "rank " + std::to_string(my_rank);
  for (size_t i = 0; i < mine.size() || i < rank0.size(); ++i) {
    if (i >= mine.size() || i >= rank0.size() || mine[i].first != rank0[i].first) {
      const std::string a = i < mine.size() ? mine[i].first : "(end)";
      const std::string b = i < rank0.size() ? rank0[i].first : "(end)";
      return me + " knows other flags than rank 0 (its flag " + std::to_string(i + 1) + " is " +
             a + ", rank 0's " + b + "): another megatron build; fix: launch every rank with "
             "the same megatron binary and arguments";
    }
    if (mine[i].second != rank0[i].second)
      return me + " was launched " + launched_with(mine[i].first, mine[i].second) +
             " but rank 0 " + launched_with(rank0[i].first, rank0[i].second) + kFix;
  }
  return "";
}

void check_same_arguments(const ArgList& mine, const Communicator& world) {
  if (world.size() <= 1) return;
  const std::string text = serialize_arguments(mine);
  const std::string rank0_text = broadcast_text(world, text, 0);
  std::string problem;
  if (rank0_text != text) {
    try {
      problem = argument_difference(mine, world.rank(), parse_arguments(rank0_text));
    } catch (const Error& e) {
      problem = e.what();
    }
    if (problem.empty())  // equal lists, different text: a build that serialises otherwise
      problem = "rank " + std::to_string(world.rank()) + " writes its arguments otherwise "
                "than rank 0: another megatron build; fix: launch every rank with the same "
                "megatron binary";
  }
  // The lowest rank with a problem (world size - rank, maximised; 0: none).
  int first = problem.empty() ? 0 : world.size() - world.rank();
  world.all_reduce_max(&first, 1);
  if (first == 0) return;
  const std::string reported = broadcast_text(world, problem, world.size() - first);
  // Every rank stops with the message (a mismatching one with its own):
  // whichever reaches abort_job first, its line says what is wrong.
  MT_FAIL(problem.empty() ? reported : problem);
}

}  // namespace mt
