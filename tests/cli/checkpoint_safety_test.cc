// Issue 17's data-loss and silent-wrong-answer findings, reproduced with the
// real binary: a run never overwrites checkpoints it did not load, a stop on a
// save point saves once, a crash mid-re-save is repaired, damaged or non-finite
// checkpoints, a different vocabulary and a different architecture are
// refused with the file, tensor or flag named, and an unwritable --save or a model too large for the host fails at
// start-up, before any training or allocation.
#include <chrono>
#include <cstring>
#include <filesystem>

#include "checkpoint_bytes_util.h"
#include "cli_test_util.h"

namespace mt::test {
namespace checkpoint_safety_test {

namespace fs = std::filesystem;

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t p = text.find(part); p != std::string::npos; p = text.find(part, p + 1)) ++n;
  return n;
}

class CheckpointSafety : public ::testing::Test {
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
  // Trains 10 iterations saving at 5 and 10; returns the bytes that must survive.
  std::string first_run() const {
    const RunResult r = run(train(" --train-iters 10 --save-interval 5 --save " + ckpt));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return snapshot();
  }
  std::string snapshot() const {
    std::string s = read_text(ckpt + "/latest_checkpointed_iteration.txt");
    for (const char* it : {"iter_0000005", "iter_0000010"})
      s += read_text(ckpt + "/" + it + "/mp_rank_00_000/model.safetensors") +
           read_text(ckpt + "/" + it + "/meta.json");
    return s;
  }
  void expect_refused(const RunResult& r, const std::string& expected) const {
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(expected), std::string::npos)
        << "expected '" << expected << "' in:\n" << r.output;
    EXPECT_EQ(r.output.find("iteration        1/"), std::string::npos) << "trained:\n" << r.output;
  }
};

TEST_F(CheckpointSafety, ATypoInLoadOrALostTrackerNeverOverwritesARun) {
  const std::string before = first_run();
  expect_refused(run(train(" --train-iters 20 --load " + ckpt + "x --save " + ckpt)),
                 "--load " + ckpt + "x does not exist");
  expect_refused(run(train(" --train-iters 20 --save " + ckpt)),
                 "holds checkpoints (iter_0000005, iter_0000010)");
  fs::rename(ckpt + "/latest_checkpointed_iteration.txt", dir.file("tracker"));
  expect_refused(run(train(" --train-iters 20 --load " + ckpt + " --save " + ckpt)),
                 "has no latest_checkpointed_iteration.txt");
  fs::rename(dir.file("tracker"), ckpt + "/latest_checkpointed_iteration.txt");
  EXPECT_EQ(snapshot(), before) << "a refused run changed the checkpoints";
  // The explicit override starts from scratch and saves over them.
  const RunResult over =
      run(train(" --train-iters 6 --save " + ckpt + " --overwrite-checkpoints"));
  EXPECT_EQ(over.exit_code, 0) << over.output;
  EXPECT_EQ(read_text(ckpt + "/latest_checkpointed_iteration.txt"), "6\n");
}

