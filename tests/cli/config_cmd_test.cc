// `megatron config` writes a TOML file that `megatron plan --config` and
// `megatron train --config` accept: from an --answers file (a tiny custom
// model trained 2 iterations on 1 and 2 ranks), from --yes (every default),
// for every named size (plan only: too big to train here); a bad answer is
// asked again with its reason, end of input writes nothing, and an existing
// file is replaced only when told. The terminal test is config_tmux_test.cc.
#include "cli_test_util.h"

namespace mt::test {
namespace config_cmd_test {

namespace fs = std::filesystem;

// A devices folder of the shipped profiles only (no machine's cpu-here), so
// that the defaults are the same everywhere.
struct ConfigDir {
  TempDir dir;
  ConfigDir() {
    fs::create_directories(dir.file("devices"));
    for (const char* d : {"a100-80gb.json", "h100-80gb.json"})
      fs::copy_file(std::string(MT_SOURCE_DIR) + "/configs/devices/" + d, dir.file("devices/") + d);
  }
  std::string env() const { return "env MEGATRON_DEVICES_DIR=" + dir.file("devices") + " "; }
  std::string config() const { return env() + megatron() + " config"; }
  std::string plan(const std::string& file) const {
    return env() + megatron() + " plan --config " + file;
  }
  std::string answers(const std::string& name, const std::string& text) const {
    write_text(dir.file(name), text);
    return dir.file(name);
  }
};

// Flags a smoke run of train adds to a config file.
const char* kTrainRun =
    " --mock-data --tokenizer-type NullTokenizer --train-iters 2 --lr 1e-3 --eval-interval 0"
    " --log-interval 1 --peak-tflops 1";

void expect_trains(const std::string& launcher, const std::string& file, const TempDir& dir) {
  const std::string log = dir.file("train.json");
  fs::remove(log);
  const RunResult r = run(launcher + " train --config " + file + kTrainRun + " --log-json " + log);
  ASSERT_EQ(r.exit_code, 0) << read_text(file) << "\n" << r.output;
  const JsonLogLines lines = read_log_json(log);
  EXPECT_EQ(lines.train.size(), 2u) << r.output;
}

const char* kTinyModel =
    "model = custom\narchitecture = llama\nnum-layers = 2\nhidden-size = 64\n"
    "num-attention-heads = 4\nnum-query-groups = 2\nffn-hidden-size = 128\nvocab-size = 500\n"
    "seq-length = 32\n";

TEST(ConfigCmd, AnswersFileGivesAFilePlanAndTrainAcceptOnOneAndTwoRanks) {
  ConfigDir c;
  // One rank, the fastest layout plan offers.
  const std::string one = c.answers(
      "one.txt", std::string("# a comment\ndevice = a100-80gb\n"
                             "processes-per-machine = 1\nglobal-batch-size = 4\nlayout = 1\n") +
                     kTinyModel);
  const std::string f1 = c.dir.file("one.toml");
  RunResult r = run(c.config() + " --answers " + one + " --output " + f1);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("wrote " + f1), std::string::npos) << r.output;
  const std::string t1 = read_text(f1);
  for (const char* line :
       {"num-layers = 2\n", "hidden-size = 64\n", "normalization = \"RMSNorm\"", "swiglu = true\n",
        "group-query-attention = true\n", "num-query-groups = 2\n", "vocab-size = 500\n",
        "seq-length = 32\n", "global-batch-size = 4\n", "[plan]\ndevice = \"a100-80gb\"\n",
        "num-nodes = 1\n", "devices-per-node = 1\n", "mpirun -n 1 "})
    EXPECT_NE(t1.find(line), std::string::npos) << line << "\n" << t1;
  r = run(c.plan(f1) + " --top 3");
  EXPECT_EQ(r.exit_code, 0) << t1 << "\n" << r.output;
  expect_trains(megatron(), f1, c.dir);

