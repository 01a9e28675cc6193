// libFuzzer target: Megatron's indexed dataset reader (data/indexed_dataset.h).
// Input layout: uint32 little-endian n, then n bytes of .idx, then the .bin
// (n is clamped to what is there, so every input is a valid split).
// Contract: a bad pair of files throws mt::Error; an accepted one answers
// consistently (pointers, lengths and token count agree with the .bin size),
// and reading every token either works or throws mt::Error. Anything else —
// crash, sanitizer report, other exception, hang — is a bug.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/indexed_dataset.h"
#include "fuzz_util.h"

using mt::fuzz::wrong_answer;

namespace {

void check_accepted(const mt::IndexedDataset& ds, int64_t bin_size) {
  const int64_t es = mt::dtype_size(ds.dtype());
  if (ds.num_tokens() * es != bin_size) wrong_answer("token count disagrees with .bin size");
  if (ds.num_documents() < 0) wrong_answer("negative document count");
  const auto docs = ds.document_indices();
  for (int64_t d = 0; d < docs.size(); ++d)
    if (docs[d] < 0 || docs[d] > ds.num_sequences()) wrong_answer("document index out of range");
  int64_t total = 0;
  std::vector<int32_t> buf;
  for (int64_t i = 0; i < ds.num_sequences(); ++i) {
    const int64_t len = ds.sequence_length(i);
    if (len < 0 || ds.sequence_pointer(i) != total * es) wrong_answer("bad sequence geometry");
    total += len;
    if (total * es > bin_size) wrong_answer("sequence runs past the .bin");
    buf.resize(size_t(len));
    try {
      ds.read(i, 0, len, buf.data());
      if (len > 1) ds.read(i, len / 2, len - len / 2, buf.data());
    } catch (const mt::Error&) {  // e.g. a float that is not a token id
    }
  }
  try {
    ds.validate_token_range(50257);
  } catch (const mt::Error&) {
  }
  // Out-of-range requests must be refused, not read.
  for (int64_t i : {int64_t(-1), ds.num_sequences()}) {
    try {
      ds.sequence_length(i);
      wrong_answer("sequence_length accepted an out-of-range index");
    } catch (const mt::Error&) {
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string prefix = mt::fuzz::temp_path("ds");
  uint32_t n = 0;
  if (size >= 4) {
    std::memcpy(&n, data, 4);
    data += 4;
    size -= 4;
  }
  const size_t idx_size = std::min<size_t>(n, size);
  mt::fuzz::write_file(prefix + ".idx", data, idx_size);
  mt::fuzz::write_file(prefix + ".bin", data + idx_size, size - idx_size);
  try {
    mt::IndexedDataset ds(prefix);
    check_accepted(ds, int64_t(size - idx_size));
  } catch (const mt::Error&) {  // a refused file: the expected outcome
  }
  return 0;
}
