// Checkpoint integrity end to end (checkpoint/checkpoint_verify.h): a flipped byte
// in a weight or an optimizer-state tensor, a damaged header and a truncated
// file are refused by `train --load`, `generate` and `convert` with the file
// and tensor named and the real fix (which the test then follows), on every
// rank of a multi-rank job without a hang; --no-verify-checkpoint-checksums
// loads such a checkpoint; a checkpoint saved before checksums loads, said once.
#include <filesystem>

#include "checkpoint_bytes_util.h"
#include "cli_test_util.h"

namespace mt::test {
namespace checkpoint_checksum_test {

namespace fs = std::filesystem;

constexpr const char* kWeight = "decoder.layers.1.mlp.linear_fc1.weight";

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t p = text.find(part); p != std::string::npos; p = text.find(part, p + 1)) ++n;
  return n;
}

class CheckpointChecksum : public ::testing::Test {
 protected:
  TempDir dir;
  std::string data, ckpt, iter10, model, optim;
  void SetUp() override {
    data = prepare_data(dir, synthetic_corpus(60));
    ckpt = dir.file("ckpt");
    iter10 = ckpt + "/iter_0000010";
    model = iter10 + "/mp_rank_00_000/model.safetensors";
    optim = iter10 + "/mp_rank_00_000/optim_dp_000.safetensors";
  }
  std::string train(const std::string& extra) const {
    return megatron() + " train" + data + tiny_model_flags() + " --eval-interval 0" + extra;
  }
  std::string resume(const std::string& extra = "") const {
    return train(" --train-iters 12 --load " + ckpt + " --save " + ckpt + extra);
  }
  void first_run() const {
    const RunResult r = run(train(" --train-iters 10 --save-interval 5 --save " + ckpt));
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void expect_refused(const RunResult& r, const std::vector<std::string>& needles) {
    EXPECT_NE(r.exit_code, 0) << r.output;
    for (const std::string& n : needles)
      EXPECT_NE(r.output.find(n), std::string::npos) << "expected '" << n << "' in:\n" << r.output;
    EXPECT_EQ(r.output.find("iteration       11/"), std::string::npos) << "trained:\n" << r.output;
  }
};

TEST_F(CheckpointChecksum, MetaJsonRecordsEveryFile) {
  first_run();
  const auto meta = nlohmann::json::parse(read_text(iter10 + "/meta.json"));
  ASSERT_TRUE(meta.contains("files")) << meta.dump(2);
  EXPECT_EQ(meta.at("files").size(), 2u) << meta.at("files").dump();
  for (const char* rel : {"mp_rank_00_000/model.safetensors", "mp_rank_00_000/optim_dp_000.safetensors"}) {
    const std::string bytes = read_text(iter10 + "/" + rel);
    const auto& rec = meta.at("files").at(rel);
    EXPECT_EQ(rec.at("bytes").get<uint64_t>(), bytes.size()) << rel;
    EXPECT_EQ(rec.at("crc32c").get<std::string>(), crc32c_hex(crc32c(bytes.data(), bytes.size())))
        << rel;
  }
}

TEST_F(CheckpointChecksum, AFlippedWeightByteIsNamedEverywhereAndTheFixWorks) {
  first_run();
  flip_byte(model, tensor_offset(model, kWeight) + 4 * 7);  // lowest mantissa byte: still finite
  const std::vector<std::string> named = {
      model + "': tensor '" + kWeight + "' is corrupt: its bytes have crc32c",
      "resume from iteration 5: move " + iter10 + " aside (mv " + iter10 + " " + iter10 +
          ".damaged) and write 5 into " + ckpt + "/latest_checkpointed_iteration.txt"};
  expect_refused(run(resume()), named);
  expect_refused(run(megatron() + " generate --load " + ckpt + " --prompt hi"), named);
  expect_refused(run(megatron() + " convert --model-type GPT --loader megatron --saver hf "
                     "--load-dir " + ckpt + " --save-dir " + dir.file("hf")),
                 named);
  // The skip flag loads it (the damage is then the user's choice).
  const RunResult skipped = run(train(" --train-iters 11 --load " + ckpt +
                                      " --no-verify-checkpoint-checksums"));
  EXPECT_EQ(skipped.exit_code, 0) << skipped.output;
  EXPECT_EQ(count(skipped.output, "checksums not verified (--no-verify-checkpoint-checksums)"), 1u)
      << skipped.output;
  // The fix the message gives: the previous iteration resumes and saves again.
  fs::rename(iter10, iter10 + ".damaged");
  std::ofstream(ckpt + "/latest_checkpointed_iteration.txt") << "5\n";
  const RunResult fixed = run(resume());
  ASSERT_EQ(fixed.exit_code, 0) << fixed.output;
  EXPECT_NE(fixed.output.find("loaded checkpoint from " + ckpt + " at iteration 5"),
            std::string::npos) << fixed.output;
  EXPECT_EQ(read_text(ckpt + "/latest_checkpointed_iteration.txt"), "12\n");
}

TEST_F(CheckpointChecksum, AFlippedOptimizerByteIsNamedAndNoLoadOptimLoads) {
  first_run();
  const std::string name = "exp_avg.decoder.layers.0.self_attention.linear_qkv.weight";
  flip_byte(optim, tensor_offset(optim, name) + 100 * 4 + 1, 0x10);
  expect_refused(run(resume()), {optim + "': tensor '" + name + "' is corrupt",
                                 "or pass --no-load-optim to keep the weights"});
  const RunResult r = run(resume(" --no-load-optim"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST_F(CheckpointChecksum, ADamagedHeaderOrATruncatedFileIsRefused) {
  first_run();
  // "megatron.cpp" -> "megatron.cpq" in the header's metadata: valid JSON, same layout.
  const std::string bytes = read_text(model);
  const size_t at = bytes.find("\"megatron.cpp\"");
  ASSERT_NE(at, std::string::npos);
  flip_byte(model, at + 12, 'p' ^ 'q');
  expect_refused(run(resume()), {model + "': its header does not match the checksum recorded",
                                 "resume from iteration 5"});
  flip_byte(model, at + 12, 'p' ^ 'q');  // intact again
  fs::resize_file(optim, fs::file_size(optim) - 100);
  expect_refused(run(resume()), {optim, "truncated"});
  // A file of the right format from another save in its place.
  fs::copy_file(ckpt + "/iter_0000005/mp_rank_00_000/optim_dp_000.safetensors", optim,
                fs::copy_options::overwrite_existing);
  expect_refused(run(resume()), {optim + "': its header does not match the checksum recorded"});
}

TEST_F(CheckpointChecksum, ACheckpointWithoutChecksumsLoadsUnverifiedSaidOnce) {
  first_run();
  strip_checksums(iter10);
  {
    SafetensorsReader r(model);
    ASSERT_FALSE(r.has_checksums());
  }
  const RunResult r = run(resume());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(count(r.output, "records no checksums (saved before they existed): loading it "
                            "unverified"), 1u) << r.output;
  EXPECT_NE(r.output.find("loaded checkpoint from " + ckpt + " at iteration 10"),
            std::string::npos) << r.output;
  // What it saves next has them.
  const auto meta = nlohmann::json::parse(read_text(ckpt + "/iter_0000012/meta.json"));
  EXPECT_TRUE(meta.contains("files"));
}

// DP 2 with the distributed optimizer: only rank 1 reads the damaged
// optim_dp_001; the job ends (no hang) with its message and a non-zero exit.
TEST_F(CheckpointChecksum, ADamagedShardOfOneRankEndsTheWholeJob) {
  const std::string flags = data + tiny_model_flags() +
                            " --eval-interval 0 --use-distributed-optimizer --save " + ckpt;
  const RunResult first = run(mpirun(2) + " train" + flags + " --train-iters 10 --save-interval 10");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const auto meta = nlohmann::json::parse(read_text(iter10 + "/meta.json"));
  ASSERT_TRUE(meta.at("files").contains("mp_rank_00_000/optim_dp_001.safetensors"))
      << meta.dump(2);
  const std::string shard = iter10 + "/mp_rank_00_000/optim_dp_001.safetensors";
  const std::string name = "exp_avg_sq.decoder.final_layernorm.weight";
  SafetensorsReader probe(shard);
  const bool has = probe.has(name);
  const std::string target = has ? name : probe.names().front();
  probe.close();
  flip_byte(shard, tensor_offset(shard, target));
  const auto t0 = std::chrono::steady_clock::now();
  const RunResult r = run(mpirun(2) + " train" + flags + " --train-iters 12 --load " + ckpt);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  expect_refused(r, {shard + "': tensor '" + target + "' is corrupt"});
  EXPECT_LT(secs, 60.0) << r.output;
}

}  // namespace checkpoint_checksum_test
}  // namespace mt::test
