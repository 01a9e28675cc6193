// Internals of `megatron preprocess` shared by its two paths: the character
// tokenizer (preprocess.cc: two streaming passes, vocabulary built from the
// input) and every fixed-vocabulary tokenizer (preprocess_pipeline.cc:
// documents tokenized in parallel batches, written in input order).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "data/preprocess.h"
#include "data/tokenizer.h"

namespace mt {

// Splits a byte stream exactly as Python's text.split("\n\n"), dropping empty
// pieces; emits each document with the byte offset where it starts.
class ParagraphSplitter {
 public:
  explicit ParagraphSplitter(std::function<void(const std::string&, int64_t)> emit)
      : emit_(std::move(emit)) {}
  void feed(std::string_view bytes, int64_t offset) {
    for (size_t i = 0; i < bytes.size(); ++i) {
      const char c = bytes[i];
      if (pending_newline_) {
        pending_newline_ = false;
        if (c == '\n') {  // "\n\n": separator
          flush();
          doc_start_ = offset + int64_t(i) + 1;
          continue;
        }
        doc_ += '\n';
      }
      if (c == '\n') {
        pending_newline_ = true;
      } else {
        doc_ += c;
      }
    }
  }
  void finish() {
    if (pending_newline_) doc_ += '\n';
    pending_newline_ = false;
    flush();
  }

 private:
  void flush() {
    if (!doc_.empty()) emit_(doc_, doc_start_);
    doc_.clear();
  }
  std::function<void(const std::string&, int64_t)> emit_;
  std::string doc_;
  int64_t doc_start_ = 0;
  bool pending_newline_ = false;
};

// Unless `text` is valid UTF-8, throws naming `where` (file and line), the
// file's byte offset of the first bad byte (base_offset: where text starts)
// and the fix.
void check_input_utf8(std::string_view text, const std::string& where, int64_t base_offset);

// Writes <output_prefix>_tokenizer.json, tok.describe() (type, files and their
// SHA-256): what `train` checks its tokenizer files against. Returns its path.
std::string write_tokenizer_record(const std::string& output_prefix, const Tokenizer& tok);

// Preprocess with a ready tokenizer (anything but "char"): .jsonl lines or
// .txt paragraphs are tokenized on o.workers threads in batches of a few MB,
// and written in input order, so the output is byte-identical for any number
// of workers. The first bad document (in input order) is the error reported.
PreprocessStats preprocess_with_tokenizer(const PreprocessOptions& o, const Tokenizer& tok, bool jsonl);

}  // namespace mt