  // Two ranks by hand: TP 2 with SP, full recompute (its method goes under
  // [train]: plan has no such flag), ZeRO-1, fp32.
  const std::string two = c.answers(
      "two.txt",
      std::string("device = h100-80gb\nprocesses-per-machine = 2\n"
                  "global-batch-size = 4\nlayout = hand\n"
                  "tensor-model-parallel-size = 2\nsequence-parallel = yes\n"
                  "pipeline-model-parallel-size = 1\nmicro-batch-size = 2\n"
                  "recompute = full\ndistributed-optimizer = ZeRO-1\nprecision = fp32\n") +
          kTinyModel);
  const std::string f2 = c.dir.file("two.toml");
  r = run(c.config() + " --answers " + two + " --output " + f2);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string t2 = read_text(f2);
  for (const char* line :
       {"tensor-model-parallel-size = 2\n", "sequence-parallel = true\n",
        "recompute-granularity = \"full\"\n", "use-distributed-optimizer = true\n",
        "micro-batch-size = 2\n", "[train]\nrecompute-method = \"uniform\"\n",
        "recompute-num-layers = 1\n", "devices-per-node = 2\n", "mpirun -n 2 "})
    EXPECT_NE(t2.find(line), std::string::npos) << line << "\n" << t2;
  EXPECT_EQ(t2.find("bf16 = true"), std::string::npos) << t2;
  r = run(c.plan(f2) + " --json");
  ASSERT_EQ(r.exit_code, 0) << t2 << "\n" << r.output;
  // Every line plan prints is that pinned layout.
  EXPECT_NE(r.output.find("\"tp\":2"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("\"tp\":1"), std::string::npos) << r.output;
  expect_trains(mpirun(2), f2, c.dir);
}

TEST(ConfigCmd, EveryDefaultGivesAFilePlanAndTrainAccept) {
  ConfigDir c;
  const std::string f = c.dir.file("megatron_config.toml");
  // The default output is in the current folder.
  RunResult r = run("cd " + c.dir.file("") + " && " + c.config() + " --yes");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("wrote megatron_config.toml"), std::string::npos) << r.output;
  const std::string t = read_text(f);
  for (const char* line :
       {"# model: gpt2-small\n", "num-layers = 12\n", "hidden-size = 768\n",
        "num-attention-heads = 12\n", "seq-length = 1024\n", "vocab-size = 50257\n",
        "max-position-embeddings = 1024\n", "device = \"a100-80gb\"\n"})
    EXPECT_NE(t.find(line), std::string::npos) << line << "\n" << t;
  r = run(c.plan(f));
  EXPECT_EQ(r.exit_code, 0) << t << "\n" << r.output;
  // GPT-2 small is too big to train here: the same file with the sizes
  // overridden on the command line (which wins), so every key of it is one
  // train takes and the rest of it runs.
  const std::string log = c.dir.file("train.json");
  r = run(megatron() + " train --config " + f + kTrainRun +
          " --num-layers 1 --hidden-size 32 --num-attention-heads 4 --ffn-hidden-size 64"
          " --seq-length 16 --vocab-size 100 --global-batch-size 2 --micro-batch-size 1"
          " --tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --log-json " +
          log);
  ASSERT_EQ(r.exit_code, 0) << t << "\n" << r.output;
  EXPECT_EQ(read_log_json(log).train.size(), 2u) << r.output;
}

// The memory per process answered is what plan checks the layouts against
// (the file's [plan] device-memory-gb): too little, and config offers the
// nearest layouts, says so in the file, and plan --config finds none fits.
TEST(ConfigCmd, TheMemoryAnsweredIsWhatPlanChecks) {
  ConfigDir c;
  const std::string f = c.dir.file("small.toml");
  const std::string answers =
      c.answers("small.txt", std::string("device = a100-80gb\nprocesses-per-machine = 1\n"
                                         "memory-per-process-gb = 0.001\nglobal-batch-size = 4\n") +
                                 kTinyModel);
  RunResult r = run(c.config() + " --answers " + answers + " --output " + f);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("none fits in 0.001 GB per process"), std::string::npos) << r.output;
  const std::string t = read_text(f);
  EXPECT_NE(t.find("device-memory-gb = 0.001\n"), std::string::npos) << t;
  EXPECT_NE(t.find("does NOT fit"), std::string::npos) << t;
  r = run(c.plan(f));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("no layout fits in 0.001 GB per device"), std::string::npos) << r.output;
  // The command line wins over the file.
  r = run(c.plan(f) + " --device-memory-gb 80");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// Each named size with its published architecture, planned on H100 machines.
