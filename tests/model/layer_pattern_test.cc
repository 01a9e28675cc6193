// Megatron's --moe-layer-freq list expressions (model/layer_pattern.h): the
// forms DeepSeek's configs use evaluate as Python would, and what Python (or
// Megatron's character filter) refuses is refused with the text named.
#include "model/layer_pattern.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "model/config.h"

namespace mt {
namespace layer_pattern_test {

std::vector<int64_t> eval(const std::string& s) { return eval_layer_pattern("--moe-layer-freq", s); }

std::vector<int64_t> ones_after_zeros(int zeros, int ones) {
  std::vector<int64_t> v(size_t(zeros), 0);
  v.insert(v.end(), size_t(ones), 1);
  return v;
}

TEST(LayerPattern, EvaluatesAsPython) {
  EXPECT_EQ(eval("[0,1,1,1]"), (std::vector<int64_t>{0, 1, 1, 1}));
  EXPECT_EQ(eval("[0]*3+[1]*58"), ones_after_zeros(3, 58));  // DeepSeek-V3
  EXPECT_EQ(eval("([0]+[1]*26)"), ones_after_zeros(1, 26));  // DeepSeek-V2-Lite
  EXPECT_EQ(eval("([0]*1+[1]*26)*1"), ones_after_zeros(1, 26));
  EXPECT_EQ(eval("([1]*3+[0]*1)*3"), (std::vector<int64_t>{1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0}));
  EXPECT_EQ(eval("2*[1,0]+[1]"), (std::vector<int64_t>{1, 0, 1, 0, 1}));  // count * list
  EXPECT_EQ(eval("[1]*2*2"), (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(eval("[0]*0+[1]"), (std::vector<int64_t>{1}));
  EXPECT_EQ(eval("((([1])))"), (std::vector<int64_t>{1}));
}

TEST(LayerPattern, RefusesWhatPythonOrMegatronRefuses) {
  for (const std::string bad : {"[0, 1]", "[0]*x", "[0,1", "([0]+[1]", "[0]+", "[]", "[0]*",
                                "3", "[0]]", "[0][1]", "[1]*99999999", "[0]**2", "[-1]"}) {
    try {
      eval(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("--moe-layer-freq '" + bad + "'"), std::string::npos) << what;
      EXPECT_NE(what.find("fix:"), std::string::npos) << what;
    }
  }
}

// The expression and the plain list make the same MoE layers; a wrong length
// or a non-0/1 entry is refused by the config.
TEST(LayerPattern, ConfigReadsExpressions) {
  ModelConfig a, b;
  a.num_layers = b.num_layers = 4;
  a.num_experts = b.num_experts = 4;
  a.moe_layer_freq = "[0,1,1,1]";
  b.moe_layer_freq = "[0]*1+[1]*3";
  for (int64_t l = 0; l < 4; ++l) EXPECT_EQ(a.is_moe_layer(l), b.is_moe_layer(l)) << l;
  EXPECT_FALSE(b.is_moe_layer(0));
  EXPECT_TRUE(b.is_moe_layer(3));
  b.moe_layer_freq = "[0]*2+[1]*3";
  EXPECT_THROW(b.is_moe_layer(0), Error);
  b.moe_layer_freq = "[0]*2+[2]*2";
  EXPECT_THROW(b.is_moe_layer(0), Error);
}

}  // namespace layer_pattern_test
}  // namespace mt
