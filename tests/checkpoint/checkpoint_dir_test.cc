// The checkpoint directory's safety rules (checkpoint/checkpoint_dir.h): a strict
// tracker, validated meta.json, re-saving an iteration without ever removing
// the last complete copy first, repair after a crash, and the refusal to save
// over checkpoints a run did not load.
#include "checkpoint/checkpoint_dir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "temp_dir.h"
#include "error_of.h"

namespace mt {
namespace checkpoint_dir_test {

namespace fs = std::filesystem;
using test::TempDir;

void write(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}
std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
using test::error_of;
bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string valid_meta(int64_t iteration) {
  return R"({"format": "megatron.cpp checkpoint", "version": 1, "iteration": )" +
         std::to_string(iteration) +
         R"(, "consumed_samples": 80, "tensor_model_parallel_size": 1,
  "pipeline_model_parallel_size": 2, "data_parallel_size": 1, "skipped_iterations": 0,
  "args": {"tokenizer": {"type": "char", "vocab": ["a"]}, "layer_stage": [0, 1],
    "model": {"num_layers": 2, "hidden_size": 32, "ffn_hidden_size": 128,
      "num_attention_heads": 4, "seq_length": 32, "max_position_embeddings": 32,
      "vocab_size": 20, "make_vocab_size_divisible_by": 128, "padded_vocab_size": 128,
      "init_method_std": 0.02, "hidden_dropout": 0.1, "attention_dropout": 0.1,
      "layernorm_epsilon": 1e-5}}})";
}

TEST(CheckpointDir, TrackerMustBeAWholeNumber) {
  TempDir d;
  EXPECT_EQ(latest_iteration(d.file("")), -1);
  for (const char* ok : {"4\n", " 12 \n", "0"}) {
    write(d.file(kTrackerFile), ok);
    EXPECT_EQ(latest_iteration(d.file("")), std::stoll(ok)) << ok;
  }
  for (const char* bad : {"4abc\n", "", "-3", "1e3", "releases", "99999999999999999999"}) {
    write(d.file(kTrackerFile), bad);
    const std::string e = error_of([&] { latest_iteration(d.file("")); });
    EXPECT_TRUE(has(e, kTrackerFile) && has(e, "not an iteration number")) << bad << ": " << e;
  }
}

// A tracker holding a NUL or control bytes (a crash mid-write on some
// filesystems, a stray editor) is named with those bytes escaped, so the
// printed line is whole and says what to write: the newest complete
// iteration, 'release', or (neither) to remove the file.
TEST(CheckpointDir, DamagedTrackerIsShownEscapedWithTheFix) {
  TempDir d;
  auto no_control_bytes = [](const std::string& e) {
    for (char c : e)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
    return true;
  };
  const std::string nul("\0", 1), seven_nul("7\0\n", 3);
  write(d.file(kTrackerFile), nul);
  std::string e = error_of([&] { latest_iteration(d.file("")); });
  EXPECT_TRUE(has(e, "holds '\\x00', not an iteration number")) << e;
  EXPECT_TRUE(has(e, "fix: remove it")) << e;
  EXPECT_TRUE(no_control_bytes(e)) << e;

  write(d.file("iter_0000004/meta.json"), "{}");
  write(d.file("iter_0000009/meta.json"), "{}");
  write(d.file(kTrackerFile), seven_nul);
  e = error_of([&] { latest_iteration(d.file("")); });
  EXPECT_TRUE(has(e, "holds '7\\x00'")) << e;
  EXPECT_TRUE(has(e, "fix: write the iteration to resume from into it, e.g. `echo 9 > " +
                         d.file("") + "/" + kTrackerFile +
                         "` (complete ones: iter_0000004, iter_0000009)"))
      << e;
  EXPECT_TRUE(no_control_bytes(e)) << e;

  write(d.file(kTrackerFile), "\x1b[2J" + std::string(60, 'x'));
  e = error_of([&] { latest_iteration(d.file("")); });
  EXPECT_TRUE(has(e, "holds '\\x1B[2J" + std::string(36, 'x') + "...'")) << e;
  EXPECT_TRUE(no_control_bytes(e)) << e;

  fs::remove_all(d.file("iter_0000004"));
  fs::remove_all(d.file("iter_0000009"));
  write(d.file("release/meta.json"), "{}");
  write(d.file(kTrackerFile), nul);
  e = error_of([&] { latest_iteration(d.file("")); });
  EXPECT_TRUE(has(e, "fix: write 'release' into it")) << e;
}

// Megatron's release checkpoint (converted weights): tracker "release",
// directory <dir>/release, iteration 0 (a run never saves iteration 0).
TEST(CheckpointDir, ReleaseIsIterationZeroInItsOwnDirectory) {
  TempDir d;
  write(d.file(kTrackerFile), "release\n");
  EXPECT_EQ(latest_iteration(d.file("")), kReleaseIteration);
  EXPECT_EQ(iteration_dir(d.file("x"), kReleaseIteration), d.file("x") + "/release");
  EXPECT_EQ(iteration_dir(d.file("x"), 7), d.file("x") + "/iter_0000007");
  EXPECT_TRUE(has(error_of([&] { checkpoint_iteration_dir(d.file(""), kReleaseIteration); }),
                  "release"));
}

