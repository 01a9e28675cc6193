// The argument list the ranks compare (args/args_list.h) and the message
// of a mismatch (args/run_args_check.h), without MPI; the collective check
// runs end to end under mpirun in tests/cli/same_args_test.cc.
#include "args/run_args_check.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

#include "core/error.h"

namespace mt {
namespace run_args_check_test {

std::string value_of(const ArgList& list, const std::string& flag) {
  for (const auto& [f, v] : list)
    if (f == flag) return v;
  ADD_FAILURE() << flag << " is not in the list";
  return "";
}

TEST(ArgumentList, NamesEveryFlagOnceWithCanonicalValues) {
  TrainArgs a;
  a.train_iters = 10;
  a.lr = 0.001;
  a.model.hidden_dropout = 0.1f;
  a.bf16 = true;
  const ArgList list = argument_list(a);
  std::set<std::string> flags;
  for (const auto& [f, v] : list) {
    EXPECT_EQ(f.rfind("--", 0), 0u) << f;
    EXPECT_EQ(f.find(','), std::string::npos) << f;  // one name, not CLI11's alias list
    EXPECT_TRUE(flags.insert(f).second) << f << " twice";
  }
  EXPECT_EQ(value_of(list, "--train-iters"), "10");
  EXPECT_EQ(value_of(list, "--lr"), "0.001");
  EXPECT_EQ(value_of(list, "--hidden-dropout"), "0.1");  // the float as given, not 0.100000001
  EXPECT_EQ(value_of(list, "--norm-epsilon"), "1e-05");
  EXPECT_EQ(value_of(list, "--bf16"), "true");
  EXPECT_EQ(value_of(list, "--fp16"), "false");
  EXPECT_EQ(value_of(list, "--seed"), "1234");
  EXPECT_EQ(value_of(list, "--load"), "");
  EXPECT_EQ(flags.count("--config"), 0u);  // expanded into the flags it holds
}

TEST(ArgumentList, EqualNumbersWrittenAlike) {
  EXPECT_EQ(arg_value_text(1e-3), arg_value_text(0.001));
  for (double v : {3e-4, 0.1, 1.0 / 3.0, 6e-5, 1e20, 4294967296.0})  // reads back to the same bits
    EXPECT_EQ(std::stod(arg_value_text(v)), v) << arg_value_text(v);
  EXPECT_NE(arg_value_text(0.1), arg_value_text(std::nextafter(0.1, 1.0)));  // one ulp apart
  EXPECT_EQ(arg_value_text(0.1f), "0.1");
}

TEST(ArgumentList, SerialisationRoundTrips) {
  TrainArgs a;
  a.data_path = {"0.3", "/data/with \"quotes\" and, commas", "0.7", "/data/b c"};
  const ArgList list = argument_list(a);
  EXPECT_EQ(parse_arguments(serialize_arguments(list)), list);
  EXPECT_THROW(parse_arguments("{not json"), Error);
}

TEST(ArgumentDifference, NamesTheFirstDifferingFlagAndBothValues) {
  TrainArgs a, b;
  a.train_iters = 10;
  b.train_iters = 20;
  b.seed = 7;  // later in the list than --train-iters
  EXPECT_EQ(argument_difference(argument_list(b), 3, argument_list(a)),
            "rank 3 was launched with --train-iters 20 but rank 0 with --train-iters 10; "
            "fix: launch every rank with the same arguments");
  EXPECT_EQ(argument_difference(argument_list(a), 1, argument_list(a)), "");
}

TEST(ArgumentDifference, SwitchesAndEmptyStringsReadAsWithAndWithout) {
  TrainArgs a, b;
  b.bf16 = true;
  EXPECT_NE(argument_difference(argument_list(b), 1, argument_list(a))
                .find("rank 1 was launched with --bf16 but rank 0 without --bf16"),
            std::string::npos);
  TrainArgs c;
  c.load = "/ckpt";
  EXPECT_NE(argument_difference(argument_list(a), 2, argument_list(c))
                .find("rank 2 was launched without --load but rank 0 with --load /ckpt"),
            std::string::npos);
}

TEST(ArgumentDifference, AnotherFlagListIsAnotherBuild) {
  TrainArgs a;
  ArgList mine = argument_list(a), theirs = mine;
  theirs.pop_back();
  EXPECT_NE(argument_difference(mine, 1, theirs).find("another megatron build"),
            std::string::npos);
  theirs = mine;
  theirs[0].first = "--something-else";
  EXPECT_NE(argument_difference(mine, 1, theirs).find("--something-else"), std::string::npos);
}

}  // namespace run_args_check_test
}  // namespace mt
