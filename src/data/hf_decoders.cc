#include "data/hf_decoders.h"

#include "core/error.h"
#include "data/hf_text.h"
#include "data/utf8.h"

namespace mt {

namespace {

std::string replace_all(const std::string& text, const std::string& from, const std::string& to) {
  if (from.empty()) return text;
  std::string out;
  size_t at = 0;
  for (size_t hit; (hit = text.find(from, at)) != std::string::npos; at = hit + from.size()) {
    out.append(text, at, hit - at);
    out += to;
  }
  out.append(text, at, std::string::npos);
  return out;
}

// "<0xXX>" -> the byte, else -1.
int byte_token(const std::string& t) {
  if (t.size() != 6 || t[0] != '<' || t[1] != '0' || t[2] != 'x' || t[5] != '>') return -1;
  auto hex = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1; };
  const int hi = hex(t[3]), lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

}  // namespace

HfDecoder hf_decoder_from_json(const nlohmann::json& j, const std::string& where) {
  MT_CHECK(j.is_object() && j.contains("type"), where, ": a decoder without a \"type\"; the file is damaged");
  const std::string type = j.at("type").get<std::string>();
  using K = HfDecoder::Kind;
  HfDecoder d;
  if (type == "ByteLevel") {
    d.kind = K::kByteLevel;
  } else if (type == "Metaspace") {
    d.kind = K::kMetaspace;
    d.replacement = j.value("replacement", std::string("\xE2\x96\x81"));
    if (j.contains("prepend_scheme") && j.at("prepend_scheme").is_string())
      d.prepend = j.at("prepend_scheme").get<std::string>() != "never";
    else
      d.prepend = j.value("add_prefix_space", true);
  } else if (type == "ByteFallback") {
    d.kind = K::kByteFallback;
  } else if (type == "Fuse") {
    d.kind = K::kFuse;
  } else if (type == "Strip") {
    d.kind = K::kStrip;
    d.content = j.at("content").get<std::string>();
    d.strip_start = j.value("start", size_t(0));
    d.strip_stop = j.value("stop", size_t(0));
  } else if (type == "Replace") {
    d.kind = K::kReplace;
    const nlohmann::json& p = j.at("pattern");
    MT_CHECK(p.contains("String"), where,
             ": a Replace decoder with a Regex pattern is not supported "
             "(src/data/hf_decoders.cc builds String patterns); fix: use a String pattern");
    d.pattern = p.at("String").get<std::string>();
    d.content = j.at("content").get<std::string>();
  } else if (type == "Sequence") {
    d.kind = K::kSequence;
    for (const nlohmann::json& c : j.at("decoders")) d.children.push_back(hf_decoder_from_json(c, where));
  } else {
    MT_FAIL(where, ": decoder type \"", type,
            "\" is not supported by megatron.cpp's "
            "HuggingFaceTokenizer (src/data/hf_decoders.cc builds ByteLevel, Metaspace, ByteFallback, "
            "Fuse, Strip, Replace, Sequence); fix: use a tokenizer without it");
  }
  return d;
}

void hf_decode_chain(const HfDecoder& d, std::vector<std::string>& tokens) {
  using K = HfDecoder::Kind;
  switch (d.kind) {
    case K::kByteLevel: {
      // All tokens' characters mapped to bytes (a token with a character
      // outside the table keeps its UTF-8), then decoded with replacement.
      std::string bytes;
      for (const std::string& t : tokens) {
        std::string mapped;
        bool ok = true;
        for (size_t i = 0, len = 0; i < t.size() && ok; i += len) {
          const int b = hf_char_to_byte(hf_char_at(t, i, len));
          if (b < 0)
            ok = false;
          else
            mapped += char(b);
        }
        bytes += ok ? mapped : t;
      }
      std::string text;
      utf8_decode_replace(bytes, text, /*final=*/true);
      tokens.assign(1, std::move(text));
      return;
    }
    case K::kMetaspace:
      for (size_t i = 0; i < tokens.size(); ++i) {
        std::string t = replace_all(tokens[i], d.replacement, " ");
        if (i == 0 && d.prepend && !t.empty() && t[0] == ' ') t.erase(0, 1);
        tokens[i] = std::move(t);
      }
      return;
    case K::kByteFallback: {
      std::vector<std::string> out;
      std::string pending;  // consecutive <0xXX> bytes
      size_t pending_count = 0;
      auto flush = [&] {
        if (pending_count == 0) return;
        if (utf8_first_invalid(pending) == pending.size()) {
          out.push_back(pending);
        } else {
          for (size_t k = 0; k < pending_count; ++k) out.emplace_back("\xEF\xBF\xBD");
        }
        pending.clear();
        pending_count = 0;
      };
      for (std::string& t : tokens) {
        const int b = byte_token(t);
        if (b >= 0) {
          pending += char(b);
          ++pending_count;
        } else {
          flush();
          out.push_back(std::move(t));
        }
      }
      flush();
      tokens.swap(out);
      return;
    }
    case K::kFuse: {
      std::string all;
      for (const std::string& t : tokens) all += t;
      tokens.assign(1, std::move(all));
      return;
    }
    case K::kStrip:
      for (std::string& t : tokens) {
        size_t b = 0, e = t.size();
        for (size_t k = 0;
             k < d.strip_start && t.compare(b, d.content.size(), d.content) == 0 && b + d.content.size() <= e;
             ++k)
          b += d.content.size();
        for (size_t k = 0; k < d.strip_stop && e >= b + d.content.size() &&
                           t.compare(e - d.content.size(), d.content.size(), d.content) == 0;
             ++k)
          e -= d.content.size();
        t = t.substr(b, e - b);
      }
      return;
    case K::kReplace:
      for (std::string& t : tokens) t = replace_all(t, d.pattern, d.content);
      return;
    case K::kSequence:
      for (const HfDecoder& c : d.children) hf_decode_chain(c, tokens);
      return;
  }
}

bool hf_decoder_is_byte_level(const HfDecoder& d) {
  if (d.kind == HfDecoder::Kind::kByteLevel) return true;
  return d.kind == HfDecoder::Kind::kSequence && d.children.size() == 1 &&
         hf_decoder_is_byte_level(d.children[0]);
}

HfPostProcessor hf_post_processor_from_json(const nlohmann::json& j, const std::string& where) {
  HfPostProcessor pp;
  if (j.is_null()) return pp;
  const std::string type = j.value("type", std::string());
  if (type == "ByteLevel") return pp;  // offsets only
  if (type == "Sequence") {
    for (const nlohmann::json& c : j.at("processors")) {
      const HfPostProcessor p = hf_post_processor_from_json(c, where);
      pp.prefix.insert(pp.prefix.end(), p.prefix.begin(), p.prefix.end());
      pp.suffix.insert(pp.suffix.begin(), p.suffix.begin(), p.suffix.end());
    }
    return pp;
  }
  MT_CHECK(type == "TemplateProcessing", where, ": post_processor type \"", type,
           "\" is not supported "
           "by megatron.cpp's HuggingFaceTokenizer (src/data/hf_decoders.cc builds TemplateProcessing, "
           "ByteLevel, Sequence); fix: use a tokenizer without it");
  bool seen_a = false;
  for (const nlohmann::json& item : j.at("single")) {
    if (item.contains("Sequence")) {
      MT_CHECK(item.at("Sequence").value("id", std::string("A")) == "A" && !seen_a, where,
               ": the TemplateProcessing \"single\" template must hold $A once");
      seen_a = true;
      continue;
    }
    const std::string name = item.at("SpecialToken").at("id").get<std::string>();
    const nlohmann::json& st = j.at("special_tokens");
    MT_CHECK(st.contains(name), where, ": TemplateProcessing names the special token \"", name,
             "\" but its \"special_tokens\" lack it; the file is damaged");
    for (const nlohmann::json& id : st.at(name).at("ids"))
      (seen_a ? pp.suffix : pp.prefix).push_back(id.get<int32_t>());
  }
  MT_CHECK(seen_a, where, ": the TemplateProcessing \"single\" template has no $A");
  return pp;
}

}  // namespace mt