TEST(CheckpointDir, MetaIsValidatedFieldByField) {
  EXPECT_NO_THROW(parse_checkpoint_meta(valid_meta(10), "m.json", 10));
  EXPECT_TRUE(has(error_of([] { parse_checkpoint_meta("[1, 2]", "m.json", 1); }),
                  "m.json is not a megatron.cpp checkpoint"));
  // A deeply nested damaged value is described, not dumped (no stack overflow).
  std::string nested = valid_meta(10);
  nested.replace(nested.find(R"("iteration": 10)"), 15,
                 "\"iteration\": " + std::string(200000, '[') + std::string(200000, ']'));
  EXPECT_TRUE(has(error_of([&] { parse_checkpoint_meta(nested, "m.json", 10); }),
                  "'iteration' is a list"));
  EXPECT_TRUE(has(error_of([] { parse_checkpoint_meta(valid_meta(10), "m.json", 11); }),
                  "says iteration 10 but lies in the directory of iteration 11"));
  struct Case {
    std::string from, to, expected;
  };
  const Case cases[] = {
      {R"("iteration": 10)", R"("iteraton": 10)", "has no 'iteration'"},
      {R"("consumed_samples": 80)", R"("consumed_samples": -1)", "'consumed_samples' is -1"},
      {R"("consumed_samples": 80)", R"("consumed_samples": "80")", "'consumed_samples'"},
      {R"("pipeline_model_parallel_size": 2)", R"("pipeline_model_parallel_size": 0)",
       "'pipeline_model_parallel_size' is 0"},
      {R"("tensor_model_parallel_size": 1)", R"("tensor_model_parallel_size": 4294967298)",
       "'tensor_model_parallel_size' is 4294967298, not an integer in [1, 2147483647]"},
      {R"("layer_stage": [0, 1])", R"("layer_stage": [0, 2])", "'args.layer_stage' holds 2"},
      {R"("layer_stage": [0, 1])", R"("layer_stage": [0])", "'args.layer_stage' is not a list of 2"},
      {R"("hidden_size": 32)", R"("hidden_size": null)", "'hidden_size' is null"},
      {R"("layernorm_epsilon": 1e-5)", R"("layernorm_eps": 1e-5)", "'args.model.layernorm_epsilon'"},
      {R"("tokenizer": {"type": "char", )", R"("tokenizer": {)", "'args.tokenizer'"},
      {R"("version": 1)", R"("version": 2)", "not a megatron.cpp checkpoint of format version 1"},
      {R"({"format")", R"({"formats")", "not a megatron.cpp checkpoint"},
      {"}}}", "}}", "corrupt checkpoint metadata m.json"},
  };
  for (const Case& c : cases) {
    std::string text = valid_meta(10);
    ASSERT_TRUE(has(text, c.from)) << c.from;
    text.replace(text.find(c.from), c.from.size(), c.to);
    const std::string e = error_of([&] { parse_checkpoint_meta(text, "m.json", 10); });
    EXPECT_TRUE(has(e, c.expected) && has(e, "m.json")) << c.to << ": " << e;
  }
}

// The MoE fields a dense model saves as 0 (every model writes them), and the
// EP size of an MoE checkpoint.
TEST(CheckpointDir, MetaOfMoeFields) {
  const std::string dense = R"("layernorm_epsilon": 1e-5, "num_experts": 0,
      "moe_ffn_hidden_size": 0, "moe_shared_expert_intermediate_size": 0, "moe_router_topk": 2)";
  std::string text = valid_meta(10);
  text.replace(text.find(R"("layernorm_epsilon": 1e-5)"), 25, dense);
  EXPECT_NO_THROW(parse_checkpoint_meta(text, "m.json", 10));
  std::string negative = text;
  negative.replace(negative.find(R"("num_experts": 0)"), 16, R"("num_experts": -1)");
  EXPECT_TRUE(has(error_of([&] { parse_checkpoint_meta(negative, "m.json", 10); }),
                  "'num_experts' is -1"));
  std::string moe = text;
  moe.replace(moe.find(R"("data_parallel_size": 1)"), 23,
              R"("data_parallel_size": 1, "expert_model_parallel_size": 2)");
  EXPECT_NO_THROW(parse_checkpoint_meta(moe, "m.json", 10));
  moe.replace(moe.find(R"("expert_model_parallel_size": 2)"), 31,
              R"("expert_model_parallel_size": 0)");
  EXPECT_TRUE(has(error_of([&] { parse_checkpoint_meta(moe, "m.json", 10); }),
                  "'expert_model_parallel_size' is 0"));
}

// A complete iteration directory holding one file with `content`.
void make_iteration(const TempDir& d, const std::string& name, const std::string& content) {
  write(d.file(name + "/meta.json"), content);
}

