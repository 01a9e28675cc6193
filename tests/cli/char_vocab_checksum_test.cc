// The character vocabulary is checksummed like the other tokenizers' files
// (checkpoint/checkpoint_tokenizer.h): a checkpoint's meta.json records its
// SHA-256 (what `sha256sum <prefix>_vocab.json` prints) and preprocess writes
// <prefix>_tokenizer.json beside the dataset, so a vocabulary edited in either
// place is refused in one line naming the file, both checksums and the fix,
// instead of turning the ids into other text. Checkpoints and datasets from
// before the checksum (none recorded) still load.
#include <regex>

#include "bad_input_util.h"

namespace mt::test {
namespace char_vocab_checksum_test {

class CharVocabChecksum : public BadInputFixture {
 protected:
  std::string sha256sum(const std::string& path) const {
    const RunResult r = run("sha256sum " + path);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r.output.substr(0, 64);
  }
  // The launch of a resume that gives no tokenizer flags (adopts --load's).
  std::string resume(const std::string& extra) const {
    return " train --data-path " + dir.file("corpus_text_document") + tiny_model_flags() +
           " --train-iters 12 --eval-interval 0 --load " + dir.file("ckpt") + extra;
  }
};

TEST_F(CharVocabChecksum, AVocabularyEditedInACheckpointIsRefused) {
  const RunResult saved = run(megatron() + train(" --save " + dir.file("ckpt")));
  ASSERT_EQ(saved.exit_code, 0) << saved.output;
  const std::string meta_path = dir.file("ckpt/iter_0000008/meta.json");
  const std::string original = read_text(meta_path);
  nlohmann::json meta = nlohmann::json::parse(original);
  const std::string want = sha256sum(dir.file("corpus_vocab.json"));
  ASSERT_EQ(meta.at("args").at("tokenizer").value("vocab_sha256", ""), want) << original;

  // Same size, two characters swapped: only the checksum tells.
  std::swap(meta["args"]["tokenizer"]["vocab"][5], meta["args"]["tokenizer"]["vocab"][6]);
  write_text(meta_path, meta.dump(2));
  const std::string what = meta_path + ": the character vocabulary in args.tokenizer.vocab";
  for (const BadInputCase& c :
       {BadInputCase{"generate", " generate --load {dir}ckpt --prompt hi", what.c_str()},
        BadInputCase{"score", " score --load {dir}ckpt --input {dir}corpus.txt", what.c_str()},
        BadInputCase{"resume adopting the checkpoint's vocabulary", resume(""), what.c_str()}})
    expect_fails(c);
  const RunResult r = run(megatron() + " generate --load " + dir.file("ckpt") + " --prompt hi");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("has SHA-256 ([0-9a-f]{64}) but the run "
                                                        "recorded ([0-9a-f]{64})")))
      << r.output;
  EXPECT_NE(m[1].str(), want);
  EXPECT_EQ(m[2].str(), want);
  EXPECT_NE(r.output.find("; fix: restore that vocabulary"), std::string::npos) << r.output;
  EXPECT_EQ(read_text(dir.file("ckpt/latest_checkpointed_iteration.txt")), "8\n");  // untouched

  // A checkpoint saved before the checksum (none recorded) loads, and a run
  // resumed from it records the checksum in its own checkpoints.
  meta = nlohmann::json::parse(original);
  meta["args"]["tokenizer"].erase("vocab_sha256");
  write_text(meta_path, meta.dump(2));
  const RunResult gen = run(megatron() + " generate --load " + dir.file("ckpt") + " --prompt hi");
  EXPECT_EQ(gen.exit_code, 0) << gen.output;
  const RunResult cont = run(megatron() + resume(" --save " + dir.file("ckpt")));
  ASSERT_EQ(cont.exit_code, 0) << cont.output;
  const nlohmann::json next =
      nlohmann::json::parse(read_text(dir.file("ckpt/iter_0000012/meta.json")));
  EXPECT_EQ(next.at("args").at("tokenizer").value("vocab_sha256", ""), want);
}

TEST_F(CharVocabChecksum, AVocabularyEditedAfterPreprocessingIsRefused) {
  const std::string vocab_path = dir.file("corpus_vocab.json");
  const std::string want = sha256sum(vocab_path);
  const nlohmann::json record = nlohmann::json::parse(read_text(dir.file("corpus_tokenizer.json")));
  EXPECT_EQ(record.value("type", ""), "char");
  EXPECT_EQ(record.at("vocab_file").value("sha256", ""), want);
  EXPECT_EQ(record.at("vocab_file").value("path", ""), vocab_path);

  // The same vocabulary written otherwise (no spaces) has the same checksum.
  nlohmann::json vocab = nlohmann::json::parse(read_text(vocab_path));
  write_text(vocab_path, vocab.dump());
  ASSERT_NE(sha256sum(vocab_path), want);
  const RunResult same = run(megatron() + train(""));
  EXPECT_EQ(same.exit_code, 0) << same.output;

  std::swap(vocab[5], vocab[6]);
  write_text(vocab_path, vocab.dump());
  const std::string what = "--data-path " + dir.file("corpus_text_document") +
                           " was made with the char --vocab-file " + vocab_path + " of SHA-256 " +
                           want + " (recorded in " + dir.file("corpus_tokenizer.json") +
                           ") but this run's --vocab-file " + vocab_path + " has SHA-256 ";
  expect_fails({"edited vocabulary", train(""), what.c_str()});
  const RunResult r = run(megatron() + train(""));
  EXPECT_NE(r.output.find("; fix: use the file the dataset was made with"), std::string::npos)
      << r.output;

  // A dataset without the record (made before it, or by Megatron-LM) trains.
  std::filesystem::remove(dir.file("corpus_tokenizer.json"));
  const RunResult old = run(megatron() + train(""));
  EXPECT_EQ(old.exit_code, 0) << old.output;
}

}  // namespace char_vocab_checksum_test
}  // namespace mt::test
