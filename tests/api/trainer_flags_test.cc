// megatron::Trainer's flags as `megatron train` takes them (the binary hands
// its words to the Trainer): --help is a FlagHelp holding the command's usage,
// an unknown flag a FlagError naming it (and the nearest flag), not a FlagHelp.
#include <gtest/gtest.h>

#include <string>

#include "megatron/trainer.h"

namespace trainer_flags_test {

TEST(TrainerFlags, HelpIsAFlagHelpWithTheTrainUsage) {
  try {
    megatron::Trainer t({"--help"});
    FAIL() << "--help did not throw";
  } catch (const megatron::FlagHelp& h) {
    const std::string usage = h.what();
    EXPECT_EQ(usage.rfind("train a GPT model (launch with mpirun for many ranks)\n"
                          "Usage: train [OPTIONS]\n", 0), 0u) << usage;
    EXPECT_NE(usage.find("--train-iters"), std::string::npos);
  }
}

TEST(TrainerFlags, AnUnknownFlagIsAFlagErrorNamingIt) {
  try {
    megatron::Trainer t({"--mock-data", "--train-iter", "3"});
    FAIL() << "--train-iter did not throw";
  } catch (const megatron::FlagHelp& h) {
    FAIL() << "a FlagHelp: " << h.what();
  } catch (const megatron::FlagError& e) {
    EXPECT_EQ(std::string(e.what()),
              "unknown flag --train-iter; the nearest flag of `megatron train` is --train-iters; "
              "see `megatron train --help`");
  }
}

}  // namespace trainer_flags_test
