#include "data/preprocess_pipeline.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "data/indexed_dataset.h"
#include "data/utf8.h"

namespace mt {

namespace {

constexpr size_t kReadBytes = size_t(1) << 20;
constexpr size_t kBatchBytes = size_t(4) << 20;  // input bytes tokenized per parallel batch

struct Doc {
  std::string text;     // .jsonl: the raw line; .txt: the document
  int64_t line_no = 0;  // .jsonl only
  int64_t offset = 0;   // byte offset of text in the input file
};

// Ids of one document, all keys back to back; one entry per sequence.
struct Encoded {
  std::vector<int32_t> ids;
  std::vector<int32_t> seq_lens;
  std::vector<int32_t> seqs_per_key;
  std::string error;
  void clear() {
    ids.clear();
    seq_lens.clear();
    seqs_per_key.clear();
    error.clear();
  }
};

class DocumentEncoder {
 public:
  DocumentEncoder(const PreprocessOptions& o, const Tokenizer& tok, bool jsonl)
      : o_(o), tok_(tok), jsonl_(jsonl), keys_(jsonl ? o.json_keys : std::vector<std::string>{"text"}) {}
  const std::vector<std::string>& keys() const { return keys_; }

  // Never throws: a problem becomes e.error, reported by the caller in input order.
  void encode(const Doc& d, Encoded& e) const {
    e.clear();
    try {
      encode_or_throw(d, e);
    } catch (const std::exception& ex) {
      e.error = ex.what();
    }
  }

 private:
  std::string where(const Doc& d) const {
    return jsonl_ ? o_.input + " line " + std::to_string(d.line_no)
                  : o_.input + " document at byte offset " + std::to_string(d.offset);
  }

  void encode_or_throw(const Doc& d, Encoded& e) const {
    check_input_utf8(d.text, where(d), d.offset);
    if (!jsonl_) {
      add_sentences(d, std::vector<std::string_view>{d.text}, e);
      return;
    }
    nlohmann::json obj;
    try {
      obj = nlohmann::json::parse(d.text);
    } catch (const nlohmann::json::exception& ex) {
      MT_FAIL(where(d), " is not valid JSON (", ex.what(), "); fix: write one JSON object per line");
    }
    MT_CHECK(obj.is_object(), where(d), " is a JSON ", obj.type_name(),
             ", not an object; fix: write one JSON object per line, e.g. {\"text\": \"...\"}");
    std::vector<std::string_view> sentences;
    for (const std::string& key : keys_) {
      auto it = obj.find(key);
      MT_CHECK(it != obj.end(), where(d), " has no field \"", key,
               "\"; fix: pass --json-keys with the field(s) that hold the text");
      sentences.clear();
      if (it->is_string()) {
        sentences.push_back(it->get_ref<const std::string&>());
      } else if (it->is_array()) {  // Megatron: a list of sentences
        for (const auto& s : *it) {
          MT_CHECK(s.is_string(), where(d), " field \"", key, "\" is a list holding a ", s.type_name(),
                   "; fix: texts must be strings (or lists of strings)");
          sentences.push_back(s.get_ref<const std::string&>());
        }
      } else {
        MT_FAIL(where(d), " field \"", key, "\" is a ", it->type_name(),
                ", not a string; fix: texts must be strings (or lists of strings)");
      }
      add_sentences(d, sentences, e);
    }
  }

  // Megatron's Encoder.encode for one key: one sequence per non-empty
  // sentence, eod after the last one with --append-eod.
  void add_sentences(const Doc& d, const std::vector<std::string_view>& sentences, Encoded& e) const {
    int32_t seqs = 0;
    for (std::string_view s : sentences) {
      const size_t before = e.ids.size();
      try {
        tok_.tokenize_append(s, e.ids);
      } catch (const Error& ex) {
        MT_FAIL(where(d), ": ", ex.what());
      }
      if (e.ids.size() > before) {
        e.seq_lens.push_back(int32_t(e.ids.size() - before));
        ++seqs;
      }
    }
    if (o_.append_eod && seqs > 0) {
      e.ids.push_back(tok_.eod());
      ++e.seq_lens.back();
    }
    e.seqs_per_key.push_back(seqs);
  }