TEST(ConfigCmd, EveryNamedSizeGivesAFilePlanAccepts) {
  ConfigDir c;
  struct Named {
    const char* name;
    int machines;
    std::vector<std::string> lines;  // some of its flags
  };
  const Named named[] = {
      {"gpt2-small", 1, {"num-layers = 12\n", "hidden-size = 768\n"}},
      {"gpt2-medium",
       1,
       {"num-layers = 24\n", "hidden-size = 1024\n", "num-attention-heads = 16\n"}},
      {"gpt2-large",
       1,
       {"num-layers = 36\n", "hidden-size = 1280\n", "num-attention-heads = 20\n"}},
      {"gpt2-xl", 1, {"num-layers = 48\n", "hidden-size = 1600\n", "num-attention-heads = 25\n"}},
      {"llama3-8b",
       1,
       {"ffn-hidden-size = 14336\n", "num-query-groups = 8\n", "rotary-base = 500000\n",
        "untie-embeddings-and-output-weights = true\n", "normalization = \"RMSNorm\"\n",
        "disable-bias-linear = true\n", "max-position-embeddings = 8192\n",
        "vocab-size = 128256\n"}},
      {"llama3-70b", 8, {"num-layers = 80\n", "hidden-size = 8192\n", "ffn-hidden-size = 28672\n"}},
      {"llama3.2-1b",
       1,
       {"num-layers = 16\n", "kv-channels = 64\n", "use-rope-scaling = true\n",
        "rope-scaling-factor = 32\n", "max-position-embeddings = 131072\n"}},
      {"llama3.2-3b",
       1,
       {"num-layers = 28\n", "num-attention-heads = 24\n", "kv-channels = 128\n"}},
      {"qwen3-0.6b",
       1,
       {"qk-layernorm = true\n", "kv-channels = 128\n", "rotary-base = 1000000\n",
        "norm-epsilon = 1e-06\n", "vocab-size = 151936\n"}},
      {"qwen3-1.7b", 1, {"hidden-size = 2048\n", "ffn-hidden-size = 6144\n"}},
      {"qwen3-4b", 1, {"num-layers = 36\n", "hidden-size = 2560\n", "ffn-hidden-size = 9728\n"}},
      {"qwen3-8b", 1, {"hidden-size = 4096\n", "untie-embeddings-and-output-weights = true\n"}},
      {"qwen2.5-0.5b",
       1,
       {"add-qkv-bias = true\n", "hidden-size = 896\n", "num-query-groups = 2\n"}},
      {"qwen2.5-7b",
       1,
       {"hidden-size = 3584\n", "ffn-hidden-size = 18944\n", "vocab-size = 152064\n"}},
      {"mistral-7b", 1, {"window-size = \"4095,0\"\n", "vocab-size = 32000\n"}},
      {"mixtral-8x7b",
       2,
       {"num-experts = 8\n", "moe-ffn-hidden-size = 14336\n", "moe-aux-loss-coeff = 0.02\n"}},
  };
  for (const Named& n : named) {
    const std::string file = c.dir.file(std::string(n.name) + ".toml");
    const std::string answers =
        c.answers(std::string(n.name) + ".txt",
                  std::string("device = h100-80gb\nprocesses-per-machine = 8\n") +
                      "machines = " + std::to_string(n.machines) + "\nmodel = " + n.name + "\n");
    RunResult r = run(c.config() + " --answers " + answers + " --output " + file);
    ASSERT_EQ(r.exit_code, 0) << n.name << "\n" << r.output;
    const std::string t = read_text(file);
    EXPECT_NE(t.find(std::string("# model: ") + n.name + "\n"), std::string::npos) << t;
    for (const std::string& line : n.lines)
      EXPECT_NE(t.find(line), std::string::npos) << n.name << ": " << line << "\n" << t;
    EXPECT_EQ(t.find("does NOT fit"), std::string::npos) << n.name << "\n" << t;
    r = run(c.plan(file) + " --top 1");
    EXPECT_EQ(r.exit_code, 0) << n.name << "\n" << t << "\n" << r.output;
  }
}

