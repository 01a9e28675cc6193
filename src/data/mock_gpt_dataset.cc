#include "data/mock_gpt_dataset.h"

#include <span>

#include "core/error.h"
#include "data/numpy_random.h"

namespace mt {

MockGptLowLevelDataset::MockGptLowLevelDataset(int64_t vocab_size, int64_t eod)
    : vocab_size_(vocab_size), eod_(int32_t(eod)), name_("--mock-data") {
  MT_CHECK(vocab_size > 0, "--mock-data: the tokenizer's vocabulary has ", vocab_size,
           " entries; fix: --tokenizer-type NullTokenizer --vocab-size N (N > 0)");
  MT_CHECK(eod >= 0 && eod < vocab_size, "--mock-data ends every document with the tokenizer's "
           "end-of-document id, but it is ", eod, " (vocabulary of ", vocab_size, "); fix: a "
           "tokenizer with an eod, e.g. --tokenizer-type NullTokenizer --vocab-size N (eod N)");
  lengths_.resize(size_t(kMockDocuments));
  NumpyPcg64 rng(kMockSeed);
  numpy_integers_int32(rng, 1, kMockMaxSequenceLength, lengths_);
}

void MockGptLowLevelDataset::read(int64_t i, int64_t offset, int64_t n, int32_t* out) const {
  MT_CHECK(i >= 0 && i < num_sequences(), "mock document ", i, " outside [0, ", num_sequences(),
           ")");
  const int64_t len = lengths_[size_t(i)];
  MT_CHECK(offset >= 0 && n >= 0 && offset + n <= len, "read of tokens [", offset, ", ",
           offset + n, ") outside mock document ", i, " of ", len, " tokens");
  for (int64_t j = offset; j < offset + n; ++j)
    *out++ = j < len - 1 ? int32_t((j + 1) % vocab_size_) : eod_;
}

}  // namespace mt