TEST(CheckpointDir, ResavingKeepsACompleteCopyAndRepairsAfterACrash) {
  TempDir d;
  const std::string dir = d.file("ckpt");
  make_iteration(d, "ckpt/iter_0000005", "old");
  make_iteration(d, "ckpt/iter_0000005.tmp", "new");
  commit_iteration(dir, 5);
  EXPECT_EQ(read(dir + "/iter_0000005/meta.json"), "new");
  EXPECT_FALSE(fs::exists(dir + "/iter_0000005.old"));
  EXPECT_FALSE(fs::exists(dir + "/iter_0000005.tmp"));
  EXPECT_EQ(latest_iteration(dir), 5);

  // A crash after iter_5 was renamed aside and before the new copy came in:
  // readers use iter_5.old, and the next run that saves here puts it back.
  fs::rename(dir + "/iter_0000005", dir + "/iter_0000005.old");
  make_iteration(d, "ckpt/iter_0000005.tmp", "half");
  make_iteration(d, "ckpt/iter_0000009.tmp", "half");
  EXPECT_EQ(checkpoint_iteration_dir(dir, 5), dir + "/iter_0000005.old");
  EXPECT_EQ(saved_iterations(dir), std::vector<int64_t>{5});
  const std::vector<std::string> done = recover_checkpoint_dir(dir);
  EXPECT_EQ(done.size(), 3u);
  EXPECT_EQ(read(dir + "/iter_0000005/meta.json"), "new");
  for (const char* gone : {"/iter_0000005.old", "/iter_0000005.tmp", "/iter_0000009.tmp"})
    EXPECT_FALSE(fs::exists(dir + gone)) << gone;
  EXPECT_EQ(checkpoint_iteration_dir(dir, 5), dir + "/iter_0000005");

  // A crash after the new copy came in, before the old one was removed.
  make_iteration(d, "ckpt/iter_0000005.old", "older");
  EXPECT_EQ(recover_checkpoint_dir(dir).size(), 1u);
  EXPECT_EQ(read(dir + "/iter_0000005/meta.json"), "new");
  EXPECT_FALSE(fs::exists(dir + "/iter_0000005.old"));
  EXPECT_TRUE(recover_checkpoint_dir(dir).empty());

  EXPECT_TRUE(has(error_of([&] { checkpoint_iteration_dir(dir, 7); }),
                  "names iteration 7 but " + dir + "/iter_0000007 does not exist"));
}

TEST(CheckpointDir, RefusesToSaveOverCheckpointsTheRunDidNotLoad) {
  TempDir d;
  const std::string save = d.file("run"), other = d.file("other");
  EXPECT_NO_THROW(check_save_target(save, "", -1, false));  // nothing there yet
  make_iteration(d, "run/iter_0000010", "x");
  make_iteration(d, "run/iter_0000020", "x");
  write(save + "/" + kTrackerFile, "20\n");
  make_iteration(d, "other/iter_0000003", "x");
  write(other + "/" + kTrackerFile, "3\n");

  const std::string no_load = error_of([&] { check_save_target(save, "", -1, false); });
  EXPECT_TRUE(has(no_load, "iter_0000010, iter_0000020") && has(no_load, "--overwrite-checkpoints"))
      << no_load;
  const std::string typo = error_of([&] { check_save_target(save, save + "x", -1, false); });
  EXPECT_TRUE(has(typo, "--load " + save + "x does not exist")) << typo;
  const std::string other_run = error_of([&] { check_save_target(save, other, 3, false); });
  EXPECT_TRUE(has(other_run, "of another run")) << other_run;
  // The run's own directory: fine at the tracker's iteration...
  EXPECT_NO_THROW(check_save_target(save, save, 20, false));
  // ...refused when newer iterations than the loaded one would be overwritten...
  const std::string newer = error_of([&] { check_save_target(save, save, 10, false); });
  EXPECT_TRUE(has(newer, "holds iter_0000020, newer than the iteration 10")) << newer;
  // ...and when the tracker is lost.
  fs::remove(save + "/" + kTrackerFile);
  const std::string lost = error_of([&] { check_save_target(save, save, -1, false); });
  EXPECT_TRUE(has(lost, "has no " + std::string(kTrackerFile))) << lost;
  EXPECT_NO_THROW(check_save_target(save, "", -1, true));  // --overwrite-checkpoints
}

TEST(CheckpointDir, UnwritableSaveDirectoryIsFoundAtOnce) {
  TempDir d;
  EXPECT_NO_THROW(check_writable_dir(d.file("new/deep"), "0"));
  EXPECT_TRUE(fs::is_directory(d.file("new/deep")));
  EXPECT_TRUE(fs::is_empty(d.file("new/deep")));  // the probe is gone
  write(d.file("file"), "x");
  const std::string e = error_of([&] { check_writable_dir(d.file("file/ckpt"), "0"); });
  EXPECT_TRUE(has(e, "cannot create the --save directory")) << e;
}

}  // namespace checkpoint_dir_test
}  // namespace mt
