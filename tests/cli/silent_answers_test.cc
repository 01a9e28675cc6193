// Issue 37: answers that were silent, made loud, and messages that misled.
// Each refusal is one line naming the value and a fix, and the fix it names is
// then accepted; each warning is one line on a run that goes on.
//   --split 1,-1,0 (Megatron reads 1,1,0), "abc", NaN: refused.
//   a blend of datasets of different tokenizers: refused; one without a
//     record beside one with: a warning.
//   --moe-expert-capacity-factor: negative = dropless (Megatron's None), said;
//     inf / NaN / 0 refused.
//   --num-experts with a --moe-layer-freq of no MoE layer: refused.
//   --split 100,0,0 with --eval-interval: "evaluation is off", said.
//   --config: a TOML array for --moe-layer-freq works; a duplicate, an
//     unknown key or a list for a one-value flag named with the file.
//   --load of one model written two ways: accepted; a real difference names
//     a fix the parser takes (no `--disable-bias-linear true`).
//   --data-path 1e-320 A 1 B: too small, not "mixes weights and prefixes".
//   --expert-model-parallel-size 0: must be >= 1.
#include <filesystem>

#include "bad_input_util.h"

namespace mt::test {
namespace silent_answers_test {

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

int lines_with(const std::string& text, const std::string& part) {
  int n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) n += has(line, part) ? 1 : 0;
  return n;
}

class SilentAnswers : public BadInputFixture {
 protected:
  // A tiny run without --split, --train-iters or the eval flags of train().
  std::string run_flags(const std::string& extra) const {
    return " train" + data +
           " --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32"
           " --micro-batch-size 4 --global-batch-size 8 --lr 3e-3 --peak-tflops 1"
           " --log-interval 1 --train-iters 2" + extra;
  }
  RunResult train_run(const std::string& extra) const {
    return run(megatron() + substitute(run_flags(extra), data, dir.file("")));
  }
  void expect_runs(const char* name, const std::string& extra) const {
    const RunResult r = train_run(extra);
    EXPECT_EQ(r.exit_code, 0) << name << " (the fix) was refused:\n" << r.output;
  }
};

TEST_F(SilentAnswers, SplitWeightsThatMegatronMisreadsAreRefused) {
  const BadInputCase cases[] = {
      {"negative", run_flags(" --split 1,-1,0"),
       "--split \"1,-1,0\": weight -1 is negative (Megatron-LM would drop the minus sign and read "
       "1); fix: give up to 3 weights >= 0, e.g. --split 969,30,1"},
      {"letters", run_flags(" --split abc"),
       "--split \"abc\": \"abc\" is not a plain decimal number; fix:"},
      {"nan", run_flags(" --split 90,nan,10"),
       "--split \"90,nan,10\": weight \"nan\" is not finite"},
      {"inf", run_flags(" --split inf"), "--split \"inf\": weight \"inf\" is not finite"},
  };
  for (const BadInputCase& c : cases) expect_fails(c);
  expect_runs("--split 969,30,1", " --split 969,30,1 --eval-interval 0");
}

TEST_F(SilentAnswers, EmptyValidationSplitSaysEvaluationIsOff) {
  const RunResult r = train_run(" --split 100,0,0 --eval-interval 1 --eval-iters 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(lines_with(r.output, "warning: evaluation is off: --split 100,0,0 gives the validation "
                                 "split no documents, so --eval-interval 1 evaluates nothing; fix: "
                                 "give the validation split a weight (e.g. --split 98,2,0)"),
            1) << r.output;
  EXPECT_FALSE(has(r.output, "validation at iteration")) << r.output;
  // Both fixes it names: a validation weight evaluates; --eval-iters 0 is quiet.
  const RunResult weighted = train_run(" --split 98,2,0 --eval-interval 1 --eval-iters 1");
  ASSERT_EQ(weighted.exit_code, 0) << weighted.output;
  EXPECT_FALSE(has(weighted.output, "evaluation is off")) << weighted.output;
  EXPECT_TRUE(has(weighted.output, "validation at iteration 1 | lm loss")) << weighted.output;
  const RunResult quiet = train_run(" --split 100,0,0 --eval-interval 1 --eval-iters 0");
  ASSERT_EQ(quiet.exit_code, 0) << quiet.output;
  EXPECT_FALSE(has(quiet.output, "evaluation is off")) << quiet.output;
}

