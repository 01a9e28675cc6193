// megatron::ModelConfig and the named sizes (include/megatron/config.h): a
// named size's fields are its published config.json's numbers; every field
// of the library's own ModelConfig has its public twin (copied both ways,
// defaults alike); a refused model is a ConfigError; megatron::ConfigQuestions
// with every default writes a file naming the layout, and takes `megatron
// config`'s words (--help, a misspelt flag refused).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <type_traits>

#include "api/model_config.h"
#include "comm/mpi_env.h"
#include "megatron/config.h"
#include "temp_dir.h"

namespace config_test {

TEST(NamedModel, Llama3_8bIsItsPublishedConfig) {
  const megatron::ModelConfig m = megatron::named_model("llama3-8b");
  EXPECT_EQ(m.num_layers, 32);
  EXPECT_EQ(m.hidden_size, 4096);
  EXPECT_EQ(m.ffn_hidden_size, 14336);
  EXPECT_EQ(m.num_attention_heads, 32);
  EXPECT_TRUE(m.group_query_attention);
  EXPECT_EQ(m.num_query_groups, 8);
  EXPECT_EQ(m.vocab_size, 128256);
  EXPECT_EQ(m.max_position_embeddings, 8192);
  EXPECT_EQ(m.normalization, "RMSNorm");
  EXPECT_EQ(m.position_embedding_type, "rope");
  EXPECT_FLOAT_EQ(m.rotary_base, 500000.f);
  EXPECT_TRUE(m.swiglu);
  EXPECT_TRUE(m.disable_bias_linear);
  EXPECT_TRUE(m.untie_embeddings_and_output_weights);
  EXPECT_EQ(m.num_experts, 0);
}

TEST(NamedModel, Qwen3AndGpt2AndMixtralAreTheirPublishedConfigs) {
  const megatron::ModelConfig q = megatron::named_model("qwen3-0.6b");
  EXPECT_EQ(q.num_layers, 28);
  EXPECT_EQ(q.hidden_size, 1024);
  EXPECT_EQ(q.ffn_hidden_size, 3072);
  EXPECT_EQ(q.num_attention_heads, 16);
  EXPECT_EQ(q.num_query_groups, 8);
  EXPECT_EQ(q.kv_channels, 128);  // head_dim, not 1024 / 16
  EXPECT_TRUE(q.qk_layernorm);
  EXPECT_FALSE(q.untie_embeddings_and_output_weights);
  EXPECT_EQ(q.vocab_size, 151936);
  EXPECT_FLOAT_EQ(q.layernorm_epsilon, 1e-6f);
  const megatron::ModelConfig g = megatron::named_model("gpt2-small");
  EXPECT_EQ(g.num_layers, 12);
  EXPECT_EQ(g.hidden_size, 768);
  EXPECT_EQ(g.num_attention_heads, 12);
  EXPECT_EQ(g.vocab_size, 50257);
  EXPECT_EQ(g.normalization, "LayerNorm");
  EXPECT_EQ(g.position_embedding_type, "learned_absolute");
  EXPECT_FALSE(g.swiglu);
  // GPT-2 small: 124,439,808 parameters with its 50,257 rows; here the
  // vocabulary is padded to a multiple of 128 (50,304: 47 rows more).
  EXPECT_EQ(megatron::count_parameters(g), 124439808 + 47 * 768);
  const megatron::ModelConfig x = megatron::named_model("mixtral-8x7b");
  EXPECT_EQ(x.num_experts, 8);
  EXPECT_EQ(x.moe_router_topk, 2);
  const std::vector<megatron::NamedModel> names = megatron::named_models();
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.front().name, "gpt2-small");
  EXPECT_EQ(names.front().source, "openai-community/gpt2");
}

TEST(NamedModel, AnUnknownNameListsTheSizes) {
  try {
    megatron::named_model("llama9");
    FAIL() << "llama9 was found";
  } catch (const megatron::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("gpt2-small, gpt2-medium"), std::string::npos)
        << e.what();
  }
}

