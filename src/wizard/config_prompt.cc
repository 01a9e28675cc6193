#include "wizard/config_prompt.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <istream>
#include <ostream>

#include "core/error.h"

namespace mt {

namespace {

std::string trimmed(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::string error_reason(const std::string& s) {
  const size_t colon = s.find(": ");
  const size_t cc = s.find(".cc:");
  return cc != std::string::npos && colon != std::string::npos && cc < colon &&
                 s.find_first_not_of("0123456789", cc + 4) == colon
             ? s.substr(colon + 2)
             : s;
}

std::optional<int64_t> parse_count(const std::string& s) {
  if (s.empty() || s.size() > 18 || s.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return std::stoll(s);
}

Prompter::Prompter(std::istream& in, std::ostream& out, Mode mode,
                   std::map<std::string, std::string> answers, std::string answers_path)
    : in_(in), out_(out), mode_(mode), answers_(std::move(answers)),
      answers_path_(std::move(answers_path)) {}

void Prompter::say(const std::string& line) { out_ << line << "\n" << std::flush; }

std::string Prompter::answer_of(const Question& q, const std::string& raw) const {
  if (q.choices.empty()) return raw;
  if (const std::optional<int64_t> n = parse_count(raw);
      n && *n >= 1 && *n <= int64_t(q.choices.size()))
    return q.choices[size_t(*n - 1)];
  for (const std::string& c : q.choices)
    if (lower(c) == lower(raw)) return c;
  return q.other_answers ? raw : "";
}

std::string Prompter::ask(const Question& q) {
  asked_.insert(q.key);
  for (size_t i = 0; i < q.choices.size(); ++i)
    out_ << "  " << i + 1 << ") " << q.choices[i]
         << (i < q.notes.size() && !q.notes[i].empty() ? "  " + q.notes[i] : "") << "\n";
  const std::string prompt = q.text + " [" + q.default_answer + "]: ";
  for (;;) {
    std::string raw;
    if (mode_ == Mode::kAsk) {
      out_ << prompt << std::flush;
      if (!std::getline(in_, raw)) {
        out_ << "\n" << std::flush;
        MT_FAIL("the input ended at the question '", q.text, "' (", q.key,
                "); nothing was written; fix: answer every question, or use --yes or --answers "
                "FILE");
      }
      raw = trimmed(raw);
      if (raw.empty()) raw = q.default_answer;
    } else {
      const auto it = answers_.find(q.key);
      raw = mode_ == Mode::kAnswers && it != answers_.end() ? it->second : "";
      if (raw.empty()) raw = q.default_answer;
      out_ << prompt << raw << "\n" << std::flush;
    }
    const std::string answer = answer_of(q, raw);
    std::string why;
    if (answer.empty()) {
      why = "'" + raw + "' is not one of the " + std::to_string(q.choices.size()) +
            " choices; answer with its number or its name";
    } else if (q.check) {
      why = q.check(answer);
    }
    if (why.empty()) return answer;
    if (mode_ == Mode::kAsk) {
      out_ << "  invalid: " << why << "\n";
      continue;
    }
    const bool from_file = mode_ == Mode::kAnswers && answers_.count(q.key) > 0;
    MT_FAIL(from_file ? answers_path_ + ": " + q.key + " = " + raw
                      : "the default of '" + q.key + "' (" + raw + ")",
            ": ", why, from_file ? "; fix: correct that line" : "; fix: give " + q.key +
            " in an --answers file, or answer it without --yes");
  }
}

int64_t Prompter::ask_int(const std::string& key, const std::string& text, int64_t default_answer,
                          const std::function<std::string(int64_t)>& check) {
  Question q{key, text, std::to_string(default_answer), {}, [&](const std::string& a) {
               const std::optional<int64_t> n = parse_count(a);
               if (!n || *n < 1) return "'" + a + "' is not a whole number >= 1";
               return check ? check(*n) : std::string();
             }};
  return *parse_count(ask(q));
}

double Prompter::ask_number(const std::string& key, const std::string& text,
                            double default_answer,
                            const std::function<std::string(double)>& check) {
  char def[32];
  std::snprintf(def, sizeof def, "%g", default_answer);
  auto parse = [](const std::string& a, double* x) {
    char* end = nullptr;
    *x = std::strtod(a.c_str(), &end);
    return !a.empty() && end == a.c_str() + a.size() && std::isfinite(*x) && *x > 0;
  };
  Question q{key, text, def, {}, [&](const std::string& a) {
               double x = 0;
               if (!parse(a, &x)) return "'" + a + "' is not a number > 0";
               return check ? check(x) : std::string();
             }};
  double x = 0;
  parse(ask(q), &x);
  return x;
}

bool Prompter::ask_yes_no(const std::string& key, const std::string& text, bool default_answer) {
  Question q{key, text + " (yes/no)", default_answer ? "yes" : "no", {},
             [](const std::string& a) {
               const std::string l = lower(a);
               return l == "y" || l == "yes" || l == "n" || l == "no"
                          ? std::string()
                          : "'" + a + "' is neither yes nor no";
             }};
  const std::string a = lower(ask(q));
  return a == "y" || a == "yes";
}

std::vector<std::string> Prompter::unused_answers() const {
  std::vector<std::string> out;
  for (const auto& [key, value] : answers_)
    if (asked_.count(key) == 0) out.push_back(key);
  return out;
}

std::map<std::string, std::string> read_answers_file(const std::string& path) {
  std::ifstream in(path);
  MT_CHECK(in.good(), "--answers ", path, ": cannot read it; fix: a file of `key = value` lines "
           "(`megatron config --help` lists the keys)");
  std::map<std::string, std::string> out;
  int at = 0;
  for (std::string line; std::getline(in, line);) {
    ++at;
    line = trimmed(line);
    if (line.empty() || line[0] == '#') continue;
    const size_t eq = line.find('=');
    MT_CHECK(eq != std::string::npos, "--answers ", path, " line ", at, ": '", line,
             "' is not `key = value`; fix: write it as e.g. `model = gpt2-small`");
    const std::string key = trimmed(line.substr(0, eq));
    std::string value = trimmed(line.substr(eq + 1));
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
        value.back() == value.front())
      value = value.substr(1, value.size() - 2);
    MT_CHECK(!key.empty(), "--answers ", path, " line ", at, ": no key before '='");
    MT_CHECK(out.emplace(key, value).second, "--answers ", path, " line ", at, ": key '", key,
             "' is given twice; fix: keep one line");
  }
  return out;
}

}  // namespace mt
