// The questions of `megatron config`, asked one way whatever answers them:
// a person at a terminal (the default shown in brackets, Enter takes it, a
// bad answer asked again with the reason in one line), every default
// (--yes), or a file of `key = value` answers (--answers; a missing key takes
// its default). End of input before the last question is an mt::Error, so the
// command exits non-zero and writes nothing.
#pragma once
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace mt {

// Checks one answer: "" when it is good, else the reason (one line).
using AnswerCheck = std::function<std::string(const std::string&)>;

struct Question {
  std::string key;                   // its key in an --answers file
  std::string text;                  // "Processes per machine"
  std::string default_answer;        // what Enter takes
  std::vector<std::string> choices;  // listed 1) 2) ...; answered by number or by name
  AnswerCheck check;                 // may be empty
  bool other_answers = false;        // with choices: an answer that is none of them goes to check
  std::vector<std::string> notes;    // shown after each choice (optional)
};

class Prompter {
 public:
  enum class Mode { kAsk, kDefaults, kAnswers };
  // kAnswers: `answers` from read_answers_file (`answers_path` for messages).
  Prompter(std::istream& in, std::ostream& out, Mode mode,
           std::map<std::string, std::string> answers = {}, std::string answers_path = "");

  // The answer (a choice's name when the question has choices).
  std::string ask(const Question& q);
  int64_t ask_int(const std::string& key, const std::string& text, int64_t default_answer,
                  const std::function<std::string(int64_t)>& check = {});
  double ask_number(const std::string& key, const std::string& text, double default_answer,
                    const std::function<std::string(double)>& check = {});
  bool ask_yes_no(const std::string& key, const std::string& text, bool default_answer);
  // A line of text for the person (not a question).
  void say(const std::string& line);

  Mode mode() const { return mode_; }
  // The --answers keys no question asked (they apply to other answers).
  std::vector<std::string> unused_answers() const;

 private:
  std::string answer_of(const Question& q, const std::string& raw) const;  // choice number -> name
  std::istream& in_;
  std::ostream& out_;
  Mode mode_;
  std::map<std::string, std::string> answers_;
  std::string answers_path_;
  std::set<std::string> asked_;
};

// `key = value` lines (blank lines and # comments skipped; a value may be
// quoted); throws naming the file, the line and the fix.
std::map<std::string, std::string> read_answers_file(const std::string& path);

// An mt::Error's message without its "file.cc:123: " prefix: a reason for a person.
std::string error_reason(const std::string& what);

// "12" -> 12; nullopt for anything but a whole number (no sign, no spaces).
std::optional<int64_t> parse_count(const std::string& s);

}  // namespace mt