TEST_F(CheckpointSafety, AStopOnASavePointSavesOnceAndACrashedResaveIsRepaired) {
  const RunResult r =
      run(train(" --train-iters 20 --save-interval 5 --exit-interval 5 --save " + ckpt));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(count(r.output, "saved checkpoint at iteration 5 "), 1u) << r.output;
  // What a crash between renaming iter_5 aside and renaming the new copy in
  // leaves behind, plus a stray incomplete save: generate reads iter_5.old,
  // and the next training run puts it back and removes the stray.
  fs::rename(ckpt + "/iter_0000005", ckpt + "/iter_0000005.old");
  fs::create_directories(ckpt + "/iter_0000005.tmp/mp_rank_00_000");
  fs::create_directories(ckpt + "/iter_0000008.tmp");
  const RunResult gen = run(megatron() + " generate --load " + ckpt +
                            " --prompt 'The cat' --max-new-tokens 8 --temperature 0");
  EXPECT_EQ(gen.exit_code, 0) << gen.output;
  const RunResult resumed =
      run(train(" --train-iters 10 --load " + ckpt + " --save " + ckpt + " --save-interval 5"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("restored " + ckpt + "/iter_0000005 from"), std::string::npos)
      << resumed.output;
  EXPECT_NE(resumed.output.find("removed " + ckpt + "/iter_0000008.tmp"), std::string::npos)
      << resumed.output;
  EXPECT_NE(resumed.output.find("loaded checkpoint from " + ckpt + " at iteration 5"),
            std::string::npos) << resumed.output;
  for (const char* gone : {"/iter_0000005.old", "/iter_0000005.tmp", "/iter_0000008.tmp"})
    EXPECT_FALSE(exists(ckpt + gone)) << gone;
  EXPECT_EQ(read_text(ckpt + "/latest_checkpointed_iteration.txt"), "10\n");
}

// Non-finite values saved as such (checksums consistent: not damage, which
// checkpoint_checksum_test.cc covers, but a checkpoint written holding them).
TEST_F(CheckpointSafety, NonFiniteOrDamagedCheckpointsAreNamed) {
  first_run();
  const std::string iter_dir = ckpt + "/iter_0000010", rank_dir = iter_dir + "/mp_rank_00_000";
  set_saved_value(iter_dir, "mp_rank_00_000/model.safetensors",
                  "decoder.layers.1.mlp.linear_fc1.weight", 7,
                  std::numeric_limits<float>::quiet_NaN());
  const std::string named = "tensor 'decoder.layers.1.mlp.linear_fc1.weight' holds 1 non-finite";
  expect_refused(run(train(" --train-iters 20 --load " + ckpt + " --save " + ckpt)), named);
  expect_refused(run(megatron() + " generate --load " + ckpt + " --prompt hi"), named);
  set_saved_value(iter_dir, "mp_rank_00_000/optim_dp_000.safetensors",
                  "exp_avg_sq.embedding.position_embeddings.weight", 0,
                  std::numeric_limits<float>::infinity());
  fs::copy_file(ckpt + "/iter_0000005/mp_rank_00_000/model.safetensors",
                rank_dir + "/model.safetensors", fs::copy_options::overwrite_existing);
  rerecord(iter_dir, "mp_rank_00_000/model.safetensors");
  expect_refused(run(train(" --train-iters 20 --load " + ckpt + " --save " + ckpt)),
                 "optimizer state exp_avg_sq.embedding.position_embeddings.weight holds 1");

  std::ofstream(ckpt + "/latest_checkpointed_iteration.txt") << "4abc\n";
  expect_refused(run(megatron() + " generate --load " + ckpt + " --prompt hi"),
                 "holds '4abc', not an iteration number");
  std::ofstream(ckpt + "/latest_checkpointed_iteration.txt") << "5\n";
  fs::copy(ckpt + "/iter_0000005", ckpt + "/iter_0000006", fs::copy_options::recursive);
  std::ofstream(ckpt + "/latest_checkpointed_iteration.txt") << "6\n";
  expect_refused(run(megatron() + " generate --load " + ckpt + " --prompt hi"),
                 "says iteration 5 but lies in the directory of iteration 6");
  std::ofstream(ckpt + "/iter_0000006/meta.json") << R"({"format": "megatron.cpp checkpoint",
      "version": 1, "iteration": 6})";
  expect_refused(run(megatron() + " generate --load " + ckpt + " --prompt hi"),
                 "iter_0000006/meta.json has no 'consumed_samples'");
}

TEST_F(CheckpointSafety, ADifferentVocabularyOnResumeIsRefused) {
  first_run();
  // Same size, two characters swapped: ids would decode to other text.
  auto vocab = nlohmann::json::parse(read_text(dir.file("corpus_vocab.json")));
  std::swap(vocab[5], vocab[6]);
  std::ofstream(dir.file("other_vocab.json")) << vocab.dump();
  std::string flags = train(" --train-iters 20 --load " + ckpt + " --save " + ckpt);
  flags.replace(flags.find(dir.file("corpus_vocab.json")), dir.file("corpus_vocab.json").size(),
                dir.file("other_vocab.json"));
  expect_refused(run(flags), "the checkpoint was trained with another tokenizer");
}