// Every field of `c` as (key, value in text), by for_each_model_field.
std::vector<std::pair<std::string, std::string>> fields(mt::ModelConfig c) {
  std::vector<std::pair<std::string, std::string>> out;
  mt::for_each_model_field(c, [&](const char* key, const char*, const char*, auto& f) {
    std::ostringstream os;
    os << f;
    out.push_back({key, os.str()});
  });
  return out;
}

// Each field of mt::ModelConfig set to a value of its own, through
// for_each_model_field (the one list of its fields): the public copy and back
// gives every one, so no field lacks its public twin.
TEST(PublicModelConfig, EveryFieldCopiesBothWaysAndTheDefaultsAgree) {
  mt::ModelConfig c;
  int i = 0;
  mt::for_each_model_field(c, [&](const char*, const char*, const char*, auto& f) {
    using T = std::decay_t<decltype(f)>;
    ++i;
    if constexpr (std::is_same_v<T, bool>) f = !f;
    else if constexpr (std::is_same_v<T, std::string>) f = "value " + std::to_string(i);
    else f = T(1000 + i);
  });
  const auto set = fields(c);
  const auto back = fields(mt::private_model_config(mt::public_model_config(c)));
  const auto defaults = fields(mt::ModelConfig{});
  const auto public_defaults = fields(mt::private_model_config(megatron::ModelConfig{}));
  ASSERT_EQ(set.size(), 70u);  // a field added to mt::ModelConfig: add its public twin
  for (size_t k = 0; k < set.size(); ++k) {
    EXPECT_EQ(back[k], set[k]) << set[k].first << " has no public twin";
    EXPECT_EQ(public_defaults[k], defaults[k]) << set[k].first << "'s public default differs";
  }
}

TEST(PublicModelConfig, ARefusedModelIsAConfigErrorNamingTheFlag) {
  megatron::ModelConfig m;
  m.hidden_size = 100;
  m.num_attention_heads = 3;
  try {
    megatron::check_model_config(m);
    FAIL() << "100 features over 3 heads were accepted";
  } catch (const megatron::ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--num-attention-heads"), std::string::npos) << what;
    EXPECT_EQ(what.find(".cc:"), std::string::npos) << what;  // no source location
  }
  EXPECT_NO_THROW(megatron::check_model_config(megatron::named_model("qwen3-0.6b")));
}

TEST(ConfigQuestions, EveryDefaultWritesAFileWithTheLayout) {
  if (mt::world_rank_or_zero() != 0) return;  // one file; the test also runs under mpirun -n 2
  mt::test::TempDir dir;
  megatron::ConfigOptions o;
  o.output = dir.file("run.toml");
  o.yes = true;
  std::istringstream in;
  std::ostringstream out;
  ASSERT_EQ(megatron::ConfigQuestions(o).run(in, out), 0);
  EXPECT_NE(out.str().find("wrote " + o.output), std::string::npos) << out.str();
  std::ifstream f(o.output);
  std::stringstream toml;
  toml << f.rdbuf();
  EXPECT_NE(toml.str().find("# model: gpt2-small\nnum-layers = 12\n"), std::string::npos)
      << toml.str();
  EXPECT_NE(toml.str().find("tensor-model-parallel-size = "), std::string::npos);
  EXPECT_NE(toml.str().find("\n[plan]\n"), std::string::npos);
}

TEST(ConfigQuestions, WordsAsTheCommandTakesThem) {
  try {
    megatron::ConfigQuestions q({"--help"});
    FAIL() << "--help did not throw";
  } catch (const megatron::FlagHelp& h) {
    EXPECT_NE(std::string(h.what()).find("Usage: config [OPTIONS]"), std::string::npos);
    EXPECT_NE(std::string(h.what()).find("Questions, in order, with their --answers keys"),
              std::string::npos);
  }
  EXPECT_THROW(megatron::ConfigQuestions({"--yess"}), megatron::FlagError);
}

}  // namespace config_test
