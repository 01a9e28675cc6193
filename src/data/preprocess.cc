#include "data/preprocess.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>

#include "core/error.h"
#include "data/char_tokenizer.h"
#include "data/indexed_dataset.h"
#include "data/preprocess_pipeline.h"

namespace mt {

namespace {

constexpr size_t kChunkBytes = size_t(1) << 20;

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

File open_input(const std::string& path) {
  File f(std::fopen(path.c_str(), "rb"));
  MT_CHECK(f != nullptr, "cannot open input ", path, ": ", std::strerror(errno),
           "; fix: check the --input path");
  return f;
}

// Calls on_chunk(bytes, byte_offset) for consecutive chunks of the file, each
// ending on a UTF-8 character boundary (except possibly the last, so that a
// truncated final character is reported by the decoder). Returns file size.
int64_t for_each_chunk(const std::string& path,
                       const std::function<void(std::string_view, int64_t)>& on_chunk) {
  File f = open_input(path);
  std::string buf(kChunkBytes, '\0');
  std::string carry;
  int64_t offset = 0;
  for (;;) {
    const size_t got = std::fread(buf.data(), 1, buf.size(), f.get());
    MT_CHECK(got == buf.size() || !std::ferror(f.get()), "read of ", path, " failed: ",
             std::strerror(errno));
    if (got == 0) break;
    std::string data = carry;
    data.append(buf.data(), got);
    const size_t keep = utf8_complete_prefix(data);
    carry = data.substr(keep);
    if (keep) on_chunk(std::string_view(data).substr(0, keep), offset);
    offset += int64_t(keep);
  }
  if (!carry.empty()) on_chunk(carry, offset);
  return offset + int64_t(carry.size());
}

// Calls on_object(object, line_number) for every non-blank line of a .jsonl.
int64_t for_each_json_line(const std::string& path,
                           const std::function<void(const nlohmann::json&, int64_t)>& on_object) {
  std::ifstream in(path, std::ios::binary);
  MT_CHECK(in.good(), "cannot open input ", path, ": ", std::strerror(errno),
           "; fix: check the --input path");
  std::string line;
  int64_t line_no = 0, bytes = 0;
  while (std::getline(in, line)) {
    ++line_no;
    const int64_t line_start = bytes;
    bytes += int64_t(line.size()) + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    // Before the JSON parser, whose complaint would not say what is wrong.
    check_input_utf8(line, path + " line " + std::to_string(line_no), line_start);
    nlohmann::json obj;
    try {
      obj = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      MT_FAIL(path, " line ", line_no, " is not valid JSON (", e.what(),
              "); fix: write one JSON object per line");
    }
    MT_CHECK(obj.is_object(), path, " line ", line_no, " is not a JSON object",
             "; fix: write one JSON object per line, e.g. {\"text\": \"...\"}");
    on_object(obj, line_no);
  }
  return bytes;
}

const std::string& json_text(const nlohmann::json& obj, const std::string& key,
                             const std::string& path, int64_t line_no) {
  auto it = obj.find(key);
  MT_CHECK(it != obj.end() && it->is_string(), path, " line ", line_no, " has no string field \"",
           key, "\"; fix: pass --json-keys with the field that holds the text");
  return it->get_ref<const std::string&>();
}

// First pass: the set of code points of the input.
CharTokenizer build_vocab(const PreprocessOptions& o, bool jsonl) {
  std::vector<bool> seen(0x110000, false);
  std::vector<char32_t> cps;
  auto mark = [&](std::string_view text, int64_t offset, std::string_view source) {
    cps.clear();
    utf8_decode(text, cps, offset, source);
    for (char32_t cp : cps) seen[cp] = true;
  };
  if (jsonl) {
    for_each_json_line(o.input, [&](const nlohmann::json& obj, int64_t line_no) {
      const std::string where = o.input + " line " + std::to_string(line_no);
      for (const std::string& key : o.json_keys) mark(json_text(obj, key, o.input, line_no), 0, where);
    });
  } else {
    for_each_chunk(o.input, [&](std::string_view chunk, int64_t offset) { mark(chunk, offset, o.input); });
  }
  std::vector<char32_t> distinct;
  for (char32_t cp = 0; cp < 0x110000; ++cp)
    if (seen[cp]) distinct.push_back(cp);
  return CharTokenizer::from_code_points(std::move(distinct), o.append_eod);
}

// Whether the input is JSON lines (by --format, else by extension).
bool input_is_jsonl(const PreprocessOptions& o) {
  if (o.format.empty()) return ends_with(o.input, ".jsonl") || ends_with(o.input, ".json");
  MT_CHECK(o.format == "txt" || o.format == "jsonl", "unknown input format \"", o.format,
           "\"; fix: use txt or jsonl");
  return o.format == "jsonl";
}

// An existing dataset of the same prefix is replaced only when asked: a
// typo'd --output-prefix must not silently swap the data a run trains on.
void check_no_dataset_replaced(const PreprocessOptions& o, const std::vector<std::string>& outs) {
  if (o.overwrite) return;
  std::error_code ec;
  std::string existing;
  for (const std::string& f : outs)
    if (std::filesystem::exists(f, ec)) existing += (existing.empty() ? "" : ", ") + f;
  MT_CHECK(existing.empty(), "--output-prefix ", o.output_prefix, ": ", existing,
           existing.find(", ") == std::string::npos ? " already exists" : " already exist",
           "; preprocess would replace that dataset; fix: pass --overwrite to replace it (the "
           "new files are renamed in when complete, and a run reading the old ones keeps their "
           "data), or give another --output-prefix");
}

}  // namespace

std::vector<std::string> preprocess_outputs(const PreprocessOptions& o) {
  const bool jsonl = input_is_jsonl(o);
  std::vector<std::string> out;
  for (const std::string& key : jsonl ? o.json_keys : std::vector<std::string>{"text"}) {
    out.push_back(o.output_prefix + "_" + key + "_document.bin");
    out.push_back(o.output_prefix + "_" + key + "_document.idx");
  }
  if (o.tokenizer_type == "char") out.push_back(o.output_prefix + "_vocab.json");
  out.push_back(o.output_prefix + "_tokenizer.json");
  return out;
}

PreprocessStats preprocess(const PreprocessOptions& o) {
  MT_CHECK(!o.input.empty() && !o.output_prefix.empty(),
           "preprocess needs an input file and an output prefix; fix: pass --input and "
           "--output-prefix");
  const bool jsonl = input_is_jsonl(o);
  check_no_dataset_replaced(o, preprocess_outputs(o));
  MT_CHECK(!jsonl || !o.whole_file_as_document,
           "whole_file_as_document applies to .txt input only; fix: drop the option for .jsonl");
  MT_CHECK(!jsonl || !o.json_keys.empty(), "no --json-keys given for ", o.input,
           "; fix: pass the field(s) that hold the text, e.g. --json-keys text");

  if (o.tokenizer_type != "char") {
    MT_CHECK(!o.whole_file_as_document || !jsonl, "whole_file_as_document applies to .txt only");
    TokenizerOptions to;
    to.type = o.tokenizer_type;
    to.vocab_file = o.vocab;
    to.merge_file = o.merge_file;
    to.tokenizer_model = o.tokenizer_model;
    to.vocab_size = o.null_vocab_size;
    const std::unique_ptr<Tokenizer> tok = make_tokenizer(to);
    return preprocess_with_tokenizer(o, *tok, jsonl);
  }

  PreprocessStats stats;
  CharTokenizer tok;
  if (o.vocab.empty()) {
    tok = build_vocab(o, jsonl);
  } else {
    tok = CharTokenizer::load(o.vocab);
    MT_CHECK(!o.append_eod || tok.eod() >= 0, "--append-eod needs an eod token but ", o.vocab,
             " has no \"<|endoftext|>\" entry; fix: rebuild that vocabulary with --append-eod");
  }
  stats.vocab_size = tok.vocab_size();
  stats.eod = o.append_eod ? tok.eod() : -1;
  const TokenDType dtype = optimal_token_dtype(tok.vocab_size());

  const std::vector<std::string> keys = jsonl ? o.json_keys : std::vector<std::string>{"text"};
  std::vector<std::unique_ptr<IndexedDatasetWriter>> writers;
  for (const std::string& key : keys) {
    stats.dataset_prefixes.push_back(o.output_prefix + "_" + key + "_document");
    writers.push_back(std::make_unique<IndexedDatasetWriter>(stats.dataset_prefixes.back(), dtype));
  }

  std::vector<int32_t> ids;
  const int32_t eod = tok.eod();
  auto end_doc = [&](IndexedDatasetWriter& w) {
    if (o.append_eod && !ids.empty()) ids.push_back(eod);
    if (ids.empty()) {
      w.end_document();  // a document with no sequence
    } else {
      w.add_document(ids);
    }
  };

  if (jsonl) {
    stats.input_bytes = for_each_json_line(o.input, [&](const nlohmann::json& obj, int64_t line_no) {
      for (size_t k = 0; k < keys.size(); ++k) {
        ids.clear();
        try {
          tok.tokenize_append(json_text(obj, keys[k], o.input, line_no), ids);
        } catch (const Error& e) {
          MT_FAIL(o.input, " line ", line_no, " key \"", keys[k], "\": ", e.what());
        }
        end_doc(*writers[k]);
      }
    });
  } else if (o.whole_file_as_document) {
    IndexedDatasetWriter& w = *writers[0];
    stats.input_bytes = for_each_chunk(o.input, [&](std::string_view chunk, int64_t offset) {
      ids.clear();
      tok.tokenize_append(chunk, ids, offset);
      w.append(ids);
    });
    if (w.num_tokens() > 0) {
      ids.clear();
      if (o.append_eod) ids.push_back(eod);
      w.append(ids);
      w.end_document();
    }
  } else {
    ParagraphSplitter splitter([&](const std::string& doc, int64_t offset) {
      ids.clear();
      tok.tokenize_append(doc, ids, offset);
      end_doc(*writers[0]);
    });
    stats.input_bytes = for_each_chunk(o.input, [&](std::string_view chunk, int64_t offset) {
      splitter.feed(chunk, offset);
    });
    splitter.finish();
  }

  // The vocabulary last: a failed run leaves neither dataset nor vocabulary.
  for (auto& w : writers) {
    w->finalize();
    stats.documents += w->num_documents();
    stats.sequences += w->num_sequences();
    stats.tokens += w->num_tokens();
  }
  stats.vocab_path = o.output_prefix + "_vocab.json";
  tok.save(stats.vocab_path);
  // Its checksum beside it, as for the other tokenizers: train refuses the
  // dataset with a vocabulary edited since (checkpoint/checkpoint_tokenizer.h).
  TokenizerOptions written;
  written.vocab_file = stats.vocab_path;
  stats.tokenizer_path = write_tokenizer_record(o.output_prefix, *make_tokenizer(written));
  return stats;
}

}  // namespace mt