TEST_F(SilentAnswers, CapacityFactorIsMegatronsNoneWhenNegativeAndRefusedWhenNotFinite) {
  const std::string moe = " --num-experts 2 --split 90,10,0 --eval-interval 0";
  const BadInputCase cases[] = {
      {"inf", run_flags(moe + " --moe-expert-capacity-factor inf"),
       "--moe-expert-capacity-factor inf is not a finite number"},
      {"nan", run_flags(moe + " --moe-expert-capacity-factor nan"),
       "--moe-expert-capacity-factor nan is not a finite number"},
      {"zero", run_flags(moe + " --moe-expert-capacity-factor 0"),
       "--moe-expert-capacity-factor 0 gives every expert a capacity of 0 tokens"},
  };
  for (const BadInputCase& c : cases) expect_fails(c);
  // -1 and -0.5 alike: dropless, said once; the same losses as without the flag.
  const RunResult none = train_run(moe + " --log-json " + dir.file("none.json"));
  ASSERT_EQ(none.exit_code, 0) << none.output;
  EXPECT_FALSE(has(none.output, "capacity")) << none.output;
  for (const char* value : {"-1", "-0.5"}) {
    const std::string json = dir.file(std::string("cf") + value + ".json");
    const RunResult r =
        train_run(moe + " --moe-expert-capacity-factor " + value + " --log-json " + json);
    ASSERT_EQ(r.exit_code, 0) << value << "\n" << r.output;
    EXPECT_EQ(lines_with(r.output, std::string("note: --moe-expert-capacity-factor ") + value +
                                       " is negative: no expert capacity, every token reaches its "
                                       "top-k experts (dropless routing)"),
              1) << r.output;
    expect_same_losses(read_log_json(dir.file("none.json")), read_log_json(json), value, 0.0);
  }
  expect_runs("capacity 1.0", moe + " --moe-expert-capacity-factor 1.0");
}

TEST_F(SilentAnswers, ExpertsWithNoMoELayerAndExpertParallelZeroAreRefused) {
  const BadInputCase cases[] = {
      {"no MoE layer", run_flags(" --num-experts 4 --moe-layer-freq [0,0]"),
       "--num-experts 4 with --moe-layer-freq [0,0] makes no layer MoE: the model would train "
       "dense; fix: put a 1 in --moe-layer-freq for each MoE layer (e.g. --moe-layer-freq 1 for "
       "all), or leave out --num-experts for a dense model"},
      {"EP 0", run_flags(" --num-experts 4 --expert-model-parallel-size 0"),
       "--expert-model-parallel-size 0 must be >= 1; fix: leave it out"},
  };
  for (const BadInputCase& c : cases) expect_fails(c);
  const RunResult ep0 = train_run(" --num-experts 4 --expert-model-parallel-size 0");
  EXPECT_FALSE(has(ep0.output, "does not divide")) << ep0.output;
  expect_runs("--moe-layer-freq 1", " --num-experts 4 --moe-layer-freq 1 --split 90,10,0 "
              "--eval-interval 0");
  expect_runs("--moe-layer-freq [0,1]", " --num-experts 4 --moe-layer-freq [0,1] --split 90,10,0 "
              "--eval-interval 0");
  expect_runs("no --num-experts", " --moe-layer-freq [0,0] --split 90,10,0 --eval-interval 0");
}

