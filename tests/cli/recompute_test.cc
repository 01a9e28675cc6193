// Full activation recompute (--recompute-granularity full, uniform and block)
// gives the losses of keeping every activation — dropout on, so the masks of
// the recomputed forward must equal the first forward's — on one rank and
// with TP+SP and PP, and never plans more activation bytes (fewer with
// groups of one layer). Selective recompute of the MoE layers
// (--moe-layer-recompute, --recompute-modules moe) and of the dense MLPs
// (mlp), and of the norms' outputs (layernorm, alone and with mlp and moe:
// the MLP's re-run reads the recomputed norm) gives bit for bit the losses,
// router losses, gradient norms and
// final weights (the expert biases too) of keeping them, on one rank and at
// TP2 (SP) x EP2, with a dense first layer and a shared expert, and plans
// fewer activation bytes; also at PP2 (micro-batches in flight). So do the
// partial modules: shared_experts (the shared expert's forward redone),
// moe_act (the experts' activation redone from fc1; with --moe-grouped-gemm,
// as Megatron requires) and mla_up_proj (MLA's per-head q, k, v redone from
// the latents: with the q latent, and at PP2 without), alone, together and
// under moe (which subsumes moe_act and shared_experts).
#include <cmath>
#include <filesystem>
#include <regex>
#include <utility>
#include <vector>

#include "checkpoint/safetensors.h"

#include "cli_test_util.h"

namespace mt::test {
namespace recompute_test {

// "activations 430.8 KB" from the memory line, in bytes.
double activation_bytes(const std::string& output) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex("activations ([0-9.]+) (KB|MB|GB)"))) return -1;
  const double x = std::stod(m[1]);
  return x * (m[2] == "KB" ? 1e3 : m[2] == "MB" ? 1e6 : 1e9);
}

TEST(Recompute, FullUniformAndBlockMatchKeepingEverything) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(200));
  const std::string flags = " train" + data + tiny_model_flags() +
                            " --num-layers 4 --micro-batch-size 2 --global-batch-size 8"
                            " --train-iters 6 --hidden-dropout 0.1 --attention-dropout 0.1"
                            " --eval-interval 0";
  struct Case {
    std::string name, launcher, layout;
  };
  const Case layouts[] = {
      {"one rank", megatron(), ""},
      {"TP2 SP", mpirun(2),
       " --tensor-model-parallel-size 2 --sequence-parallel --make-vocab-size-divisible-by 64"},
      {"PP2", mpirun(2), " --pipeline-model-parallel-size 2"}};
  const std::string recompute[] = {
      " --recompute-granularity full --recompute-method uniform --recompute-num-layers 1",
      " --recompute-granularity full --recompute-method uniform --recompute-num-layers 2",
      " --recompute-granularity full --recompute-method block --recompute-num-layers 1",
      " --recompute-granularity selective"};
  for (const Case& c : layouts) {
    const RunResult base =
        run(c.launcher + flags + c.layout + " --log-json " + dir.file("base.json"));
    ASSERT_EQ(base.exit_code, 0) << c.name << "\n" << base.output;
    const JsonLogLines ref = read_log_json(dir.file("base.json"));
    std::filesystem::remove(dir.file("base.json"));
    for (const std::string& r : recompute) {
      const RunResult got = run(c.launcher + flags + c.layout + r + " --log-json " + dir.file("r.json"));
      ASSERT_EQ(got.exit_code, 0) << c.name << r << "\n" << got.output;
      const JsonLogLines log = read_log_json(dir.file("r.json"));
      std::filesystem::remove(dir.file("r.json"));
      ASSERT_EQ(log.train.size(), 6u);
      for (const auto& [it, j] : ref.train) {
        const double a = j.at("loss").get<double>();
        EXPECT_NEAR(log.train.at(it).at("loss").get<double>(), a, 1e-6 * a) << c.name << r;
      }
      // Recomputed layers share scratch records sized for one group, so with
      // groups of one layer a chunk of L layers keeps 1 record instead of L;
      // other settings save less (a group as large as the chunk saves none).
      if (r.find("uniform --recompute-num-layers 1") != std::string::npos) {
        EXPECT_LT(activation_bytes(got.output), activation_bytes(base.output)) << c.name << r;
      } else {
        EXPECT_LE(activation_bytes(got.output), activation_bytes(base.output)) << c.name << r;
      }
    }
  }
}

// A tiny MoE whose first layer is dense (--moe-layer-freq), with a shared
// expert, sigmoid routing with the expert bias, aux and z losses and dropout;
// 4 iterations, saved at the end.
std::string moe_recompute_model() {
  return " --num-layers 4 --hidden-size 32 --num-attention-heads 4 --seq-length 32"
         " --micro-batch-size 2 --global-batch-size 8 --lr 3e-3 --train-iters 4"
         " --split 90,10,0 --peak-tflops 1 --log-interval 1 --eval-interval 0"
         " --normalization RMSNorm --position-embedding-type rope --swiglu --ffn-hidden-size 64"
         " --disable-bias-linear --untie-embeddings-and-output-weights"
         " --hidden-dropout 0.1 --attention-dropout 0.1 --make-vocab-size-divisible-by 64"
         " --num-experts 4 --moe-router-topk 2 --moe-ffn-hidden-size 48"
         " --moe-layer-freq '[0]*1+[1]*3' --moe-shared-expert-intermediate-size 32"
         " --moe-router-score-function sigmoid --moe-router-enable-expert-bias"
         " --moe-router-bias-update-rate 0.01 --moe-aux-loss-coeff 0.01 --moe-z-loss-coeff 0.001"
         " --moe-token-dispatcher-type alltoall --save-interval 4";
}

