// What `megatron convert` makes of the Hugging Face folder it is given (issue
// 27 items 6, 9b, 10b, 12a):
//  - weights holding NaN or Inf are refused, naming the tensor and its file,
//    and no output folder is left;
//  - absurd sizes in config.json are refused by key, value and limit before
//    anything is allocated;
//  - invalid values of config.json are reported by file and key, never as a
//    `train` flag the user did not pass;
//  - a GPT-2 whose vocab_size is padded beyond its tokenizer (50304 rows for
//    50257 tokens) imports with the extra rows as padding rows, exports back
//    with vocab_size 50304 byte for byte (also after fine-tuning).
#include <cstring>
#include <filesystem>

#include "checkpoint/safetensors.h"
#include "cli_test_util.h"
#include "convert_test_util.h"
#include "disk_fault_util.h"

namespace mt::test {
namespace convert_input_test {

namespace fs = std::filesystem;

struct Case {
  std::string tag, family, key;
  nlohmann::json value;
  std::vector<std::string> expect;  // in the error line, after "<hf>/config.json: "
};

// Each case: a copy of the family's folder with one config.json key spoiled;
// the import fails with one error line naming the file, the key and a fix,
// mentions no train flag and leaves no --save-dir.
void expect_refused(const TempDir& dir, const std::map<std::string, std::string>& base,
                    const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    const std::string hf = dir.file("hf_" + std::to_string(&c - cases.data()));
    const std::string save = hf + "_ckpt";
    fs::copy(base.at(c.family), hf, fs::copy_options::recursive);
    edit_config(hf, c.key, c.value);
    const RunResult r = run(convert(" --loader hf --saver megatron --load-dir " + hf +
                                    " --save-dir " + save));
    EXPECT_NE(r.exit_code, 0) << c.tag << "\n" << r.output;
    const std::string line = last_error_line(r.output);
    for (const std::string& want : c.expect)
      EXPECT_NE(line.find(hf + "/config.json: " + want), std::string::npos)
          << c.tag << ": '" << want << "' not in: " << line << "\nfull output:\n" << r.output;
    EXPECT_NE(line.find("; fix: "), std::string::npos) << c.tag << ": " << line;
    for (const char* flag : {"--norm-epsilon", "--layernorm-epsilon", "--rotary-base",
                             "--hidden-size", "--num-attention-heads", "--num-layers",
                             "--max-position-embeddings", "--ffn-hidden-size", "bad_alloc"})
      EXPECT_EQ(r.output.find(flag), std::string::npos) << c.tag << " names " << flag << ":\n"
                                                         << r.output;
    EXPECT_FALSE(exists(save)) << c.tag;
  }
}

TEST(ConvertInput, InvalidAndAbsurdConfigValuesAreNamedByFileAndKey) {
  require_torch();
  TempDir dir;
  const std::map<std::string, std::string> base = {{"gpt2", dir.file("gpt2")},
                                                   {"llama", dir.file("llama")}};
  make_hf_folder("gpt2", dir, base.at("gpt2"), 41);
  make_hf_folder("llama", dir, base.at("llama"), 42);
  if (HasFatalFailure()) return;
  const int64_t huge = int64_t(1) << 40;
  const std::string h = std::to_string(huge);
  expect_refused(dir, base, {
      {"rms_norm_eps -1", "llama", "rms_norm_eps", -1, {"'rms_norm_eps' is -1, not a finite number > 0"}},
      {"rope_theta 0", "llama", "rope_theta", 0, {"'rope_theta' is 0, not a finite number > 1"}},
      {"n_head 3", "gpt2", "n_head", 3, {"'n_embd' 32 is not divisible by 'n_head' 3"}},
      {"layer_norm_epsilon 0", "gpt2", "layer_norm_epsilon", 0.0,
       {"'layer_norm_epsilon' is 0.0, not a finite number > 0"}},
      {"initializer_range -0.02", "llama", "initializer_range", -0.02,
       {"'initializer_range' is -0.02, not a finite number > 0"}},
      {"max_position_embeddings 2^40", "llama", "max_position_embeddings", huge,
       {"'max_position_embeddings' is " + h + ", above the limit 16777216"}},
      {"hidden_size 2^40", "llama", "hidden_size", huge,
       {"'hidden_size' is " + h + ", above the limit 131072"}},
      {"num_hidden_layers 2^40", "llama", "num_hidden_layers", huge,
       {"'num_hidden_layers' is " + h + ", above the limit 16384"}},
      {"intermediate_size 2^40", "llama", "intermediate_size", huge,
       {"'intermediate_size' is " + h + ", above the limit 1048576"}},
      {"vocab_size 2^40", "llama", "vocab_size", huge,
       {"'vocab_size' is " + h + ", above the limit 16777216"}},
      {"n_positions 2^63", "gpt2", "n_positions", uint64_t(1) << 63,
       {"'n_positions' is 9223372036854775808, above the limit 16777216"}},
      {"n_layer 0", "gpt2", "n_layer", 0, {"'n_layer' is 0, not an integer >= 1"}},
  });
}

TEST(ConvertInput, NanOrInfWeightsAreRefusedByNameAndLeaveNoFolder) {
  require_torch();
  TempDir dir;
  const std::string base = dir.file("base");
  make_hf_folder("llama", dir, base, 43);
  if (HasFatalFailure()) return;
  const struct {
    std::string tensor, python, what;
  } cases[] = {
      {"model.layers.1.mlp.down_proj.weight", "[3, 5] = float('nan')", "NaN (element 293 of 6144)"},
      {"model.embed_tokens.weight", "[0, 7] = float('-inf')", "Inf (element 7 of"},
  };
  for (const auto& c : cases) {
    const std::string hf = dir.file("hf_" + c.tensor), save = hf + "_ckpt";
    fs::copy(base, hf, fs::copy_options::recursive);
    edit_tensors(hf, "t['" + c.tensor + "']" + c.python);
    const RunResult r = run(convert(" --loader hf --saver megatron --load-dir " + hf +
                                    " --save-dir " + save + " --target-pipeline-parallel-size 2"));
    EXPECT_NE(r.exit_code, 0) << r.output;
    const std::string line = last_error_line(r.output);
    const std::string want = "tensor '" + c.tensor + "' in " + hf + "/model.safetensors holds " + c.what;
    EXPECT_NE(line.find(want), std::string::npos) << "'" << want << "' not in: " << line
                                                  << "\nfull output:\n" << r.output;
    EXPECT_NE(line.find("; fix: "), std::string::npos) << line;
    EXPECT_FALSE(exists(save)) << r.output;
  }
}

// The rows of `name` in a safetensors file, as bytes.
std::string tensor_bytes(const std::string& file, const std::string& name) {
  SafetensorsReader r(file);
  return std::string(static_cast<const char*>(r.raw(name)), r.info(name).bytes());
}

TEST(ConvertInput, Gpt2VocabularyPaddedBeyondItsTokenizerImportsAsPaddingAndExportsBack) {
  require_torch();
  TempDir dir;
  const std::string hf = dir.file("hf"), ckpt = dir.file("ckpt"), back = dir.file("back");
  make_hf_folder("gpt2", dir, hf, 44, 50304);
  if (HasFatalFailure()) return;
  const std::string import = " --loader hf --saver megatron --load-dir " + hf + " --save-dir ";
  const RunResult in = run(convert(import + ckpt));
  ASSERT_EQ(in.exit_code, 0) << in.output;
  EXPECT_NE(in.output.find("vocab_size 50304 = the tokenizer's 50257 + 47 padding rows"),
            std::string::npos) << in.output;
  const nlohmann::json meta = nlohmann::json::parse(read_text(ckpt + "/release/meta.json"));
  EXPECT_EQ(meta.at("args").at("model").at("vocab_size"), 50257);  // the real vocabulary
  EXPECT_EQ(meta.at("args").at("model").at("padded_vocab_size"), 50304);
  EXPECT_EQ(meta.at("args").at("converted_from").at("vocab_size"), 50304);
  // All 50304 rows, padding rows included, are the Hugging Face ones.
  EXPECT_TRUE(tensor_bytes(ckpt + "/release/mp_rank_00_000/model.safetensors",
                           "embedding.word_embeddings.weight") ==
              tensor_bytes(hf + "/model.safetensors", "transformer.wte.weight"));

  const std::string to_hf = " --loader megatron --saver hf --load-dir ";
  const RunResult out = run(convert(to_hf + ckpt + " --save-dir " + back));
  ASSERT_EQ(out.exit_code, 0) << out.output;
  EXPECT_EQ(nlohmann::json::parse(read_text(back + "/config.json")).at("vocab_size"), 50304);
  expect_same_tensors(hf, back);

  // At TP2 the padded vocabulary is 50432: Megatron's extra rows are cut on export.
  ASSERT_EQ(run(convert(import + dir.file("tp2") + " --target-tensor-parallel-size 2")).exit_code, 0);
  ASSERT_EQ(run(convert(to_hf + dir.file("tp2") + " --save-dir " + dir.file("back2"))).exit_code, 0);
  expect_same_tensors(hf, dir.file("back2"));

  // A padding that would drop rows of the folder is refused with the flag that keeps them.
  const RunResult small = run(convert(import + dir.file("d1") + " --make-vocab-size-divisible-by 1"));
  EXPECT_NE(small.exit_code, 0);
  EXPECT_NE(last_error_line(small.output).find(
                hf + "/config.json: 'vocab_size' 50304 is the tokenizer's 50257 + 47 padding rows, "
                     "more than the padded vocabulary of 50257"),
            std::string::npos) << small.output;
  EXPECT_NE(small.output.find("fix: --make-vocab-size-divisible-by 64"), std::string::npos)
      << small.output;
  EXPECT_FALSE(exists(dir.file("d1")));

  // Fine-tuned, then exported: still 50304 rows.
  write_text(dir.file("corpus.txt"), synthetic_corpus(60));
  ASSERT_EQ(run(megatron() + " preprocess --input " + dir.file("corpus.txt") + " --output-prefix " +
                dir.file("data") + " --tokenizer-type GPT2BPETokenizer --vocab-file " + hf +
                "/vocab.json --merge-file " + hf + "/merges.txt --append-eod").exit_code, 0);
  const RunResult tr = run(megatron() + " train --load " + ckpt + " --use-checkpoint-args --save " +
                           dir.file("tuned") + " --data-path " + dir.file("data_text_document") +
                           " --seq-length 32 --micro-batch-size 2 --global-batch-size 4"
                           " --train-iters 2 --lr 1e-3 --log-interval 1 --peak-tflops 1"
                           " --split 90,10,0 --eval-interval 0");
  ASSERT_EQ(tr.exit_code, 0) << tr.output;
  const RunResult tuned = run(convert(to_hf + dir.file("tuned") + " --save-dir " + dir.file("tuned_hf")));
  ASSERT_EQ(tuned.exit_code, 0) << tuned.output;
  EXPECT_EQ(nlohmann::json::parse(read_text(dir.file("tuned_hf") + "/config.json")).at("vocab_size"),
            50304);
  EXPECT_EQ(read_hf_tensors(dir.file("tuned_hf")).at("transformer.wte.weight").shape,
            (std::vector<int64_t>{50304, 32}));
}

}  // namespace convert_input_test
}  // namespace mt::test