TEST_F(SilentAnswers, TinyAndHugeBlendWeightsAreNumbers) {
  const std::string a = dir.file("corpus_text_document");
  const BadInputCase cases[] = {
      {"denormal", " train --data-path 1e-320 " + a + " 1 " + a + " --vocab-file " +
                       dir.file("corpus_vocab.json") + " --train-iters 2",
       "--data-path weight '1e-320' (for " },
      {"sum inf", " train --data-path 1e308 " + a + " 1e308 " + a + " --vocab-file " +
                      dir.file("corpus_vocab.json") + " --train-iters 2",
       "--data-path weights sum to inf (too large for a double); fix: scale all the weights down"},
  };
  for (const BadInputCase& c : cases) expect_fails(c);
  const RunResult tiny = run(megatron() + cases[0].args);
  EXPECT_TRUE(has(tiny.output, "is too small: below 2.22507e-308, the smallest normal double"))
      << tiny.output;
  EXPECT_FALSE(has(tiny.output, "mixes weights and prefixes")) << tiny.output;
}

TEST_F(SilentAnswers, ConfigFileKeysAreNamedWithTheFileAndAnArrayIsMegatronsList) {
  const std::string toml = dir.file("run.toml");
  const std::string base = " --split 90,10,0 --eval-interval 0 --config " + toml;
  // Megatron's list as a TOML array.
  write_text(toml, "num-experts = 2\nmoe-layer-freq = [0,1]\n");
  const RunResult list = train_run(base);
  ASSERT_EQ(list.exit_code, 0) << list.output;
  write_text(toml, "num-experts = 2\nmoe-layer-freq = [0,0]\n");  // read as the list, then refused
  expect_fails({"array of no MoE layer", run_flags(base), "--moe-layer-freq [0,0] makes no layer"});
  const std::pair<std::string, std::string> bad[] = {
      {"lr = 1e-3\nlr = 2e-3\n",
       "--config " + toml + ": key 'lr' is set twice (lines 1 and 2); fix: keep one `lr = ...` "
       "line"},
      {"no-such-flag = 3\n", "--config " + toml + ": key 'no-such-flag' is not a flag of megatron "
                             "train; fix: remove that line or correct its name"},
      {"moe_layer_freq = 1\n", "--config " + toml + ": key 'moe_layer_freq' is not a flag of "
                               "megatron train; fix: write it with dashes, `moe-layer-freq = ...`"},
      {"lr = [1e-3, 2e-3]\n", "--config " + toml + ": key 'lr' holds a list [1e-3, 2e-3] but --lr "
                              "takes one value; fix: write `lr = 1e-3` (one value)"},
  };
  for (const auto& [text, message] : bad) {
    write_text(toml, text);
    const RunResult r = train_run(base);
    EXPECT_EQ(r.exit_code, 2) << text << r.output;
    EXPECT_TRUE(has(r.output, message)) << text << "\n" << r.output;
    EXPECT_FALSE(has(r.output, "was not expected")) << r.output;
  }
  // The fixes they name.
  for (const char* fixed :
       {"lr = 2e-3\n", "moe-layer-freq = 1\nnum-experts = 2\n", "lr = 1e-3\n"}) {
    write_text(toml, fixed);
    expect_runs(fixed, base);
  }
}

