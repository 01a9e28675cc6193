// Context parallelism (--context-parallel-size) end to end under mpirun: the
// losses of every iteration and the validation loss equal one rank's (1e-5
// relative; round-off only, dropout on), the final weights too (1e-5: the
// gradients were reduced over DP x CP); checkpoints carry no CP (a run saved
// at CP 2 resumes at CP 1 and back); misfits are refused by every rank with
// the numbers before any work.
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "checkpoint/safetensors.h"
#include "checkpoint_test_util.h"
#include "cli_test_util.h"

namespace mt::test {
namespace {

struct Layout {
  const char* tag;
  int ranks;
  std::string flags;
};

std::string llama_model_flags() {
  return " --num-layers 2 --normalization RMSNorm --position-embedding-type rope --swiglu"
         " --ffn-hidden-size 64 --group-query-attention --num-query-groups 2"
         " --disable-bias-linear --untie-embeddings-and-output-weights";
}

// Runs every layout and compares it with one rank of the same flags.
void expect_layouts_match_one_rank(const std::string& model, const std::vector<Layout>& layouts) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(200));
  const std::string flags = " train" + data + tiny_model_flags() + model +
                            " --train-iters 6 --hidden-dropout 0.1 --attention-dropout 0.1"
                            " --eval-interval 3 --eval-iters 1";
  const RunResult one = run(megatron() + flags + " --save " + dir.file("ref") + " --log-json " +
                            dir.file("ref.json"));
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const JsonLogLines ref = read_log_json(dir.file("ref.json"));
  ASSERT_EQ(ref.train.size(), 6u);
  ASSERT_EQ(ref.eval.size(), 2u);
  SafetensorsReader ref_model(dir.file("ref/iter_0000006/mp_rank_00_000/model.safetensors"));
  for (const Layout& l : layouts) {
    const RunResult r = run(mpirun(l.ranks) + flags + l.flags + " --save " + dir.file(l.tag) +
                            " --log-json " + dir.file(std::string(l.tag) + ".json"));
    ASSERT_EQ(r.exit_code, 0) << l.tag << "\n" << r.output;
    const JsonLogLines got = read_log_json(dir.file(std::string(l.tag) + ".json"));
    ASSERT_EQ(got.train.size(), ref.train.size()) << l.tag;
    for (const auto& [it, j] : ref.train) {
      const double a = j.at("loss").get<double>(), b = got.train.at(it).at("loss").get<double>();
      EXPECT_NEAR(b, a, 1e-5 * std::abs(a)) << l.tag << " iteration " << it;
      const double ga = j.at("grad_norm").get<double>();
      EXPECT_NEAR(got.train.at(it).at("grad_norm").get<double>(), ga, 1e-4 * ga)
          << l.tag << " iteration " << it;
    }
    ASSERT_EQ(got.eval.size(), ref.eval.size()) << l.tag;
    for (size_t e = 0; e < ref.eval.size(); ++e) {
      const double a = ref.eval[e].at("val_loss").get<double>();
      EXPECT_NEAR(got.eval[e].at("val_loss").get<double>(), a, 1e-5 * a) << l.tag;
    }
    const int tp = l.flags.find("--tensor-model-parallel-size 2") != std::string::npos ? 2 : 1;
    const int pp = l.flags.find("--pipeline-model-parallel-size 2") != std::string::npos ? 2 : 1;
    for (const std::string& name : ref_model.names()) {
      std::vector<float> a(static_cast<size_t>(ref_model.info(name).numel()));
      ref_model.read_f32(name, a.data(), int64_t(a.size()));
      EXPECT_LT(rel_diff(a, gathered(dir.file(std::string(l.tag) + "/iter_0000006"), name, tp, pp)),
                weight_tolerance(name, 1e-5))
          << l.tag << " " << name;
    }
  }
}

TEST(ContextParallel, Gpt2LayoutsMatchOneRank) {
  expect_layouts_match_one_rank(
      "", {{"cp2", 2, " --context-parallel-size 2"},
           {"cp4", 4, " --context-parallel-size 4 --overlap-grad-reduce"},
           {"tp2cp2sp", 4,
            " --context-parallel-size 2 --tensor-model-parallel-size 2 --sequence-parallel"
            " --make-vocab-size-divisible-by 64"},
           {"cp2pp2dp2", 8,
            " --context-parallel-size 2 --pipeline-model-parallel-size 2"
            " --use-distributed-optimizer"}});
}

TEST(ContextParallel, LlamaGqaMatchesOneRank) {
  expect_layouts_match_one_rank(
      llama_model_flags(),
      {{"llama_cp2", 2, " --context-parallel-size 2"},
       {"llama_cp2_recompute", 2,
        " --context-parallel-size 2 --recompute-granularity full --recompute-method uniform"
        " --recompute-num-layers 1"}});
}