  const PreprocessOptions& o_;
  const Tokenizer& tok_;
  bool jsonl_;
  std::vector<std::string> keys_;
};

// "preprocess: 120.0/500.0 MB (24%), 45.1 MB/s, ETA 8 s" on stderr.
class Progress {
 public:
  Progress(bool enabled, int64_t total) : enabled_(enabled), tty_(isatty(2) != 0), total_(total) {}
  void update(int64_t done) {
    if (!enabled_) return;
    const double t = timer_.seconds();
    if (t < 2.0 || t - last_ < (tty_ ? 0.5 : 30.0)) return;
    last_ = t;
    const double mb = double(done) / 1e6, rate = mb / t;
    const double eta = rate > 0 ? (double(total_) / 1e6 - mb) / rate : 0.0;
    std::fprintf(stderr, "%spreprocess: %.1f/%.1f MB (%.0f%%), %.1f MB/s, ETA %.0f s%s",
                 tty_ ? "\r" : "", mb, double(total_) / 1e6,
                 total_ > 0 ? 100.0 * double(done) / double(total_) : 100.0, rate, eta,
                 tty_ ? "   " : "\n");
    std::fflush(stderr);
    printed_ = true;
  }
  void finish() {
    if (printed_ && tty_) std::fputc('\n', stderr);
  }

 private:
  bool enabled_, tty_;
  int64_t total_;
  Timer timer_;
  double last_ = 0.0;
  bool printed_ = false;
};

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

void write_text_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  MT_CHECK(f != nullptr, "cannot create ", tmp, ": ", std::strerror(errno),
           "; fix: check that the output directory exists and is writable");
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  MT_CHECK(std::fclose(f) == 0 && ok, "write of ", tmp, " failed; fix: check free disk space");
  MT_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "rename ", tmp, " -> ", path, " failed: ",
           std::strerror(errno));
}

}  // namespace

void check_input_utf8(std::string_view text, const std::string& where, int64_t base_offset) {
  const size_t bad = utf8_first_invalid(text);
  if (bad == text.size()) return;
  char hex[8];
  std::snprintf(hex, sizeof hex, "0x%02X", unsigned((unsigned char)text[bad]));
  MT_FAIL(where, ": invalid UTF-8 at byte offset ", base_offset + int64_t(bad), " (byte ", hex,
          "); Megatron's preprocess reads strict UTF-8 too; fix: convert the input to UTF-8 "
          "(e.g. iconv -f latin1 -t utf-8)");
}

std::string write_tokenizer_record(const std::string& output_prefix, const Tokenizer& tok) {
  const std::string path = output_prefix + "_tokenizer.json";
  write_text_atomically(path, tok.describe().dump(2) + "\n");
  return path;
}

