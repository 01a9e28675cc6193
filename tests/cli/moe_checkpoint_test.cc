// Checkpoints of mixture-of-experts runs under mpirun: a Llama-style MoE
// model trained 3 iterations at one layout, saved, and resumed for 3 more at
// another (EP, TP, PP, DP, plain or distributed optimizer) gives the losses of
// an uninterrupted one-rank run of 6 iterations (1e-5 relative: round-off
// only), and the weights it saves at the end equal that run's. Each expert is
// written once, into its EP rank's expert directory (mp_rank_00_PPP_EEE), the
// dense parameters into the mp_rank_TT_PPP files as before; meta.json records
// the EP size and every file's checksum. A missing expert file is named.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "checkpoint/safetensors.h"
#include "checkpoint_test_util.h"
#include "cli_test_util.h"

namespace mt::test {
namespace moe_checkpoint_test {

namespace fs = std::filesystem;

// Llama-style MoE: 2 layers of 4 experts (top-2, SwiGLU, no biases) and a
// shared expert (dense, TP-split: in the mp_rank files) with the
// load-balancing and z losses, micro-batch 2 (the later flag wins) so that
// DP 4 keeps the global batch of 8. One rank pads the vocabulary to 64, as
// TP 2 does with --make-vocab-size-divisible-by 32.
std::string moe_flags() {
  return tiny_model_flags() +
         " --micro-batch-size 2 --normalization RMSNorm --position-embedding-type rope"
         " --swiglu --ffn-hidden-size 64 --disable-bias-linear"
         " --untie-embeddings-and-output-weights --num-experts 4 --moe-router-topk 2"
         " --moe-aux-loss-coeff 0.01 --moe-z-loss-coeff 0.001 --moe-ffn-hidden-size 48"
         " --moe-shared-expert-intermediate-size 32 --train-iters 6 --eval-interval 3 --eval-iters 1";
}

struct Layout {
  int ranks;
  std::string flags;  // the parallel flags (and the vocabulary padding)
};

const std::string kOneRankVocab = " --make-vocab-size-divisible-by 64";

std::string launch(const Layout& l) {
  return (l.ranks == 1 ? megatron() : mpirun(l.ranks)) + " train";
}

class MoeCheckpoint : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    data_ = prepare_data(*dir_, synthetic_corpus(200));
    const RunResult r = run(megatron() + " train" + data_ + moe_flags() + kOneRankVocab +
                            " --save " + dir_->file("ref") + " --log-json " +
                            dir_->file("ref.json"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    ref_ = new JsonLogLines(read_log_json(dir_->file("ref.json")));
    ASSERT_EQ(ref_->train.size(), 6u);
    ASSERT_EQ(ref_->eval.size(), 2u);
  }
  static void TearDownTestSuite() {
    delete ref_;
    delete dir_;
  }

  // Trains 3 iterations at `from` saving dir/<tag>; returns the iteration dir.
  static std::string save_at_3(const std::string& tag, const Layout& from) {
    const RunResult r = run(launch(from) + data_ + moe_flags() + from.flags +
                            " --exit-interval 3 --save " + dir_->file(tag));
    EXPECT_EQ(r.exit_code, 0) << tag << "\n" << r.output;
    return dir_->file(tag + "/iter_0000003");
  }

  // Resumes dir/<tag> at `to` for iterations 4-6 (saving them to
  // dir/<tag>_<name>): their losses and the last validation loss equal the
  // one-rank run's; returns the resumed run's last iteration dir.
  static std::string resume_matches(const std::string& tag, const std::string& name,
                                    const Layout& to) {
    const std::string out = tag + "_" + name;
    const RunResult r = run(launch(to) + data_ + moe_flags() + to.flags + " --load " +
                            dir_->file(tag) + " --save " + dir_->file(out) + " --log-json " +
                            dir_->file(out + ".json"));
    EXPECT_EQ(r.exit_code, 0) << out << "\n" << r.output;
    if (r.exit_code != 0) return "";
    EXPECT_NE(r.output.find("loaded checkpoint"), std::string::npos) << r.output;
    const JsonLogLines got = read_log_json(dir_->file(out + ".json"));
    EXPECT_EQ(got.train.size(), 3u) << out;
    double worst = 0;
    for (const auto& [it, j] : got.train) {
      EXPECT_GE(it, 4) << out;
      const double a = ref_->train.at(it).at("loss").get<double>();
      const double b = j.at("loss").get<double>();
      EXPECT_NEAR(b, a, 1e-5 * std::abs(a)) << out << " iteration " << it;
      worst = std::max(worst, std::abs(b - a) / std::abs(a));
    }
    EXPECT_EQ(got.eval.size(), 1u) << out;
    if (!got.eval.empty()) {
      const double a = ref_->eval.back().at("val_loss").get<double>();
      const double b = got.eval.back().at("val_loss").get<double>();
      EXPECT_NEAR(b, a, 1e-5 * a) << out;
      worst = std::max(worst, std::abs(b - a) / a);
    }
    std::printf("%s: worst relative loss difference to one rank %.3g\n", out.c_str(), worst);
    return dir_->file(out + "/iter_0000006");
  }

  // The weights of the resumed run's last checkpoint (saved at `tp`, `pp`)
  // equal the one-rank run's.
  static void expect_weights_match(const std::string& iter_dir, int tp, int pp) {
    SafetensorsReader ref_dense(dir_->file("ref/iter_0000006/mp_rank_00_000/model.safetensors"));
    SafetensorsReader ref_experts(
        dir_->file("ref/iter_0000006/mp_rank_00_000_000/model.safetensors"));
    for (const SafetensorsReader* ref : {&ref_dense, &ref_experts})
      for (const std::string& name : ref->names()) {
        std::vector<float> a(static_cast<size_t>(ref->info(name).numel()));
        ref->read_f32(name, a.data(), int64_t(a.size()));
        EXPECT_LT(rel_diff(a, gathered(iter_dir, name, tp, pp)), 1e-5) << iter_dir << " " << name;
      }
  }

  static TempDir* dir_;
  static std::string data_;
  static JsonLogLines* ref_;
};

TempDir* MoeCheckpoint::dir_ = nullptr;
std::string MoeCheckpoint::data_;
JsonLogLines* MoeCheckpoint::ref_ = nullptr;

const Layout kOne{1, kOneRankVocab};
const Layout kEp2{2, kOneRankVocab + " --expert-model-parallel-size 2"};
const Layout kEp2Dp2{4, kOneRankVocab + " --expert-model-parallel-size 2"};
const Layout kEp2Dp2Zero{4, kOneRankVocab +
                                " --expert-model-parallel-size 2 --use-distributed-optimizer"};

// The names of the tensors in `path`.
std::set<std::string> names_in(const std::string& path) {
  SafetensorsReader r(path);
  const auto n = r.names();
  return {n.begin(), n.end()};
}

// EP 2 x DP 2 (each expert on 2 ranks) to one rank; the layout on disk: the
// experts of EP rank e in mp_rank_00_000_00e only, once, written by expert-DP
// rank 0 (plain optimizer: one optim_edp_000), meta.json recording EP and
// every file.
TEST_F(MoeCheckpoint, Ep2Dp2ToOneRank) {
  const std::string iter = save_at_3("ep2dp2", kEp2Dp2);
  const auto meta = nlohmann::json::parse(read_text(iter + "/meta.json"));
  EXPECT_EQ(meta.at("expert_model_parallel_size"), 2);
  EXPECT_EQ(meta.at("data_parallel_size"), 4);
  std::set<std::string> experts;
  for (int e = 0; e < 2; ++e) {
    char d[32];
    std::snprintf(d, sizeof d, "mp_rank_00_000_%03d", e);
    for (const std::string& f : {std::string("/model.safetensors"),
                                 std::string("/optim_edp_000.safetensors")})
      EXPECT_TRUE(meta.at("files").contains(d + f)) << d << f;
    EXPECT_FALSE(exists(iter + "/" + d + "/optim_edp_001.safetensors"));
    for (const std::string& n : names_in(iter + "/" + d + "/model.safetensors")) {
      const bool of_e = n.find(".local_experts." + std::to_string(2 * e) + ".") !=
                            std::string::npos ||
                        n.find(".local_experts." + std::to_string(2 * e + 1) + ".") !=
                            std::string::npos;
      EXPECT_TRUE(of_e) << d << " holds " << n;
      EXPECT_TRUE(experts.insert(n).second) << n << " written twice";
    }
  }
  EXPECT_EQ(experts.size(), 2u * 4u * 2u);  // layers x experts x (fc1, fc2)
  for (const std::string& n : names_in(iter + "/mp_rank_00_000/model.safetensors"))
    EXPECT_EQ(n.find("local_experts"), std::string::npos) << n << " in the dense file";
  EXPECT_FALSE(exists(iter + "/mp_rank_00_000/optim_dp_001.safetensors"));
  resume_matches("ep2dp2", "one", kOne);
}

// One rank to EP 2: each rank loads half the experts by their names.
TEST_F(MoeCheckpoint, OneRankToEp2) {
  save_at_3("one", kOne);
  const std::string last = resume_matches("one", "ep2", kEp2);
  if (!last.empty()) expect_weights_match(last, 1, 1);
}

// The distributed optimizer at EP 2 x DP 2: every rank writes its slices of
// the dense state (optim_dp_DDD) and of its experts' (optim_edp_DDD, with the
// expert-DP rank and size); they load into the plain optimizer at EP 2 and on
// one rank.
TEST_F(MoeCheckpoint, DistributedOptimizerToPlain) {
  const std::string iter = save_at_3("zero", kEp2Dp2Zero);
  for (int e = 0; e < 2; ++e)
    for (int d = 0; d < 2; ++d) {
      char f[64];
      std::snprintf(f, sizeof f, "/mp_rank_00_000_%03d/optim_edp_%03d.safetensors", e, d);
      ASSERT_TRUE(exists(iter + f)) << f;
      SafetensorsReader r(iter + f);
      EXPECT_EQ(r.metadata_or("edp_rank", ""), std::to_string(d)) << f;
      EXPECT_EQ(r.metadata_or("edp_size", ""), "2") << f;
      EXPECT_NE(r.metadata_or("slices", ""), "") << f;
    }
  resume_matches("zero", "ep2", kEp2);
  resume_matches("zero", "one", kOne);
}

// TP 2 (sequence parallel) x PP 2 x EP 2 on 4 ranks, where the two TP ranks of
// a stage hold different experts, to one rank; then from one rank to that
// layout with the distributed optimizer.
TEST_F(MoeCheckpoint, TensorAndPipelineParallel) {
  const Layout tp_pp{4, " --tensor-model-parallel-size 2 --sequence-parallel"
                        " --pipeline-model-parallel-size 2 --make-vocab-size-divisible-by 32"
                        " --expert-model-parallel-size 2"};
  const std::string iter = save_at_3("tppp", tp_pp);
  for (const char* d : {"mp_rank_00_000_000", "mp_rank_00_000_001", "mp_rank_00_001_000",
                        "mp_rank_00_001_001", "mp_rank_01_000", "mp_rank_01_001"})
    EXPECT_TRUE(exists(iter + "/" + d + "/model.safetensors")) << d;
  resume_matches("tppp", "one", kOne);
  save_at_3("one_to_tppp", kOne);
  Layout zero = tp_pp;
  zero.flags += " --use-distributed-optimizer";
  const std::string last = resume_matches("one_to_tppp", "tppp", zero);
  if (!last.empty()) expect_weights_match(last, 2, 2);
}

// A missing expert file is named (meta.json recorded it), not loaded around.
TEST_F(MoeCheckpoint, MissingExpertFileIsNamed) {
  const std::string iter = save_at_3("broken", kEp2);
  fs::remove(iter + "/mp_rank_00_000_001/model.safetensors");
  const RunResult r = run(megatron() + " train" + data_ + moe_flags() + kOneRankVocab +
                          " --load " + dir_->file("broken"));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("mp_rank_00_000_001/model.safetensors is missing"), std::string::npos)
      << r.output;
}

}  // namespace moe_checkpoint_test
}  // namespace mt::test