TEST_F(CheckpointSafety, ADifferentArchitectureOnResumeIsRefused) {
  const std::string before = first_run();
  // Each would load (names that exist, shapes that fit) into another function.
  const std::pair<const char*, const char*> changes[] = {
      {" --normalization RMSNorm", "--normalization LayerNorm but this run has RMSNorm"},
      {" --position-embedding-type rope", "--position-embedding-type learned_absolute"},
      {" --norm-epsilon 1e-6", "--norm-epsilon"},
      // (4 groups of 4 heads would be no grouping: the same model, accepted)
      {" --group-query-attention --num-query-groups 2",
       "--num-query-groups 4 but this run has 2; fix: leave out --group-query-attention"},
  };
  for (const auto& [flag, expected] : changes)
    expect_refused(run(train(std::string(" --train-iters 20 --load ") + ckpt + " --save " + ckpt +
                             flag)),
                   expected);
  EXPECT_EQ(snapshot(), before);
  // A checkpoint from before the Llama-era fields was trained with their
  // defaults (GPT-2's block): it resumes as that, and refuses another block.
  const std::string meta_path = ckpt + "/iter_0000010/meta.json";
  auto meta = nlohmann::json::parse(read_text(meta_path));
  for (const char* k : {"normalization", "position_embedding_type", "rotary_base", "rotary_percent",
                        "swiglu", "group_query_attention", "num_query_groups",
                        "disable_bias_linear", "untie_embeddings_and_output_weights"})
    ASSERT_EQ(meta["args"]["model"].erase(k), 1u) << k;
  std::ofstream(meta_path) << meta.dump(2);
  expect_refused(run(train(" --train-iters 20 --load " + ckpt + " --save " + ckpt + " --swiglu")),
                 "trained without --swiglu but this run is with it");
  // What may change on resume does not stop it.
  const RunResult r = run(train(" --train-iters 12 --load " + ckpt + " --save " + ckpt +
                                " --hidden-dropout 0 --attention-dropout 0"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST_F(CheckpointSafety, AnUnwritableSaveFailsAtStartUp) {
  std::ofstream(dir.file("a_file")) << "x";
  expect_refused(run(train(" --train-iters 6 --save " + dir.file("a_file/ckpt"))),
                 "cannot create the --save directory " + dir.file("a_file/ckpt"));
}

// A model whose predicted memory (16 bytes per parameter in fp32 + Adam) is
// above this host's available memory is refused before anything is allocated.
TEST_F(CheckpointSafety, AModelTooLargeForTheHostIsRefusedBeforeAllocating) {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kb = 0, avail = -1;
  while (meminfo >> key >> kb) {
    if (key == "MemAvailable:") avail = kb * 1024;
    meminfo.ignore(64, '\n');
  }
  ASSERT_GE(avail, 0) << "no MemAvailable in /proc/meminfo (Linux >= 3.14 has it)";
  const int64_t h = 4096, per_layer = 12 * h * h;
  const int64_t layers = int64_t(1.2 * double(avail) / double(16 * per_layer)) + 1;
  const auto t0 = std::chrono::steady_clock::now();
  const RunResult r = run(megatron() + " train" + data + " --num-layers " + std::to_string(layers) +
                          " --hidden-size 4096 --num-attention-heads 32 --seq-length 32"
                          " --micro-batch-size 1 --train-iters 5 --peak-tflops 1");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("are available"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--skip-memory-check"), std::string::npos) << r.output;
  EXPECT_LT(secs, 20.0) << "it allocated before refusing:\n" << r.output;
}

}  // namespace checkpoint_safety_test
}  // namespace mt::test