PreprocessStats preprocess_with_tokenizer(const PreprocessOptions& o, const Tokenizer& tok, bool jsonl) {
  MT_CHECK(o.workers >= 1 && o.workers <= 1024, "--workers ", o.workers, " must be in [1, 1024]");
  MT_CHECK(!o.append_eod || tok.eod() >= 0, "--append-eod: tokenizer ", tok.type(),
           " has no end-of-document token");
  std::unique_ptr<std::FILE, FileCloser> in(std::fopen(o.input.c_str(), "rb"));
  MT_CHECK(in != nullptr, "cannot open input ", o.input, ": ", std::strerror(errno),
           "; fix: check the --input path");
  std::error_code ec;
  const auto total = int64_t(std::filesystem::file_size(o.input, ec));

  const DocumentEncoder encoder(o, tok, jsonl);
  const std::vector<std::string>& keys = encoder.keys();
  PreprocessStats stats;
  stats.vocab_size = tok.vocab_size();
  stats.eod = o.append_eod ? tok.eod() : -1;
  const TokenDType dtype = optimal_token_dtype(tok.vocab_size());
  std::vector<std::unique_ptr<IndexedDatasetWriter>> writers;
  for (const std::string& key : keys) {
    stats.dataset_prefixes.push_back(o.output_prefix + "_" + key + "_document");
    writers.push_back(std::make_unique<IndexedDatasetWriter>(stats.dataset_prefixes.back(), dtype));
  }

  Progress progress(o.progress, total);
  std::vector<Doc> batch;
  std::vector<Encoded> encoded;
  size_t batch_bytes = 0;
  int64_t done_bytes = 0;
  auto flush = [&]() {
    if (encoded.size() < batch.size()) encoded.resize(batch.size());
    const int64_t n = int64_t(batch.size());
#pragma omp parallel for num_threads(o.workers) schedule(dynamic, 4) if (o.workers > 1)
    for (int64_t i = 0; i < n; ++i) encoder.encode(batch[size_t(i)], encoded[size_t(i)]);
    for (size_t i = 0; i < batch.size(); ++i) {  // in input order: the output never depends on N
      const Encoded& e = encoded[i];
      if (!e.error.empty()) throw Error(e.error);
      size_t seq = 0, pos = 0;
      for (size_t k = 0; k < keys.size(); ++k) {
        for (int32_t s = 0; s < e.seqs_per_key[k]; ++s, ++seq) {
          const auto len = size_t(e.seq_lens[seq]);
          writers[k]->append(std::span<const int32_t>(e.ids.data() + pos, len));
          writers[k]->end_sequence();
          pos += len;
        }
        writers[k]->end_document();
      }
    }
    done_bytes += int64_t(batch_bytes);
    batch.clear();
    batch_bytes = 0;
    progress.update(done_bytes);
  };
  auto add = [&](Doc&& d) {
    batch_bytes += d.text.size() + 1;
    batch.push_back(std::move(d));
    if (batch_bytes >= kBatchBytes) flush();
  };

  std::string buf(kReadBytes, '\0');
  auto read_chunk = [&]() -> std::string_view {
    const size_t got = std::fread(buf.data(), 1, buf.size(), in.get());
    MT_CHECK(got == buf.size() || !std::ferror(in.get()), "read of ", o.input, " failed: ",
             std::strerror(errno));
    return std::string_view(buf.data(), got);
  };
  int64_t offset = 0;
  if (jsonl) {
    std::string line;
    int64_t line_no = 0, line_start = 0;
    auto end_line = [&]() {
      ++line_no;
      if (line.find_first_not_of(" \t\r") != std::string::npos)
        add(Doc{std::move(line), line_no, line_start});
      line = std::string();
    };
    for (std::string_view chunk; !(chunk = read_chunk()).empty(); offset += int64_t(chunk.size())) {
      size_t p = 0;
      for (size_t nl; (nl = chunk.find('\n', p)) != std::string_view::npos; p = nl + 1) {
        line.append(chunk.substr(p, nl - p));
        end_line();
        line_start = offset + int64_t(nl) + 1;
      }
      line.append(chunk.substr(p));
    }
    if (!line.empty()) end_line();
  } else if (o.whole_file_as_document) {
    Doc d;
    for (std::string_view chunk; !(chunk = read_chunk()).empty();) d.text.append(chunk);
    offset = int64_t(d.text.size());
    if (!d.text.empty()) add(std::move(d));
  } else {
    ParagraphSplitter splitter([&](const std::string& text, int64_t at) { add(Doc{text, 0, at}); });
    for (std::string_view chunk; !(chunk = read_chunk()).empty(); offset += int64_t(chunk.size()))
      splitter.feed(chunk, offset);
    splitter.finish();
  }
  flush();
  progress.finish();
  stats.input_bytes = offset;

  for (auto& w : writers) {
    w->finalize();
    stats.documents += w->num_documents();
    stats.sequences += w->num_sequences();
    stats.tokens += w->num_tokens();
  }
  stats.tokenizer_path = write_tokenizer_record(o.output_prefix, tok);
  return stats;
}

}  // namespace mt
