// args/flag_table.h's lists against the argument list they drive: each
// entry, its member changed alone, changes exactly one listed value, under
// the entry's first name (so an entry cannot point at another member, be
// listed under an alias, or be left out of args_list.cc's order).
#include "args/flag_table.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <type_traits>

#include "args/args_list.h"

namespace mt {
namespace flag_table_test {

// A value other than `v` of its type.
template <class T>
T other_than(const T& v) {
  if constexpr (std::is_same_v<T, bool>)
    return !v;
  else if constexpr (std::is_floating_point_v<T>)
    return std::isnan(v) ? T(0.25) : v * 2 + T(0.5);
  else if constexpr (std::is_integral_v<T>)
    return v + 7;
  else
    return v + "x";
}

// Changes each entry of one list alone (the target-th visited) and compares
// the argument list with the default one; returns the entries.
template <class ForEach>
int check_list(ForEach for_each, std::set<std::string>& seen) {
  const ArgList defaults = argument_list(TrainArgs{});
  int entries = 0;
  for (int target = 0;; ++target) {
    TrainArgs a;
    int i = 0;
    std::string names;
    for_each(a, [&](const char* n, const char*, auto& member) {
      if (i++ == target) {
        names = n;
        member = other_than(member);
      }
    });
    if (names.empty()) break;
    ++entries;
    std::string name = names.substr(names[0] == '!' ? 1 : 0);
    name = name.substr(0, name.find(','));
    EXPECT_TRUE(seen.insert(name).second) << name << " is in two lists";
    const ArgList changed = argument_list(a);
    EXPECT_EQ(changed.size(), defaults.size());
    std::string differing;
    for (size_t k = 0; k < changed.size() && k < defaults.size(); ++k)
      if (changed[k] != defaults[k]) differing += changed[k].first + " ";
    EXPECT_EQ(differing, name + " ") << "entry " << names;
  }
  return entries;
}

#define MT_LIST(fn) [](auto& a, auto&& v) { fn(a, v); }

TEST(FlagTable, EachEntryIsListedUnderItsFirstName) {
  std::set<std::string> seen;
  EXPECT_EQ(check_list(MT_LIST(for_each_model_group_flag), seen), 2);
  EXPECT_EQ(check_list(MT_LIST(for_each_precision_flag), seen), 11);
  EXPECT_EQ(check_list(MT_LIST(for_each_parallelism_flag), seen), 15);
  EXPECT_EQ(check_list(MT_LIST(for_each_lr_flag), seen), 7);
  EXPECT_EQ(check_list(MT_LIST(for_each_lr_samples_flag), seen), 3);
  EXPECT_EQ(check_list(MT_LIST(for_each_optimizer_flag), seen), 15);
  EXPECT_EQ(check_list(MT_LIST(for_each_tensorboard_flag), seen), 10);
  EXPECT_EQ(check_list(MT_LIST(for_each_run_check_flag), seen), 13);
}

TEST(FlagTable, ASwitchThatClearsIsListedNegated) {
  TrainArgs a;
  a.checks.check_for_nan_in_loss_and_grad = false;  // given: --no-check-for-nan-in-loss-and-grad
  std::string listed;
  for (const auto& [flag, value] : argument_list(a))
    if (flag == "--no-check-for-nan-in-loss-and-grad") listed = value;
  EXPECT_EQ(listed, "true");
}

}  // namespace flag_table_test
}  // namespace mt
