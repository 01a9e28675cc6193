#include "data/gpt_dataset.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "core/checked_math.h"
#include "core/error.h"
#include "core/rng.h"

namespace mt {

namespace {

// Uniform integer in [0, n) from 64 Philox bits (bias < n / 2^64).
uint64_t draw_below(const RngStream& rng, uint64_t draw, uint64_t n) {
  const Philox4 r = rng.block(draw >> 1);
  const int o = int(draw & 1) * 2;
  const uint64_t u = (uint64_t(r.v[o + 1]) << 32) | r.v[o];
  return uint64_t((unsigned __int128)u * n >> 64);
}

// Fisher-Yates shuffle of v[0, n), driven by `rng` (draw t for position n-1-t).
template <typename T>
void shuffle(T* v, int64_t n, const RngStream& rng) {
  for (int64_t i = n - 1; i > 0; --i) {
    const int64_t j = int64_t(draw_below(rng, uint64_t(n - 1 - i), uint64_t(i + 1)));
    std::swap(v[i], v[j]);
  }
}

}  // namespace

std::array<double, 3> parse_and_normalize_split(std::string_view split) {
  // Megatron reads every run of [.0-9] as a weight and ignores the rest, so
  // "1,-1,0" trains as 1,1,0 and "abc" as no weights at all. Here the weights
  // are the words between commas (or blanks, / or :, which Megatron's reading
  // also separates, and quotes), and each must be a plain decimal number >= 0.
  const std::string whole(split);
  constexpr const char* kFix = "; fix: give up to 3 weights >= 0, e.g. --split 969,30,1";
  // Quote characters are read past too: Megatron's llama3 example passes
  // --split '99,1,0' with the quotes inside the value.
  auto is_separator = [](char c) {
    return c == ',' || c == ' ' || c == '\t' || c == '/' || c == ':' || c == '\'' || c == '"';
  };
  // An empty weight (",,", a leading or trailing comma) is a typo Megatron reads past.
  std::string commas;
  for (char c : split)
    if (c == ',' || !is_separator(c)) commas += c == ',' ? ',' : 'x';
  MT_CHECK(commas.empty() || (commas.find(",,") == std::string::npos &&
                              commas.front() != ',' && commas.back() != ','),
           "--split \"", whole, "\" has an empty weight (two commas in a row, or one at an end)",
           kFix);
  std::vector<double> w;
  size_t i = 0;
  while (i < split.size()) {
    if (is_separator(split[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < split.size() && !is_separator(split[j])) ++j;
    const std::string word(split.substr(i, j - i));
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(word.c_str(), &end);
    const bool number = end == word.c_str() + word.size() && errno == 0;
    MT_CHECK(!number || std::isfinite(v), "--split \"", whole, "\": weight \"", word,
             "\" is not finite", kFix);
    MT_CHECK(!number || v >= 0, "--split \"", whole, "\": weight ", word,
             " is negative (Megatron-LM would drop the minus sign and read ", -v, ")", kFix);
    MT_CHECK(number && word.find_first_not_of(".0123456789") == std::string::npos,
             "--split \"", whole, "\": \"", word, "\" is not a plain decimal number", kFix);
    w.push_back(v);
    i = j;
  }
  MT_CHECK(!w.empty(), "--split \"", whole, "\" holds no weights", kFix);
  MT_CHECK(w.size() <= 3, "--split \"", whole, "\" has ", w.size(),
           " weights but there are 3 splits (train, valid, test)", kFix);
  w.resize(3, 0.0);
  const double sum = w[0] + w[1] + w[2];
  MT_CHECK(sum > 0 && std::isfinite(sum), "--split \"", whole, "\" weights sum to ", sum,
           "; fix: give at least one positive weight, e.g. --split 969,30,1");
  return {w[0] / sum, w[1] / sum, w[2] / sum};
}

std::array<SplitRange, 3> split_ranges(std::string_view split, int64_t num_sequences) {
  const std::array<double, 3> w = parse_and_normalize_split(split);
  // Bookends summed left to right in double, as functools.reduce does.
  const double bookend[4] = {0.0, w[0], w[0] + w[1], w[0] + w[1] + w[2]};
  std::array<SplitRange, 3> out;
  for (int s = 0; s < 3; ++s) {
    if (!(bookend[s + 1] > bookend[s])) continue;  // Megatron: None
    out[s].present = true;
    // Python's round(): half to even, which nearbyint gives in the default mode.
    out[s].begin = int64_t(std::nearbyint(bookend[s] * double(num_sequences)));
    out[s].end = int64_t(std::nearbyint(bookend[s + 1] * double(num_sequences)));
  }
  return out;
}

GptDataset::GptDataset(const LowLevelDataset& data, SplitRange range, int64_t seq_length,
                       int64_t num_samples, uint64_t seed, std::string name)
    : data_(&data), range_(range), seq_length_(seq_length), num_samples_(num_samples),
      name_(std::move(name)) {
  const std::string what = "GPT dataset '" + name_ + "' over " + data.path_prefix();
  MT_CHECK(seq_length_ >= 1, what, ": sequence length ", seq_length_, " must be >= 1");
  MT_CHECK(range_.begin >= 0 && range_.end <= data.num_sequences() && range_.begin < range_.end,
           what, ": split range [", range_.begin, ", ", range_.end,
           ") is empty or outside the dataset's ", data.num_sequences(),
           " sequences; fix: change --split so this split gets documents, or add data");
  MT_CHECK(range_.end <= int64_t(std::numeric_limits<int32_t>::max()), what,
           ": more than 2^31 sequences are not supported");
  const UnalignedArray<int32_t> lengths = data.sequence_lengths();
  for (int64_t d = range_.begin; d < range_.end; ++d) tokens_per_epoch_ += lengths[d];
  MT_CHECK(tokens_per_epoch_ >= 2, what, ": the split holds only ", tokens_per_epoch_,
           " tokens; fix: give this split more documents (--split) or add data");

  // Epochs: enough tokens for num_samples samples of s + 1 tokens (overlapping by one).
  constexpr std::string_view flags =
      "samples x --seq-length (train: --train-iters x --global-batch-size; valid: --eval-iters "
      "x --global-batch-size)";
  const int64_t tokens_needed =
      num_samples_ > 0 ? checked_add(checked_mul(num_samples_, seq_length_, flags), 1, flags) : 0;
  num_epochs_ = tokens_needed > 0 ? (tokens_needed - 1) / tokens_per_epoch_ + 1 : 1;
  check_index_memory(what);
  int64_t samples_sans_final = 0;
  if (num_epochs_ > 1) {
    samples_sans_final = ((num_epochs_ - 1) * tokens_per_epoch_ - 1) / seq_length_;
    const int64_t from_final = num_samples_ - samples_sans_final;
    const int64_t per_epoch = (tokens_per_epoch_ - 1) / seq_length_;
    separate_final_epoch_ = from_final < int64_t(0.80 * double(per_epoch));
  }

  // Document index: the split's sequence ids per epoch, shuffled.
  const int64_t docs = range_.size();
  document_index_.resize(size_t(docs * num_epochs_));
  for (int64_t e = 0; e < num_epochs_; ++e)
    for (int64_t d = 0; d < docs; ++d) document_index_[size_t(e * docs + d)] = int32_t(range_.begin + d);
  const RngStream doc_rng = RngStream::make(seed, "gpt_dataset/" + name_ + "/document_index", 0);
  if (separate_final_epoch_) {
    const int64_t first = (num_epochs_ - 1) * docs;
    shuffle(document_index_.data(), first, doc_rng);
    const RngStream last_rng = RngStream::make(seed, "gpt_dataset/" + name_ + "/document_index", 1);
    shuffle(document_index_.data() + first, docs, last_rng);
  } else {
    shuffle(document_index_.data(), int64_t(document_index_.size()), doc_rng);
  }

  // Sample index: start of every sample (and of the one past the last).
  const int64_t samples = (num_epochs_ * tokens_per_epoch_ - 1) / seq_length_;
  sample_doc_.resize(size_t(samples + 1));
  sample_offset_.resize(size_t(samples + 1));
  int64_t pos = 0, doc_begin = 0;
  for (int64_t k = 0; k <= samples; ++k) {
    const int64_t p = k * seq_length_;
    while (doc_begin + lengths[document_index_[size_t(pos)]] <= p) {
      doc_begin += lengths[document_index_[size_t(pos)]];
      ++pos;
    }
    sample_doc_[size_t(k)] = pos;
    sample_offset_[size_t(k)] = int32_t(p - doc_begin);
  }

  // Shuffle index.
  shuffle_index_.resize(size_t(samples));
  for (int64_t k = 0; k < samples; ++k) shuffle_index_[size_t(k)] = k;
  const RngStream shuf_rng = RngStream::make(seed, "gpt_dataset/" + name_ + "/shuffle_index", 0);
  if (separate_final_epoch_) {
    shuffle(shuffle_index_.data(), samples_sans_final, shuf_rng);
    const RngStream last_rng = RngStream::make(seed, "gpt_dataset/" + name_ + "/shuffle_index", 1);
    shuffle(shuffle_index_.data() + samples_sans_final, samples - samples_sans_final, last_rng);
  } else {
    shuffle(shuffle_index_.data(), samples, shuf_rng);
  }
}

// The document, sample and shuffle indices (4 + 12 + 8 bytes per entry) must
// fit this machine: an absurd --train-iters fails here with the numbers, not
// in an allocation (std::bad_alloc) with none.
void GptDataset::check_index_memory(const std::string& what) const {
  constexpr std::string_view flags = "GPT dataset indices (--train-iters x --global-batch-size)";
  const int64_t docs = checked_mul(range_.size(), num_epochs_, flags);
  const int64_t samples = checked_mul(num_epochs_, tokens_per_epoch_, flags) / seq_length_;
  const int64_t bytes = checked_add(checked_mul(docs, 4, flags), checked_mul(samples, 20, flags),
                                    flags);
  const int64_t have = physical_memory_bytes();
  MT_CHECK(have == 0 || bytes <= have / 2, what, ": ", num_samples_, " samples of ", seq_length_,
           " tokens (", num_epochs_, " epochs of ", tokens_per_epoch_, " tokens) need ",
           double(bytes) / 1e9, " GB of sample index, more than half this machine's ",
           double(have) / 1e9, " GB; fix: lower --train-iters or --global-batch-size (or "
           "--eval-iters for validation)");
}

int64_t GptDataset::shuffled(int64_t i) const {
  MT_CHECK(i >= 0 && i < size(), "sample ", i, " out of range: GPT dataset '", name_, "' has ",
           size(), " samples; fix: request more samples (train_iters * global batch) when "
           "building it");
  return shuffle_index_[size_t(i)];
}

std::pair<int64_t, int64_t> GptDataset::sample_start(int64_t k) const {
  MT_CHECK(k >= 0 && k <= size(), "sample start ", k, " out of range [0, ", size(), "]");
  return {sample_doc_[size_t(k)], sample_offset_[size_t(k)]};
}

void GptDataset::read_sample(int64_t i, int64_t start, int64_t n, int32_t* out) const {
  MT_CHECK(start >= 0 && n >= 0 && start + n <= seq_length_ + 1, "read of tokens [", start, ", ",
           start + n, ") outside a sample of ", seq_length_ + 1, " tokens");
  const int64_t k = shuffled(i);
  int64_t pos = sample_doc_[size_t(k)];
  int64_t off = sample_offset_[size_t(k)] + start;
  const UnalignedArray<int32_t> lengths = data_->sequence_lengths();
  while (n > 0) {
    MT_DCHECK(pos < int64_t(document_index_.size()), "sample ", k, " runs past the document index");
    const int32_t seq = document_index_[size_t(pos)];
    const int64_t len = lengths[seq];
    if (off >= len) {
      off -= len;
      ++pos;
      continue;
    }
    const int64_t take = std::min(n, len - off);
    data_->read(seq, off, take, out);
    out += take;
    n -= take;
    off = 0;
    ++pos;
  }
}

std::string GptDataset::describe_sample(int64_t i) const {
  return "sample " + std::to_string(i) + " of GPT dataset '" + name_ + "' (" + data_->path_prefix() +
         ")";
}

void GptDataset::get(int64_t i, int32_t* tokens) const { read_sample(i, 0, seq_length_ + 1, tokens); }

int64_t micro_batch_first_sample(int64_t iteration_index, int64_t global_batch,
                                 int64_t micro_batch, int64_t dp_size, int64_t dp_rank, int64_t k) {
  MT_CHECK(micro_batch > 0 && dp_size > 0 && global_batch > 0 &&
               global_batch % (micro_batch * dp_size) == 0,
           "global batch ", global_batch, " is not divisible by micro-batch ", micro_batch,
           " x data-parallel size ", dp_size,
           "; fix: choose --global-batch-size as a multiple of micro-batch x DP");
  MT_CHECK(dp_rank >= 0 && dp_rank < dp_size, "dp_rank ", dp_rank, " outside [0, ", dp_size, ")");
  const int64_t num_micro = global_batch / (micro_batch * dp_size);
  MT_CHECK(k >= 0 && k < num_micro, "micro-batch ", k, " outside [0, ", num_micro, ")");
  MT_CHECK(iteration_index >= 0, "iteration index ", iteration_index, " is negative");
  return iteration_index * global_batch + k * micro_batch * dp_size + dp_rank * micro_batch;
}

void fill_micro_batch(const SampleDataset& dataset, int64_t first_sample_index, int64_t b,
                      int32_t* tokens, int32_t* labels, int64_t vocab_size) {
  const int64_t s = dataset.seq_length();
  for (int64_t r = 0; r < b; ++r) {
    const int64_t i = first_sample_index + r;
    dataset.read_sample(i, 0, s, tokens + r * s);
    dataset.read_sample(i, 1, s, labels + r * s);
    if (vocab_size > 0) {
      // Cheap scan; the message (and its string) only on failure.
      bool ok = true;
      for (int64_t j = 0; j < s; ++j) ok &= tokens[r * s + j] >= 0 && tokens[r * s + j] < vocab_size;
      ok &= labels[r * s + s - 1] >= 0 && labels[r * s + s - 1] < vocab_size;
      if (!ok) {
        const std::string where = dataset.describe_sample(i);
        check_token_span(tokens + r * s, s, vocab_size, where);
        check_token_span(labels + r * s, s, vocab_size, where);
      }
    }
  }
}

void MicroBatch::fill(const SampleDataset& dataset, int64_t first_sample_index, int64_t vocab_size) {
  MT_CHECK(dataset.seq_length() == s, "micro-batch buffers are for sequence length ", s,
           " but the dataset has ", dataset.seq_length());
  fill_micro_batch(dataset, first_sample_index, b, tokens.data(), labels.data(), vocab_size);
}

}  // namespace mt