// Datasets preprocessed with different (character) vocabularies in one blend
// are refused naming both; a dataset without a record beside one with a record
// is a warning. The fix named (preprocess again with the first one's files) runs.
TEST_F(SilentAnswers, BlendOfDatasetsOfDifferentTokenizersIsRefused) {
  namespace fs = std::filesystem;
  const std::string text = synthetic_corpus(40);
  write_text(dir.file("b.txt"), text);
  write_text(dir.file("c.txt"), text + "\nzebra quartz \xc3\xbc\n");  // another vocabulary
  const std::string A = dir.file("corpus_text_document");
  auto preprocess = [&](const std::string& name, const std::string& vocab) {
    const RunResult r = run(megatron() + " preprocess --input " + dir.file(name + ".txt") +
                            " --output-prefix " + dir.file(name) + vocab);
    ASSERT_EQ(r.exit_code, 0) << r.output;
  };
  preprocess("c", "");
  const std::string C = dir.file("c_text_document");
  const std::string blend = " train --data-path " + A + " " + C + " --vocab-file " +
                            dir.file("corpus_vocab.json") +
                            " --num-layers 2 --hidden-size 32 --num-attention-heads 4 "
                            "--seq-length 32 --micro-batch-size 4 --global-batch-size 8 "
                            "--train-iters 2 --eval-interval 0 --peak-tflops 1";
  const BadInputCase refused{
      "different vocabularies", blend,
      "the run's datasets were preprocessed with different tokenizers: "};
  expect_fails(refused);
  const RunResult r = run(megatron() + blend);
  EXPECT_TRUE(has(r.output, A + " with char (")) << r.output;
  EXPECT_TRUE(has(r.output, "but " + C + " with char (")) << r.output;
  EXPECT_TRUE(has(r.output, "fix: preprocess " + C + "'s text again with " + A +
                                "'s tokenizer (megatron preprocess --input ... --output-prefix "
                                "... --tokenizer-type char --vocab-file " +
                                dir.file("corpus_vocab.json") + ")")) << r.output;
  // The fix: c's text (within the corpus's characters: b.txt) with the corpus's vocabulary.
  preprocess("b", " --tokenizer-type char --vocab-file " + dir.file("corpus_vocab.json"));
  const std::string B = dir.file("b_text_document");
  std::string fixed = blend;
  fixed.replace(fixed.find(C), C.size(), B);
  const RunResult ok = run(megatron() + fixed);
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_FALSE(has(ok.output, "warning")) << ok.output;
  // Without b's record: accepted, said in one line naming b.
  fs::remove(dir.file("b_tokenizer.json"));
  const RunResult unrecorded = run(megatron() + fixed);
  EXPECT_EQ(unrecorded.exit_code, 0) << unrecorded.output;
  EXPECT_EQ(lines_with(unrecorded.output, "warning: dataset(s) " + B + " have no tokenizer record"),
            1) << unrecorded.output;
}

// One model written two ways resumes; a real difference names a fix the
// parser takes, and that fix resumes.
TEST_F(SilentAnswers, LoadComparesResolvedModelsAndNamesAWorkingFix) {
  const std::string ckpt = dir.file("ckpt");
  const std::string moe = " --num-experts 2 --split 90,10,0 --eval-interval 0 --save " + ckpt;
  const RunResult first = train_run(moe + " --moe-layer-freq 1");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  // --moe-layer-freq [1,1] is 1 on two layers; --moe-ffn-hidden-size 128 is the
  // default (--ffn-hidden-size 4 x 32).
  const std::string resume = " --load " + ckpt + " --train-iters 3";
  const RunResult same =
      train_run(moe + resume + " --moe-layer-freq [1,1] --moe-ffn-hidden-size 128");
  EXPECT_EQ(same.exit_code, 0) << same.output;
  // Another model: the fix names the checkpoint's value in a form the parser takes.
  const RunResult other = train_run(moe + resume + " --train-iters 4 --moe-layer-freq [0,1]");
  EXPECT_NE(other.exit_code, 0);
  EXPECT_TRUE(has(other.output, "the checkpoint's model has --moe-layer-freq [1,1] but this run "
                                "has [0,1]; fix: pass --moe-layer-freq '[1,1]'")) << other.output;
  const RunResult bias = train_run(moe + resume + " --train-iters 4 --disable-bias-linear");
  EXPECT_NE(bias.exit_code, 0);
  EXPECT_TRUE(has(bias.output, "the checkpoint's model was trained without --disable-bias-linear "
                               "but this run is with it; fix: leave out --disable-bias-linear"))
      << bias.output;
  EXPECT_FALSE(has(bias.output, "--disable-bias-linear true")) << bias.output;
  const RunResult fixed = train_run(moe + resume + " --train-iters 4 --moe-layer-freq '[1,1]'");
  EXPECT_EQ(fixed.exit_code, 0) << fixed.output;
}

}  // namespace silent_answers_test
}  // namespace mt::test
