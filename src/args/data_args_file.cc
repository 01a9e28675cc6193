#include "args/data_args_file.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace mt {

namespace {

std::string read_whole(const std::string& path, const char* flag) {
  std::ifstream in(path);
  MT_CHECK(in.good(), flag, " ", path, ": cannot read the file; fix: give a readable file");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> split_words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

}  // namespace

void read_data_args_files(TrainArgs& args) {
  if (!args.data_args_path.empty()) {
    MT_CHECK(args.data_path.empty(), "--data-args-path ", args.data_args_path, " and --data-path "
             "are both given (Megatron-LM refuses this); fix: give one");
    args.data_path = split_words(read_whole(args.data_args_path, "--data-args-path"));
    MT_CHECK(!args.data_path.empty(), "--data-args-path ", args.data_args_path,
             " holds no words; fix: write the --data-path arguments into it (e.g. "
             "0.3 data/a_text_document 0.7 data/b_text_document)");
  }
  const std::string& path = args.per_split_data_args_path;
  if (path.empty()) return;
  const char* flag = "--per-split-data-args-path";
  MT_CHECK(args.train_data_path.empty() && args.valid_data_path.empty() &&
               args.test_data_path.empty(),
           flag, " ", path, " and --train/valid/test-data-path are both given (Megatron-LM "
           "refuses this); fix: give one");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_whole(path, flag));
  } catch (const nlohmann::json::exception& e) {
    MT_FAIL(flag, " ", path, " is not JSON (", e.what(), "); fix: write an object with the keys "
            "train, valid and test, e.g. {\"train\": \"1.0 data/a_text_document\", \"valid\": "
            "null, \"test\": null}");
  }
  MT_CHECK(j.is_object(), flag, " ", path, " is not a JSON object of train, valid and test");
  std::vector<std::string>* targets[3] = {&args.train_data_path, &args.valid_data_path,
                                          &args.test_data_path};
  const char* keys[3] = {"train", "valid", "test"};
  for (int i = 0; i < 3; ++i) {
    MT_CHECK(j.contains(keys[i]), flag, " ", path, " has no key '", keys[i],
             "' (Megatron-LM reads all three); fix: add it (null: no such split)");
    const nlohmann::json& v = j.at(keys[i]);
    if (v.is_string()) {
      *targets[i] = split_words(v.get<std::string>());
    } else if (v.is_array()) {
      for (const nlohmann::json& w : v) {
        MT_CHECK(w.is_string() || w.is_number(), flag, " ", path, ": '", keys[i], "' holds ",
                 w.dump(), ", not a word; fix: a list of weights and prefixes");
        targets[i]->push_back(w.is_string() ? w.get<std::string>() : w.dump());
      }
    } else {
      MT_CHECK(v.is_null(), flag, " ", path, ": '", keys[i], "' is ", v.dump(), ", not a "
               "string, a list or null");
    }
  }
}

}  // namespace mt