// A person's mistakes, each asked again with its reason in one line.
TEST(ConfigCmd, BadAnswersAreAskedAgainWithTheReason) {
  ConfigDir c;
  const std::string f = c.dir.file("out.toml");
  const char* typed =
      "nosuch-gpu\na100-80gb\n"  // device
      "two\n1\n"                 // machines
      "3\n\n\n"                  // processes, threads, memory
      "llama9\ncustom\n"         // model
      "llama\n2\n64\n"           // architecture, layers, hidden
      "5\n4\n"                   // heads: 64 is not divisible by 5
      "3\n2\n\n500\n"            // query groups, ffn, vocab
      "32\n"                     // seq
      "7\n6\n"                   // global batch: 7 sequences on 3 ranks divide no layout
      "hand\n2\n3\n1\n1\n"       // TP 2 does not divide 3 ranks, TP 3 not the 4 heads
      "4\n2\n\n\nfp32\n";        // micro-batch 4 x DP 3 does not divide 6
  write_text(c.dir.file("typed.txt"), typed);
  const RunResult r = run(c.config() + " --output " + f + " < " + c.dir.file("typed.txt"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* why :
       {"invalid: --device 'nosuch-gpu': cannot read", "invalid: 'two' is not a whole number >= 1",
        "invalid: 'llama9' is not one of the",
        "invalid: the 64 hidden features are not divisible by the heads 5",
        "invalid: the 4 heads are not divisible by the query groups 3",
        "invalid: no layout of 3 ranks can run it",
        "invalid: the world size 3 is not divisible by TP 2",
        "invalid: the 4 attention heads are not divisible by TP 3",
        "invalid: the global batch 6 is not divisible by micro-batch 4 x DP 3"})
    EXPECT_NE(r.output.find(why), std::string::npos) << why << "\n" << r.output;
  const std::string t = read_text(f);
  EXPECT_NE(t.find("micro-batch-size = 2\n"), std::string::npos) << t;
  EXPECT_NE(t.find("global-batch-size = 6\n"), std::string::npos) << t;
  EXPECT_NE(t.find("devices-per-node = 3\n"), std::string::npos) << t;
  EXPECT_EQ(run(c.plan(f)).exit_code, 0) << t;
}

TEST(ConfigCmd, EndOfInputMidwayExitsNonZeroWritingNothing) {
  ConfigDir c;
  const std::string f = c.dir.file("out.toml");
  const RunResult r = run("printf 'a100-80gb\\n1\\n' | " + c.config() + " --output " + f);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("the input ended at the question"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(f));
  EXPECT_FALSE(fs::exists(f + ".tmp"));
}

TEST(ConfigCmd, AnExistingFileIsReplacedOnlyWhenTold) {
  ConfigDir c;
  const std::string f = c.dir.file("mine.toml");
  write_text(f, "# mine\n");
  RunResult r = run(c.config() + " --yes --output " + f);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("exists and is kept; fix: --force"), std::string::npos) << r.output;
  EXPECT_EQ(read_text(f), "# mine\n");
  // A person saying no (the first question), and Enter (the default is no).
  for (const char* answer : {"no", ""}) {
    r = run("printf '" + std::string(answer) + "\\n' | " + c.config() + " --output " + f);
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("exists; replace it (yes/no) [no]"), std::string::npos) << r.output;
    EXPECT_EQ(read_text(f), "# mine\n");
  }
  // --answers as --output: an input is never an output, --force or not.
  const std::string answers = c.answers("answers.toml", "machines = 1\n");
  r = run(c.config() + " --force --answers " + answers + " --output " + answers);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_EQ(read_text(answers), "machines = 1\n");
  r = run(c.config() + " --yes --force --output " + f);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(read_text(f).find("# model: gpt2-small"), std::string::npos);
}

TEST(ConfigCmd, ABadAnswersFileIsOneLineNamingTheKey) {
  ConfigDir c;
  const std::string f = c.dir.file("out.toml");
  const struct {
    std::string text, what;
  } cases[] = {
      {"machines = zero\n", "machines = zero: 'zero' is not a whole number >= 1"},
      {"machine = 2\n", "'machine' is no question's key; fix: one of device, machines,"},
      {"model = llama9\n", "model = llama9: 'llama9' is not one of the"},
      {"machines\n", "line 1: 'machines' is not `key = value`"},
  };
  for (const auto& k : cases) {
    const RunResult r =
        run(c.config() + " --answers " + c.answers("a.txt", k.text) + " --output " + f);
    EXPECT_NE(r.exit_code, 0) << k.text << r.output;
    EXPECT_NE(r.output.find(k.what), std::string::npos) << k.text << r.output;
    EXPECT_FALSE(fs::exists(f)) << k.text;
  }
}

// A section names the command whose flags it holds; any other is refused.
TEST(ConfigCmd, ConfigFileSectionsAreReadByTheirCommandOnly) {
  TempDir dir;
  write_text(dir.file("bad.toml"), "[optimizer]\nlr = 1e-3\n");
  const RunResult r = run(megatron() + " train --config " + dir.file("bad.toml") + " --mock-data");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("section [optimizer] is not a command of megatron"), std::string::npos)
      << r.output;
}

}  // namespace config_cmd_test
}  // namespace mt::test
