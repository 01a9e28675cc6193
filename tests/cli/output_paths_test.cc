// Nothing a command writes may destroy what it reads (core/output_guard.h):
// every subcommand's output flags pointed at each of its inputs — by path, by a
// symbolic link, by a hard link, inside the checkpoint's folders — are refused
// in one line with a non-zero exit, and every file of the test's folder is
// byte-identical afterwards (nothing created either). Also: preprocess never
// replaces a dataset without --overwrite, and a resume on a dataset that
// changed since its checkpoint stops.
#include <unistd.h>

#include <filesystem>
#include <map>
#include <sstream>

#include "bad_input_util.h"

namespace mt::test {
namespace output_paths_test {

namespace fs = std::filesystem;

// Every file (its bytes) and folder under `root`; links as their targets' text.
std::map<std::string, std::string> snapshot(const std::string& root) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    const std::string rel = fs::relative(e.path(), root).string();
    if (e.is_symlink())
      out[rel] = "-> " + fs::read_symlink(e.path()).string();
    else if (e.is_directory())
      out[rel] = "<dir>";
    else
      out[rel] = read_text(e.path().string());
  }
  return out;
}

class OutputPaths : public BadInputFixture {
 protected:
  std::vector<std::string> checkpoint_files;  // relative to dir
  void SetUp() override {
    BadInputFixture::SetUp();
    const RunResult r = run(megatron() + train(" --train-iters 2 --lr-decay-iters 20 --save " + dir.file("ck")));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    write_text(dir.file("flags.toml"), "seed = 1234\n");
    write_text(dir.file("plan.toml"), "num-layers = 2\n");
    write_text(dir.file("docs.txt"), "The cat sees the river.\n\nA dog likes the garden.\n");
    fs::create_directories(dir.file("hf"));
    write_text(dir.file("hf/config.json"), "{}\n");
    fs::create_directories(dir.file("links"));
    for (const auto& e : fs::recursive_directory_iterator(dir.file("ck")))
      if (e.is_regular_file()) checkpoint_files.push_back(fs::relative(e.path(), dir.file("")).string());
    ASSERT_GE(checkpoint_files.size(), 3u);
  }

  // The file `rel` as an output path three ways: itself, a symbolic link to
  // it and a hard link of it (both made once, in links/).
  std::vector<std::string> spellings(const std::string& rel) const {
    std::string flat = rel;
    for (char& c : flat)
      if (c == '/') c = '_';
    const std::string soft = dir.file("links/soft_" + flat), hard = dir.file("links/hard_" + flat);
    if (!fs::exists(soft)) {
      EXPECT_EQ(::symlink(dir.file(rel).c_str(), soft.c_str()), 0) << soft;
    }
    if (!fs::exists(hard)) {
      EXPECT_EQ(::link(dir.file(rel).c_str(), hard.c_str()), 0) << hard;
    }
    return {dir.file(rel), soft, hard};
  }

  // `args` (after `megatron`) fails in one line naming `flag`, leaving the folder as it was.
  void expect_refused(const std::string& args, const std::string& flag) {
    const auto before = snapshot(dir.file(""));
    const RunResult r = run(megatron() + args);
    EXPECT_NE(r.exit_code, 0) << args << "\n" << r.output;
    EXPECT_NE(r.output.find("fix: give " + flag + " a path outside what"), std::string::npos)
        << args << "\n" << r.output;
    int error_lines = 0;
    std::istringstream lines(r.output);
    for (std::string line; std::getline(lines, line);) error_lines += line.find("error") != std::string::npos;
    EXPECT_EQ(error_lines, 1) << args << "\n" << r.output;
    EXPECT_TRUE(before == snapshot(dir.file(""))) << "the folder changed after: " << args;
  }

  std::string resume(const std::string& extra) const {
    return train(" --train-iters 4 --lr-decay-iters 20 --load " + dir.file("ck") + " --save " + dir.file("ck") +
                 " --config " + dir.file("flags.toml") + extra);
  }
};

TEST_F(OutputPaths, TrainOutputsNeverReplaceOrAppendToItsInputs) {
  std::vector<std::string> inputs = checkpoint_files;
  for (const char* f : {"corpus_text_document.bin", "corpus_text_document.idx",
                        "corpus_tokenizer.json", "corpus_vocab.json", "flags.toml"})
    inputs.push_back(f);
  for (const std::string& in : inputs)
    for (const std::string& out : spellings(in))
      expect_refused(resume(" --log-json " + out), "--log-json");
  expect_refused(resume(" --log-json " + dir.file("ck/iter_0000002/log.jsonl")), "--log-json");
  // Every folder output named on each input file (a later --save wins over resume's).
  for (const std::string& in : inputs) {
    const std::string at = dir.file(in);
    expect_refused(resume(" --save " + at), "--save");
    expect_refused(resume(" --tensorboard-dir " + at), "--tensorboard-dir");
    expect_refused(resume(" --data-cache-path " + at), "--data-cache-path");
    expect_refused(resume(" --profile --profile-step-start 2 --profile-step-end 3 --profile-dir " + at),
                   "--profile-dir");
  }
  // Folders: --save inside the loaded checkpoint, or on a file read.
  expect_refused(train(" --train-iters 4 --lr-decay-iters 20 --load " + dir.file("ck") + " --save " +
                       dir.file("ck/iter_0000002")),
                 "--save");
  expect_refused(train(" --save " + dir.file("corpus_vocab.json")), "--save");
  expect_refused(resume(" --tensorboard-dir " + dir.file("flags.toml")), "--tensorboard-dir");
  expect_refused(resume(" --profile --profile-step-start 2 --profile-step-end 3 --profile-dir " +
                        dir.file("corpus_text_document.bin")),
                 "--profile-dir");
  expect_refused(resume(" --data-cache-path " + dir.file("corpus_text_document.idx")),
                 "--data-cache-path");
  // What may share a folder with the checkpoint still trains: TensorBoard and
  // the log beside it, the profile in its own folder under it.
  const RunResult ok = run(megatron() + resume(" --tensorboard-dir " + dir.file("ck") +
                                               " --log-json " + dir.file("ck/log.jsonl")));
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
}