// Weights are replicated over CP, so checkpoints carry no CP: a run saved at
// CP 2 continues at CP 1 with the uninterrupted run's losses, and back.
TEST(ContextParallel, CheckpointsResumeAtAnotherCp) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(200));
  const std::string flags = " train" + data + tiny_model_flags() +
                            " --train-iters 8 --hidden-dropout 0.1 --attention-dropout 0.1"
                            " --eval-interval 0 --use-distributed-optimizer";
  const RunResult whole = run(megatron() + flags + " --log-json " + dir.file("whole.json"));
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  const JsonLogLines ref = read_log_json(dir.file("whole.json"));
  const std::pair<std::string, std::string> legs[] = {
      {mpirun(2) + flags + " --context-parallel-size 2", megatron() + flags},  // CP 2 -> CP 1
      {megatron() + flags, mpirun(2) + flags + " --context-parallel-size 2"},  // CP 1 -> CP 2
  };
  for (size_t i = 0; i < 2; ++i) {
    const std::string ckpt = dir.file("c" + std::to_string(i));
    const RunResult first = run(legs[i].first + " --exit-interval 4 --save " + ckpt);
    ASSERT_EQ(first.exit_code, 0) << first.output;
    const std::string log = dir.file("resumed" + std::to_string(i) + ".json");
    const RunResult second = run(legs[i].second + " --load " + ckpt + " --log-json " + log);
    ASSERT_EQ(second.exit_code, 0) << second.output;
    const JsonLogLines got = read_log_json(log);
    ASSERT_EQ(got.train.size(), 4u) << i;
    for (int64_t it = 5; it <= 8; ++it) {
      const double a = ref.train.at(it).at("loss").get<double>();
      EXPECT_NEAR(got.train.at(it).at("loss").get<double>(), a, 1e-5 * a) << i << " it " << it;
    }
  }
}

// --log-memory at CP 2 (GPT-2, and Llama with GQA): every class measured
// within 5% of the prediction on both ranks, and the saved activations halve
// (each rank holds s/2 rows).
TEST(ContextParallel, MemoryIsPredictedAndActivationsDivideByCp) {
  TempDir dir;
  const std::string flags = " train" + prepare_data(dir, synthetic_corpus(100)) +
                            " --num-layers 4 --hidden-size 1024 --num-attention-heads 8"
                            " --seq-length 256 --micro-batch-size 4 --global-batch-size 8"
                            " --train-iters 1 --lr 1e-4 --split 90,10,0 --eval-interval 0"
                            " --peak-tflops 1 --log-memory --make-vocab-size-divisible-by 64";
  std::map<std::string, nlohmann::json> rank0;
  // (Llama with 2 query groups of 8 heads: the ring's K/V travel as groups.)
  const std::string llama = " --normalization RMSNorm --position-embedding-type rope --swiglu"
                            " --ffn-hidden-size 2816 --group-query-attention --num-query-groups 2"
                            " --disable-bias-linear --untie-embeddings-and-output-weights";
  for (const auto& [tag, cmd] :
       {std::pair<std::string, std::string>{"cp1", megatron() + flags},
        {"cp2", mpirun(2) + flags + " --context-parallel-size 2"},
        {"llama_cp2", mpirun(2) + flags + llama + " --context-parallel-size 2"}}) {
    const std::string log = dir.file(tag + ".json");
    const RunResult r = run(cmd + " --log-json " + log);
    ASSERT_EQ(r.exit_code, 0) << tag << "\n" << r.output;
    const JsonLogLines lines = read_log_json(log);
    ASSERT_EQ(lines.memory_by_rank.size(), tag == "cp1" ? 1u : 2u) << tag;
    for (const auto& [rank, m] : lines.memory_by_rank)
      for (const char* c : {"params", "grads", "optimizer", "activations", "workspace"}) {
        const double p = m.at(c).at("predicted_bytes").get<double>();
        const double got = m.at(c).at("measured_bytes").get<double>();
        EXPECT_NEAR(got / p, 1.0, 0.05) << tag << " rank " << rank << " " << c << ": measured "
                                        << got << " predicted " << p;
      }
    rank0[tag] = lines.memory;
  }
  auto bytes = [&](const char* tag, const char* c, const char* kind) {
    return rank0.at(tag).at(c).at(kind).get<double>();
  };
  EXPECT_EQ(bytes("cp2", "params", "predicted_bytes"), bytes("cp1", "params", "predicted_bytes"));
  EXPECT_NEAR(bytes("cp2", "activations", "predicted_bytes") /
                  bytes("cp1", "activations", "predicted_bytes"), 0.5, 0.01);
  EXPECT_NEAR(bytes("cp2", "activations", "measured_bytes") /
                  bytes("cp1", "activations", "measured_bytes"), 0.5, 0.03);
}

struct Misfit {
  int ranks;
  std::string flags, message;
};

TEST(ContextParallel, MisfitsAreRefusedWithTheNumbers) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(50));
  const Misfit cases[] = {
      {1, " --context-parallel-size 2", "TP(1) x PP(1) x CP(2) = 2"},
      {2, " --context-parallel-size 2 --tensor-model-parallel-size 2", "TP(2) x PP(1) x CP(2) = 4"},
      {2, " --context-parallel-size 2 --seq-length 30",
       "--seq-length 30 is not divisible by 2 x --context-parallel-size 2 = 4"},
      {2, " --context-parallel-size 0", "CP=0"},
      {2, " --context-parallel-size 2 --bf16", "--bf16 with --context-parallel-size 2"},
  };
  for (const Misfit& m : cases) {
    const RunResult r = run(mpirun(m.ranks) + " train" + data + tiny_model_flags() +
                            " --train-iters 2" + m.flags);
    EXPECT_NE(r.exit_code, 0) << m.flags << "\n" << r.output;
    EXPECT_NE(r.exit_code, 124) << "job hung: " << m.flags << "\n" << r.output;
    EXPECT_NE(r.output.find(m.message), std::string::npos) << m.flags << "\n" << r.output;
  }
}

}  // namespace
}  // namespace mt::test
