#include "data/preprocess.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "data/char_tokenizer.h"
#include "data/indexed_dataset.h"
#include "data_test_util.h"

namespace mt {
namespace preprocess_test {

using test::error_of;
using test::has;
using test::read_file;
using test::TempDir;
using test::write_file;

std::vector<std::string> decode_all(const std::string& prefix, const CharTokenizer& tok) {
  IndexedDataset ds(prefix);
  std::vector<std::string> out;
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < ds.num_sequences(); ++i) {
    ids.resize(size_t(ds.sequence_length(i)));
    ds.read(i, 0, int64_t(ids.size()), ids.data());
    out.push_back(tok.detokenize(ids));
  }
  return out;
}

TEST(Preprocess, TxtSplitsLikePythonSplitOnBlankLines) {
  TempDir dir;
  // Python: "a\n\n\nb\n\n\n\nc\n".split("\n\n") == ['a', '\nb', '', 'c\n'].
  write_file(dir.file("in.txt"), "\n\na\n\n\nb\n\n\n\nc\n");
  PreprocessOptions o;
  o.input = dir.file("in.txt");
  o.output_prefix = dir.file("out");
  const PreprocessStats st = preprocess(o);
  EXPECT_EQ(st.documents, 3);
  EXPECT_EQ(st.sequences, 3);
  EXPECT_EQ(st.tokens, 1 + 2 + 2);
  EXPECT_EQ(st.vocab_size, 4);  // \n a b c
  EXPECT_EQ(st.input_bytes, 13);
  ASSERT_EQ(st.dataset_prefixes.size(), 1u);
  EXPECT_EQ(st.dataset_prefixes[0], dir.file("out_text_document"));
  const CharTokenizer tok = CharTokenizer::load(dir.file("out_vocab.json"));
  EXPECT_EQ(decode_all(st.dataset_prefixes[0], tok), (std::vector<std::string>{"a", "\nb", "c\n"}));
  EXPECT_EQ(IndexedDataset(st.dataset_prefixes[0]).dtype(), TokenDType::kUInt16);
}

TEST(Preprocess, AppendEodEndsEveryDocument) {
  TempDir dir;
  write_file(dir.file("in.txt"), "ab\n\nba");
  PreprocessOptions o;
  o.input = dir.file("in.txt");
  o.output_prefix = dir.file("out");
  o.append_eod = true;
  const PreprocessStats st = preprocess(o);
  EXPECT_EQ(st.eod, 3);  // \n a b <|endoftext|>
  EXPECT_EQ(read_file(dir.file("out_vocab.json")), "[\"\\n\", \"a\", \"b\", \"<|endoftext|>\"]");
  IndexedDataset ds(st.dataset_prefixes[0]);
  ASSERT_EQ(ds.num_sequences(), 2);
  int32_t t[3];
  ds.read(0, 0, 3, t);
  EXPECT_EQ(t[0], 1);
  EXPECT_EQ(t[1], 2);
  EXPECT_EQ(t[2], 3);
  ds.read(1, 0, 3, t);
  EXPECT_EQ(t[2], 3);
}

TEST(Preprocess, WholeFileStreamsAcrossChunkBoundaries) {
  TempDir dir;
  // > 2 MiB with multi-byte characters at every offset modulo 7, so some
  // straddle the 1 MiB read chunks.
  std::string text;
  const std::string pieces[] = {"x", "\xC3\xA9", "\xE6\x97\xA5", "\xF0\x9F\x98\x80", "\n\n", "q"};
  for (int i = 0; text.size() < (size_t(5) << 19); ++i) text += pieces[i % 6] + pieces[(i * 7) % 6];
  write_file(dir.file("big.txt"), text);
  PreprocessOptions o;
  o.input = dir.file("big.txt");
  o.output_prefix = dir.file("big");
  o.whole_file_as_document = true;
  const PreprocessStats st = preprocess(o);
  EXPECT_EQ(st.documents, 1);
  EXPECT_EQ(st.vocab_size, 6);
  const CharTokenizer tok = CharTokenizer::load(dir.file("big_vocab.json"));
  const auto docs = decode_all(st.dataset_prefixes[0], tok);
  ASSERT_EQ(docs.size(), 1u);
  EXPECT_TRUE(docs[0] == text) << "whole-file document differs from the input";
}

TEST(Preprocess, JsonlKeysAndEmptyTexts) {
  TempDir dir;
  write_file(dir.file("in.jsonl"),
             "{\"text\": \"h\\u00e9\", \"title\": \"T\"}\n"
             "\n"
             "{\"text\": \"\", \"title\": \"U\", \"other\": 3}\n"
             "{\"text\": \"eh\", \"title\": \"TU\"}\n");
  PreprocessOptions o;
  o.input = dir.file("in.jsonl");
  o.output_prefix = dir.file("j");
  o.json_keys = {"text", "title"};
  o.append_eod = true;
  const PreprocessStats st = preprocess(o);
  ASSERT_EQ(st.dataset_prefixes.size(), 2u);
  EXPECT_EQ(st.dataset_prefixes[1], dir.file("j_title_document"));
  const CharTokenizer tok = CharTokenizer::load(dir.file("j_vocab.json"));
  EXPECT_EQ(tok.vocab_size(), 6);  // T U e h é eod
  IndexedDataset text(st.dataset_prefixes[0]);
  EXPECT_EQ(text.num_documents(), 3);
  EXPECT_EQ(text.num_sequences(), 2);  // the empty text is a document without sequence
  const int64_t expect_doc[4] = {0, 1, 1, 2};
  for (int d = 0; d < 4; ++d) EXPECT_EQ(text.document_indices()[d], expect_doc[d]);
  EXPECT_EQ(decode_all(st.dataset_prefixes[0], tok),
            (std::vector<std::string>{"h\xC3\xA9<|endoftext|>", "eh<|endoftext|>"}));
  EXPECT_EQ(decode_all(st.dataset_prefixes[1], tok),
            (std::vector<std::string>{"T<|endoftext|>", "U<|endoftext|>", "TU<|endoftext|>"}));
}

TEST(Preprocess, ErrorsNameTheProblem) {
  TempDir dir;
  write_file(dir.file("bad.txt"), "abc\n\nd\xFF");
  PreprocessOptions o;
  o.input = dir.file("bad.txt");
  o.output_prefix = dir.file("bad");
  std::string msg = error_of([&] { preprocess(o); });
  EXPECT_TRUE(has(msg, "invalid UTF-8") && has(msg, "byte offset 6")) << msg;
  EXPECT_FALSE(std::filesystem::exists(dir.file("bad_text_document.idx")));

  write_file(dir.file("k.jsonl"), "{\"text\": \"a\"}\n{\"body\": \"b\"}\n");
  o.input = dir.file("k.jsonl");
  msg = error_of([&] { preprocess(o); });
  EXPECT_TRUE(has(msg, "line 2") && has(msg, "\"text\"")) << msg;

  // Invalid UTF-8 in a .jsonl is named as such, with the file's byte offset
  // (14 + 13), not as a JSON problem.
  write_file(dir.file("u.jsonl"), "{\"text\": \"a\"}\n{\"text\": \"caf\xE9\"}\n");
  o.input = dir.file("u.jsonl");
  msg = error_of([&] { preprocess(o); });
  EXPECT_TRUE(has(msg, dir.file("u.jsonl") + " line 2: invalid UTF-8 at byte offset 27 (byte 0xE9)"))
      << msg;
  EXPECT_TRUE(has(msg, "fix: convert the input to UTF-8")) << msg;
  EXPECT_FALSE(has(msg, "JSON")) << msg;

  // A fixed vocabulary that lacks a character of the input.
  write_file(dir.file("v.json"), "[\"a\", \"b\"]");
  write_file(dir.file("c.txt"), "ab\n\nabc");
  o.input = dir.file("c.txt");
  o.vocab = dir.file("v.json");
  msg = error_of([&] { preprocess(o); });
  EXPECT_TRUE(has(msg, "U+0063 'c'") && has(msg, "byte offset 6")) << msg;
  o.input = dir.file("nope.txt");
  EXPECT_TRUE(has(error_of([&] { preprocess(o); }), "nope.txt"));
}

// An existing dataset is replaced only with --overwrite; then the new files
// are renamed in, so a reader that has the old ones open keeps their data.
TEST(Preprocess, ReplacesAnExistingDatasetOnlyWhenAskedAndReadersKeepTheOldData) {
  TempDir dir;
  write_file(dir.file("old.txt"), "abab\n\nba");
  write_file(dir.file("new.txt"), "cc\n\ncd\n\nd");
  PreprocessOptions o;
  o.input = dir.file("old.txt");
  o.output_prefix = dir.file("out");
  preprocess(o);
  const std::string bin = read_file(dir.file("out_text_document.bin"));
  const std::string idx = read_file(dir.file("out_text_document.idx"));
  const std::string vocab = read_file(dir.file("out_vocab.json"));

  o.input = dir.file("new.txt");
  const std::string msg = error_of([&] { preprocess(o); });
  EXPECT_TRUE(has(msg, "--output-prefix " + dir.file("out") + ": " +
                           dir.file("out_text_document.bin")) &&
              has(msg, "already exist") && has(msg, "fix: pass --overwrite"))
      << msg;
  EXPECT_EQ(read_file(dir.file("out_text_document.bin")), bin);
  EXPECT_EQ(read_file(dir.file("out_text_document.idx")), idx);
  EXPECT_EQ(read_file(dir.file("out_vocab.json")), vocab);

  const IndexedDataset open_before(dir.file("out_text_document"));
  o.overwrite = true;
  const PreprocessStats st = preprocess(o);
  EXPECT_EQ(st.documents, 3);
  EXPECT_NE(read_file(dir.file("out_text_document.bin")), bin);
  // The reader opened before still sees the old dataset, whole.
  ASSERT_EQ(open_before.num_sequences(), 2);
  std::vector<int32_t> ids(size_t(open_before.sequence_length(0)));
  open_before.read(0, 0, int64_t(ids.size()), ids.data());
  EXPECT_EQ(CharTokenizer::from_json(vocab, "old vocabulary").detokenize(ids), "abab");
  EXPECT_EQ(IndexedDataset(dir.file("out_text_document")).num_sequences(), 3);
}

TEST(Preprocess, TinyShakespeareIsByteIdenticalToMegatron) {
  const std::string rel = "megatron-indexed/tinyshakespeare_text_document";
  if (!test::shared_file_exists(rel + ".idx") || !test::shared_file_exists("tinyshakespeare.txt"))
    GTEST_SKIP() << "shared data not found at " << MT_SHARED_DATA
                 << " (needs megatron-indexed/ and tinyshakespeare.txt); skipping";
  TempDir dir;
  PreprocessOptions o;
  o.input = test::shared_data("tinyshakespeare.txt");
  o.output_prefix = dir.file("tinyshakespeare");
  const PreprocessStats st = preprocess(o);
  EXPECT_EQ(st.documents, 7222);
  EXPECT_EQ(st.vocab_size, 65);
  EXPECT_EQ(st.input_bytes, 1115394);
  const std::string ours = st.dataset_prefixes[0];
  const std::string theirs = test::shared_data(rel);
  EXPECT_TRUE(read_file(ours + ".idx") == read_file(theirs + ".idx")) << ".idx differs";
  EXPECT_TRUE(read_file(ours + ".bin") == read_file(theirs + ".bin")) << ".bin differs";
  EXPECT_EQ(read_file(st.vocab_path), read_file(test::shared_data("megatron-indexed/vocab.json")));
}

}  // namespace preprocess_test
}  // namespace mt
