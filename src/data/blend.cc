#include "data/blend.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>

#include "core/error.h"

namespace mt {

namespace {

// The word as a number, if all of it is one (Python's float() accepts the same
// decimal and exponent forms, plus inf/nan, which are refused later). A word
// out of double's range is still a number: 1e-320 (below the smallest normal
// double) and 1e400 (inf) are weights, refused for their value, not read as
// dataset names.
bool parse_number(const std::string& word, double* out) {
  if (word.empty()) return false;
  char* end = nullptr;
  const double v = std::strtod(word.c_str(), &end);
  if (end != word.c_str() + word.size()) return false;
  *out = v;
  return true;
}

constexpr const char* kForm =
    "give weights and prefixes alternating (e.g. 0.3 data/a_text_document 0.7 "
    "data/b_text_document) or prefixes alone";

}  // namespace

Blend parse_blend(const std::vector<std::string>& words, const std::string& flag) {
  MT_CHECK(!words.empty(), flag, " has no dataset; fix: ", kForm);
  Blend b;
  double w = 0;
  if (words.size() % 2 == 0 && words.size() >= 2) {
    int numbers = 0;
    for (size_t i = 0; i < words.size(); i += 2) numbers += parse_number(words[i], &w) ? 1 : 0;
    const int pairs = int(words.size() / 2);
    MT_CHECK(numbers == 0 || numbers == pairs, flag, " mixes weights and prefixes: ", numbers,
             " of its ", pairs, " odd-numbered words are numbers; fix: ", kForm);
    if (numbers == pairs) {
      for (size_t i = 0; i < words.size(); i += 2) {
        parse_number(words[i], &w);
        MT_CHECK(std::isfinite(w) && w > 0, flag, " weight '", words[i], "' (for ", words[i + 1],
                 ") must be a finite number > 0; fix: drop that dataset or give it a positive "
                 "weight");
        MT_CHECK(w >= std::numeric_limits<double>::min(), flag, " weight '", words[i], "' (for ",
                 words[i + 1], ") is too small: below ", std::numeric_limits<double>::min(),
                 ", the smallest normal double; fix: scale all the weights up by the same "
                 "factor (only their ratios matter), or drop that dataset");
        b.weights.push_back(w);
        b.prefixes.push_back(words[i + 1]);
      }
      double sum = 0;
      for (double x : b.weights) sum += x;
      MT_CHECK(std::isfinite(sum), flag, " weights sum to ", sum, " (too large for a double); "
               "fix: scale all the weights down by the same factor (only their ratios matter), "
               "e.g. 0.3 and 0.7");
    }
  }
  if (!b.weighted()) {
    for (const std::string& word : words) {
      // Megatron would read "0.3" as a dataset prefix; say what was meant.
      MT_CHECK(!parse_number(word, &w) || std::filesystem::exists(word + ".idx"), flag,
               " word '", word, "' is a number but there is no dataset ", word, ".idx and the ",
               words.size(), " words do not pair up as weights and prefixes; fix: ", kForm);
      b.prefixes.push_back(word);
    }
  }
  MT_CHECK(int64_t(b.prefixes.size()) <= kMaxBlendDatasets, flag, " names ", b.prefixes.size(),
           " datasets; at most ", kMaxBlendDatasets, " can be blended");
  return b;
}

std::vector<double> normalize_weights(const std::vector<double>& weights) {
  double sum = 0;
  for (double w : weights) sum += w;
  MT_CHECK(sum > 0 && std::isfinite(sum), "blend weights sum to ", sum,
           "; fix: give finite weights > 0 whose sum fits a double (only their ratios matter)");
  std::vector<double> out;
  for (double w : weights) out.push_back(w / sum);
  return out;
}

std::vector<int64_t> samples_per_dataset(const std::vector<double>& normalized, int64_t target,
                                         double surplus) {
  std::vector<int64_t> out;
  for (double w : normalized) {
    const double n = std::ceil(std::ceil(double(target) * w) * (1.0 + surplus));
    MT_CHECK(n < 9.0e18, "a blend asks ", n, " samples of one dataset; fix: fewer --train-iters");
    out.push_back(int64_t(n));
  }
  return out;
}

void build_blending_indices(const std::vector<double>& normalized, int64_t size,
                            std::vector<int16_t>* dataset_index,
                            std::vector<int64_t>* dataset_sample_index) {
  const size_t n = normalized.size();
  MT_CHECK(n > 0 && int64_t(n) <= kMaxBlendDatasets && size >= 0, "blend of ", n,
           " datasets and ", size, " samples (internal error)");
  dataset_index->assign(size_t(size), 0);
  dataset_sample_index->assign(size_t(size), 0);
  std::vector<int64_t> drawn(n, 0);
  for (int64_t k = 0; k < size; ++k) {
    const double at = std::max(double(k), 1.0);
    size_t best = 0;
    double best_error = normalized[0] * at - double(drawn[0]);
    for (size_t i = 1; i < n; ++i) {
      const double error = normalized[i] * at - double(drawn[i]);
      if (error > best_error) {
        best_error = error;
        best = i;
      }
    }
    (*dataset_index)[size_t(k)] = int16_t(best);
    (*dataset_sample_index)[size_t(k)] = drawn[best]++;
  }
}

}  // namespace mt
