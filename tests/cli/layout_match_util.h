// The equivalence harness of the layout tests (moe_test, fsdp_test): one rank
// and then every layout train the same model on the same data, and the
// layouts' --log-json losses (and the keys asked for), gradient norms and
// validation losses must equal one rank's to a relative tolerance.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "cli_test_util.h"

namespace mt::test {

struct Layout {
  const char* tag;
  int ranks;
  std::string flags;
};

// The padded vocabulary is a multiple of this times TP: one rank's 64 is TP2's 32.
inline std::string vocab_padding(const std::string& layout_flags) {
  const bool tp2 = layout_flags.find("--tensor-model-parallel-size 2") != std::string::npos;
  return tp2 ? " --make-vocab-size-divisible-by 32" : " --make-vocab-size-divisible-by 64";
}

inline double rel(double a, double b) { return std::abs(a - b) / std::max(std::abs(a), 1e-12); }

// What a test adds per layout run: its output, one rank's log and its own.
using LayoutCheck = std::function<void(const Layout&, const RunResult&, const JsonLogLines& ref,
                                       const JsonLogLines& got)>;

// Runs one rank and every layout with `model` flags (6 iterations, evaluations
// at 3 and 6) and compares `keys` of every iteration (tol relative), the grad
// norms (10 x tol) and the validation losses (tol); `check` adds its own.
// Returns the worst relative difference of the keys (printed under `what`).
// The data: `corpus` (default synthetic_corpus(200)) preprocessed with
// `preprocess_flags`.
inline double expect_layouts_match_one_rank(const std::string& model,
                                            const std::vector<Layout>& layouts, double tol,
                                            const std::vector<const char*>& keys, const char* what,
                                            const LayoutCheck& check = {},
                                            const std::string& corpus = "",
                                            const std::string& preprocess_flags = "") {
  TempDir dir;
  const std::string base =
      " train" +
      prepare_data(dir, corpus.empty() ? synthetic_corpus(200) : corpus, preprocess_flags) + model;
  const RunResult one =
      run(megatron() + base + vocab_padding("") + " --log-json " + dir.file("ref.json"));
  EXPECT_EQ(one.exit_code, 0) << one.output;
  if (one.exit_code != 0) return 1;
  const JsonLogLines ref = read_log_json(dir.file("ref.json"));
  EXPECT_EQ(ref.train.size(), 6u);
  EXPECT_EQ(ref.eval.size(), 2u);
  double worst = 0;
  for (const Layout& l : layouts) {
    const std::string log = dir.file(std::string(l.tag) + ".json");
    const RunResult r =
        run(mpirun(l.ranks) + base + l.flags + vocab_padding(l.flags) + " --log-json " + log);
    EXPECT_EQ(r.exit_code, 0) << l.tag << "\n" << r.output;
    if (r.exit_code != 0) continue;
    const JsonLogLines got = read_log_json(log);
    EXPECT_EQ(got.train.size(), ref.train.size()) << l.tag;
    EXPECT_EQ(got.eval.size(), ref.eval.size()) << l.tag;
    if (got.train.size() != ref.train.size() || got.eval.size() != ref.eval.size()) continue;
    for (const auto& [it, j] : ref.train) {
      for (const char* key : keys) {
        const double a = j.at(key).get<double>(), b = got.train.at(it).at(key).get<double>();
        EXPECT_LT(rel(a, b), tol) << l.tag << " iteration " << it << " " << key << ": " << a
                                  << " vs " << b;
        worst = std::max(worst, rel(a, b));
      }
      const double ga = j.at("grad_norm").get<double>();
      const double gb = got.train.at(it).at("grad_norm").get<double>();
      EXPECT_LT(rel(ga, gb), 10 * tol) << l.tag << " iteration " << it;
    }
    for (size_t e = 0; e < ref.eval.size(); ++e)
      EXPECT_LT(
          rel(ref.eval[e].at("val_loss").get<double>(), got.eval[e].at("val_loss").get<double>()),
          tol)
          << l.tag << " validation " << e;
    if (check) check(l, r, ref, got);
  }
  std::printf("%s vs one rank: worst relative difference %.3g\n", what, worst);
  return worst;
}

}  // namespace mt::test
