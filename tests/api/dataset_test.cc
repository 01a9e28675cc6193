// megatron::Preprocessor (include/megatron/dataset.h) from C++, without flag
// words: a small text preprocessed through PreprocessOptions writes the
// datasets the summary names, whose .idx holds the summary's documents and
// tokens, each document the char tokenizer's own ids of its paragraph (+ eod);
// a .jsonl gives one dataset per key. The words constructor parses
// `megatron preprocess`'s flags as the binary does (--help a FlagHelp with its
// usage, a refused flag a FlagError naming it). Each rank of an mpirun works
// in its own folder.
#include <gtest/gtest.h>

#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/indexed_dataset.h"
#include "data/tokenizer.h"
#include "megatron/dataset.h"
#include "temp_dir.h"
#include "text_files.h"

namespace dataset_test {

using mt::test::write_text;

// Sequence i of `ds`, whole.
std::vector<int32_t> sequence(const mt::IndexedDataset& ds, int64_t i) {
  std::vector<int32_t> ids(size_t(ds.sequence_length(i)));
  ds.read(i, 0, int64_t(ids.size()), ids.data());
  return ids;
}

TEST(Dataset, PreprocessWritesTheTokenizersIdsOfEachDocument) {
  mt::test::TempDir dir;
  // Three paragraphs (one with a two-byte character), "\n\n\n" leaves "\n" in the third.
  const std::vector<std::string> docs = {"The cat sees the river.",
                                         "A queen\nhelps a dog, caf\xc3\xa9.",
                                         "\nMy friend finds a red apple."};
  write_text(dir.file("corpus.txt"), docs[0] + "\n\n" + docs[1] + "\n\n\n" + docs[2].substr(1));
  megatron::PreprocessOptions o;
  o.input = dir.file("corpus.txt");
  o.output_prefix = dir.file("out");
  o.append_eod = true;
  megatron::Preprocessor p(o);
  const std::vector<std::string> outputs = p.outputs();
  EXPECT_EQ(outputs.size(), 4u);  // .bin, .idx, vocab, tokenizer record
  const megatron::PreprocessSummary s = p.preprocess();

  EXPECT_EQ(s.documents, 3);
  EXPECT_EQ(s.sequences, 3);
  ASSERT_EQ(s.dataset_prefixes, std::vector<std::string>{dir.file("out_text_document")});
  EXPECT_EQ(s.vocab_path, dir.file("out_vocab.json"));
  for (const std::string& f : outputs) EXPECT_TRUE(std::ifstream(f).good()) << f;
  // The vocabulary written, as a later run loads it.
  mt::TokenizerOptions t;
  t.vocab_file = s.vocab_path;
  const std::unique_ptr<mt::Tokenizer> tok = mt::make_tokenizer(t);
  EXPECT_EQ(tok->vocab_size(), s.vocab_size);
  EXPECT_EQ(tok->eod(), s.eod);
  EXPECT_EQ(s.eod, s.vocab_size - 1);  // "<|endoftext|>" last

  const mt::IndexedDataset ds(s.dataset_prefixes[0]);
  EXPECT_EQ(ds.num_documents(), 3);
  EXPECT_EQ(ds.num_tokens(), s.tokens);
  int64_t tokens = 0;
  for (size_t d = 0; d < docs.size(); ++d) {
    std::vector<int32_t> want = tok->tokenize(docs[d]);
    want.push_back(tok->eod());
    tokens += int64_t(want.size());
    EXPECT_EQ(sequence(ds, int64_t(d)), want) << "document " << d;
    EXPECT_EQ(tok->detokenize(std::vector<int32_t>(want.begin(), want.end() - 1)), docs[d]);
  }
  EXPECT_EQ(s.tokens, tokens);
  EXPECT_EQ(tokens, 23 + 1 + 26 + 1 + 29 + 1);  // code points + eod each
}

TEST(Dataset, JsonlWithNullTokenizerGivesOneDatasetPerKey) {
  mt::test::TempDir dir;
  write_text(dir.file("in.jsonl"), "{\"text\": \"1 2 3\", \"title\": \"7\"}\n"
                                   "{\"text\": \"4 5\", \"title\": \"8 9\"}\n");
  megatron::PreprocessOptions o;
  o.input = dir.file("in.jsonl");
  o.output_prefix = dir.file("j");
  o.json_keys = {"text", "title"};
  o.tokenizer_type = "NullTokenizer";
  o.vocab_size = 10;
  o.workers = 2;
  const megatron::PreprocessSummary s = megatron::Preprocessor(o).preprocess();
  ASSERT_EQ(s.dataset_prefixes,
            (std::vector<std::string>{dir.file("j_text_document"), dir.file("j_title_document")}));
  EXPECT_EQ(s.documents, 4);  // 2 lines x 2 keys
  EXPECT_EQ(s.tokens, 8);
  EXPECT_EQ(s.vocab_size, 11);  // ids 0..9 and eod
  EXPECT_EQ(s.eod, -1);         // none appended
  const mt::IndexedDataset text(s.dataset_prefixes[0]), title(s.dataset_prefixes[1]);
  EXPECT_EQ(sequence(text, 0), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(sequence(text, 1), (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(sequence(title, 1), (std::vector<int32_t>{8, 9}));
}

TEST(Dataset, OptionsTheRunWouldNeverTakeAreRefusedAtOnce) {
  megatron::PreprocessOptions o;
  o.input = "in.txt";
  EXPECT_THROW(megatron::Preprocessor{o}, std::invalid_argument);  // no output prefix
  o.output_prefix = "out";
  o.workers = 0;
  EXPECT_THROW(megatron::Preprocessor{o}, std::invalid_argument);
  o.workers = 4;
  EXPECT_EQ(megatron::Preprocessor(o).options().workers, 4);
}

TEST(DatasetFlags, TheWordsSetTheOptionsAsTheCommandsFlags) {
  const megatron::Preprocessor p({"--input", "a.txt", "--output-prefix", "o", "--tokenizer-type",
                                  "NullTokenizer", "--vocab-size", "50", "--document-per-file",
                                  "--workers", "3", "--append-eod"});
  const megatron::PreprocessOptions& o = p.options();
  EXPECT_EQ(o.input, "a.txt");
  EXPECT_EQ(o.output_prefix, "o");
  EXPECT_EQ(o.tokenizer_type, "NullTokenizer");
  EXPECT_EQ(o.vocab_size, 50);
  EXPECT_EQ(o.workers, 3);
  EXPECT_TRUE(o.document_per_file);
  EXPECT_TRUE(o.append_eod);
  EXPECT_FALSE(o.overwrite);
  EXPECT_EQ(o.json_keys, std::vector<std::string>{"text"});
}

TEST(DatasetFlags, HelpIsAFlagHelpWithThePreprocessUsage) {
  try {
    megatron::Preprocessor p({"--help"});
    FAIL() << "--help did not throw";
  } catch (const megatron::FlagHelp& h) {
    const std::string usage = h.what();
    EXPECT_EQ(usage.rfind("tokenize text into a Megatron .bin/.idx dataset\n"
                          "Usage: preprocess [OPTIONS]\n", 0), 0u) << usage;
    EXPECT_NE(usage.find("--output-prefix"), std::string::npos);
  }
}

TEST(DatasetFlags, RefusedFlagsAreFlagErrorsNamingThem) {
  try {
    megatron::Preprocessor p({"--input", "a.txt", "--output-prefix", "o", "--append-eos"});
    FAIL() << "--append-eos did not throw";
  } catch (const megatron::FlagHelp& h) {
    FAIL() << "a FlagHelp: " << h.what();
  } catch (const megatron::FlagError& e) {
    EXPECT_EQ(std::string(e.what()),
              "unknown flag --append-eos; the nearest flag of `megatron preprocess` is "
              "--append-eod; see `megatron preprocess --help`");
  }
  try {
    megatron::Preprocessor p({"--input", "a.txt", "--output-prefix", "o", "--workers", "0"});
    FAIL() << "--workers 0 did not throw";
  } catch (const megatron::FlagHelp& h) {
    FAIL() << "a FlagHelp: " << h.what();
  } catch (const megatron::FlagError& e) {
    EXPECT_NE(std::string(e.what()).find("--workers"), std::string::npos) << e.what();
  }
}

}  // namespace dataset_test