TEST_F(OutputPaths, GenerateAndScoreOutputJsonNeverReplaceTheCheckpointOrTheText) {
  for (const std::string& in : checkpoint_files)
    for (const std::string& out : spellings(in)) {
      expect_refused(" generate --load " + dir.file("ck") + " --max-new-tokens 2 --output-json " + out,
                     "--output-json");
      expect_refused(" score --load " + dir.file("ck") + " --input " + dir.file("docs.txt") +
                         " --output-json " + out,
                     "--output-json");
    }
  expect_refused(" generate --load " + dir.file("ck") + " --output-json " +
                     dir.file("ck/iter_0000002/out.json"),
                 "--output-json");
  for (const std::string& out : spellings("docs.txt"))
    expect_refused(" score --load " + dir.file("ck") + " --input " + dir.file("docs.txt") +
                       " --output-json " + out,
                   "--output-json");
}

TEST_F(OutputPaths, PreprocessConvertAndPlanOutputsNeverReplaceTheirInputs) {
  // The char vocabulary it reads is one it would write; --overwrite or not.
  expect_refused(" preprocess --overwrite --input " + dir.file("docs.txt") + " --output-prefix " +
                     dir.file("corpus") + " --vocab-file " + dir.file("corpus_vocab.json"),
                 "--output-prefix");
  for (const std::string& in : spellings("corpus_text_document.bin"))
    expect_refused(" preprocess --overwrite --input " + in + " --output-prefix " + dir.file("corpus"),
                   "--output-prefix");
  // Export into the checkpoint, or over the folder that holds it; import into the HF folder.
  expect_refused(" convert --model-type GPT --loader megatron --saver hf --load-dir " +
                     dir.file("ck") + " --save-dir " + dir.file("ck/iter_0000002"),
                 "--save-dir");
  expect_refused(" convert --model-type GPT --loader megatron --saver hf --load-dir " +
                     dir.file("ck") + " --save-dir " + dir.file(""),
                 "--save-dir");
  for (const char* save : {"hf", "hf/megatron"})
    expect_refused(" convert --model-type GPT --loader hf --saver megatron --load-dir " +
                       dir.file("hf") + " --save-dir " + dir.file(save),
                   "--save-dir");
  for (const std::string& out : spellings("plan.toml"))
    expect_refused(" plan --calibrate --config " + dir.file("plan.toml") + " --output " + out,
                   "--output");
}

TEST_F(OutputPaths, PreprocessReplacesADatasetOnlyWithOverwrite) {
  const std::string again = " preprocess --input " + dir.file("docs.txt") + " --output-prefix " +
                            dir.file("corpus");
  const auto before = snapshot(dir.file(""));
  expect_fails({"existing dataset", again, "already exist"});
  EXPECT_TRUE(before == snapshot(dir.file("")));
  const RunResult r = run(megatron() + again + " --overwrite");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(read_text(dir.file("corpus_text_document.bin")), before.at("corpus_text_document.bin"));
}

TEST_F(OutputPaths, AResumeOnADatasetThatChangedStopsUnlessAllowed) {
  // The same prefix, other text (a second preprocess, as asked with --overwrite).
  // (a copy of its vocabulary, so that the ids mean the same characters)
  fs::copy_file(dir.file("corpus_vocab.json"), dir.file("vocab_copy.json"));
  write_text(dir.file("corpus.txt"), synthetic_corpus(50, 99));
  const RunResult redo = run(megatron() + " preprocess --overwrite --input " + dir.file("corpus.txt") +
                             " --output-prefix " + dir.file("corpus") + " --vocab-file " +
                             dir.file("vocab_copy.json"));
  ASSERT_EQ(redo.exit_code, 0) << redo.output;
  const auto ck_before = snapshot(dir.file("ck"));
  expect_fails({"changed data", resume(""), "changed since --load"});
  const RunResult r = run(megatron() + resume(""));
  EXPECT_NE(r.output.find("corpus_text_document changed since --load"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--allow-changed-data"), std::string::npos) << r.output;
  EXPECT_TRUE(ck_before == snapshot(dir.file("ck")));
  const RunResult allowed = run(megatron() + resume(" --allow-changed-data"));
  EXPECT_EQ(allowed.exit_code, 0) << allowed.output;
  EXPECT_NE(allowed.output.find("warning: --data-path"), std::string::npos) << allowed.output;
  // The new checkpoint records the new contents: the next resume goes on without a word.
  const RunResult next = run(megatron() + train(" --train-iters 6 --lr-decay-iters 20 --load " + dir.file("ck") +
                                                " --save " + dir.file("ck")));
  EXPECT_EQ(next.exit_code, 0) << next.output;
  EXPECT_EQ(next.output.find("changed since"), std::string::npos) << next.output;
}

}  // namespace output_paths_test
}  // namespace mt::test
