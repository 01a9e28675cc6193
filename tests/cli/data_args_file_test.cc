// Megatron's --data-args-path / --per-split-data-args-path (the data path
// arguments read from a file) train as the flags they replace, and are
// refused with those flags as Megatron refuses them.
#include "bad_input_util.h"

namespace mt::test {
namespace data_args_file_test {

class DataArgsFile : public BadInputFixture {
 protected:
  JsonLogLines train_log(const std::string& args, const std::string& name) {
    const RunResult r = run(megatron() + args + " --log-json " + dir.file(name));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    last_output = r.output;
    return read_log_json(dir.file(name));
  }
  // The fixture's train() without its --data-path.
  std::string train_without_data_path(const std::string& extra) const {
    const std::string prefix = dir.file("corpus_text_document");
    std::string t = train(extra);
    t.replace(t.find(" --data-path " + prefix), 13 + prefix.size(), "");
    return t;
  }
  std::string last_output;
};

TEST_F(DataArgsFile, AFileOfDataPathArgumentsTrainsAsTheFlag) {
  const std::string prefix = dir.file("corpus_text_document");
  write_text(dir.file("data_args.txt"), "1.0\n" + prefix + "\n");
  const JsonLogLines ref = train_log(train(""), "ref.json");
  const JsonLogLines got = train_log(
      train_without_data_path(" --data-args-path " + dir.file("data_args.txt")), "file.json");
  expect_same_losses(ref, got, "--data-args-path", 0);
}

TEST_F(DataArgsFile, APerSplitJsonTrainsAsThePerSplitFlags) {
  const std::string prefix = dir.file("corpus_text_document");
  write_text(dir.file("split.json"), "{\"train\": \"" + prefix + "\", \"valid\": [\"1\", \"" +
                                         prefix + "\"], \"test\": null}");
  const std::string flags = " --split 0,0,0 --eval-interval 4 --eval-iters 1";
  auto no_split = [](std::string t) {
    t.replace(t.find(" --split 90,10,0"), 16, "");
    return t;
  };
  const JsonLogLines ref = train_log(
      no_split(train_without_data_path(" --train-data-path " + prefix + " --valid-data-path 1 " +
                                       prefix + " --eval-interval 4 --eval-iters 1")),
      "ref.json");
  const JsonLogLines got = train_log(
      no_split(train_without_data_path(" --per-split-data-args-path " + dir.file("split.json") +
                                       " --eval-interval 4 --eval-iters 1")),
      "file.json");
  ASSERT_EQ(ref.eval.size(), 2u);
  expect_same_losses(ref, got, "--per-split-data-args-path", 0);
  (void)flags;
}

TEST_F(DataArgsFile, WhatMegatronRefusesIsRefused) {
  write_text(dir.file("words.txt"), dir.file("corpus_text_document"));
  write_text(dir.file("nokey.json"), "{\"train\": null, \"valid\": null}");
  write_text(dir.file("bad.json"), "{\"train\": 3, \"valid\": null, \"test\": null}");
  const BadInputCase cases[] = {
      {"both", train(" --data-args-path {dir}words.txt"),
       "--data-args-path {dir}words.txt and --data-path are both given"},
      {"unreadable", train_without_data_path(" --data-args-path {dir}none.txt"),
       "--data-args-path {dir}none.txt: cannot read the file"},
      {"missing key", train_without_data_path(" --per-split-data-args-path {dir}nokey.json"),
       "has no key 'test'"},
      {"not a list", train_without_data_path(" --per-split-data-args-path {dir}bad.json"),
       "'train' is 3, not a string, a list or null"},
  };
  for (BadInputCase c : cases) {
    std::string expected = substitute(c.expected, data, dir.file(""));
    c.expected = expected.c_str();
    expect_fails(c);
  }
}

}  // namespace data_args_file_test
}  // namespace mt::test