// Every tensor of every model.safetensors under two checkpoint iterations of
// the same layout, equal bit for bit.
void expect_same_weights(const std::string& a, const std::string& b, const std::string& what) {
  int files = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(a)) {
    if (e.path().filename() != "model.safetensors") continue;
    ++files;
    const std::string rel = std::filesystem::relative(e.path(), a).string();
    SafetensorsReader ra(e.path().string()), rb(b + "/" + rel);
    for (const std::string& name : ra.names()) {
      std::vector<float> x(size_t(ra.info(name).numel())), y(x.size());
      ra.read_f32(name, x.data(), int64_t(x.size()));
      rb.read_f32(name, y.data(), int64_t(y.size()));
      EXPECT_EQ(x, y) << what << ": " << rel << " " << name;
    }
  }
  EXPECT_GT(files, 0) << what << ": no weights under " << a;
}

struct Layout {
  std::string name, launcher, flags;
};

// Each way to recompute the MoE layers (and the dense MLP) at `layout` gives
// the run without recompute bit for bit: its log's losses, gradient norms and
// router losses, and its saved weights (the expert biases with them); it
// plans fewer activation bytes (the three MoE layers' records out, one
// shared record in the workspace; the dense layer's MLP record alone, less).
void expect_recompute_matches(const Layout& layout, const std::string& model,
                              const std::vector<std::pair<std::string, double>>& recompute) {
  TempDir dir;
  const std::string flags =
      " train" + prepare_data(dir, synthetic_corpus(200)) + model + layout.flags;
  const char* keys[] = {"loss", "grad_norm", "load_balancing_loss", "z_loss"};
  const std::string base_dir = dir.file("base");
  const RunResult base = run(layout.launcher + flags + " --log-memory --save " + base_dir +
                             " --log-json " + dir.file("base.json"));
  ASSERT_EQ(base.exit_code, 0) << layout.name << "\n" << base.output;
  const JsonLogLines ref = read_log_json(dir.file("base.json"));
  ASSERT_EQ(ref.train.size(), 4u) << layout.name;
  for (const auto& [r, most] : recompute) {
    const std::string what = layout.name + r, got_dir = dir.file("got");
    const RunResult got = run(layout.launcher + flags + r + " --log-memory --save " + got_dir +
                              " --log-json " + dir.file("r.json"));
    ASSERT_EQ(got.exit_code, 0) << what << "\n" << got.output;
    const JsonLogLines log = read_log_json(dir.file("r.json"));
    ASSERT_EQ(log.train.size(), 4u) << what;
    for (const auto& [it, j] : ref.train)
      for (const char* k : keys)
        EXPECT_EQ(log.train.at(it).at(k).get<double>(), j.at(k).get<double>())
            << what << " iteration " << it << " " << k;
    expect_same_weights(base_dir + "/iter_0000004", got_dir + "/iter_0000004", what);
    EXPECT_LT(activation_bytes(got.output), most * activation_bytes(base.output)) << what;
    std::filesystem::remove_all(got_dir);
    std::filesystem::remove(dir.file("r.json"));
  }
}

void expect_selective_recompute_matches(const Layout& layout) {
  const std::string sel = " --recompute-granularity selective --recompute-modules";
  expect_recompute_matches(layout, moe_recompute_model(),
                           {{" --moe-layer-recompute", 0.8},
                            {sel + " moe", 0.8},
                            {sel + " core_attn mlp moe", 0.8},
                            {" --recompute-activations --recompute-modules mlp", 0.99},
                            {sel + " layernorm", 0.99},
                            {sel + " layernorm mlp moe", 0.8},
                            {sel + " shared_experts", 0.99}});
  // DeepSeek-shaped: MLA (the q latent, but at PP2 q projected from the
  // input), grouped experts.
  const std::string mla = " --moe-grouped-gemm --multi-latent-attention --kv-lora-rank 8"
                          " --qk-head-dim 8 --qk-pos-emb-head-dim 4 --v-head-dim 6 --qk-layernorm"
                          " --rope-type rope" +
                          std::string(layout.name == "PP2" ? "" : " --q-lora-rank 12");
  expect_recompute_matches(layout, moe_recompute_model() + mla,
                           {{sel + " moe_act", 0.99},
                            {sel + " mla_up_proj", 0.99},
                            {sel + " moe_act shared_experts mla_up_proj layernorm", 0.9},
                            {sel + " moe moe_act shared_experts", 0.8}});
}

TEST(Recompute, SelectiveMoeAndMlpMatchKeepingEverythingOnOneRank) {
  expect_selective_recompute_matches({"one rank", megatron(), ""});
}

TEST(Recompute, SelectiveMoeAndMlpMatchKeepingEverythingAtTp2SpEp2) {
  expect_selective_recompute_matches(
      {"TP2 SP x EP2", mpirun(4),
       " --tensor-model-parallel-size 2 --sequence-parallel --expert-model-parallel-size 2"});
}

// Two micro-batches in flight on the first stage share the one record.
TEST(Recompute, SelectiveMoeAndMlpMatchKeepingEverythingAtPp2) {
  expect_selective_recompute_matches({"PP2", mpirun(2), " --pipeline-model-parallel-size 2"});
}

}  // namespace recompute_test
}  // namespace mt::test
