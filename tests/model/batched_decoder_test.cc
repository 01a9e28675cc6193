// The batched decoder (model/batched_decoder.h): several sequences of
// different prompt lengths fed in mixed steps (prefill chunks of several
// rows, single decode rows, sequences joining and leaving, blocks reused
// after a free) give, row for row, the logits each sequence gets alone from a
// GptDecoder — for a Llama-shaped, a GPT-2-shaped and an MoE model, and a
// sliding-window one; a sequence's logits do not depend on the rest of the
// batch; a full pool is reported, not a crash, and freeing makes room; the
// planned bytes are the carved ones; bad rows are refused by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "decoder_test_util.h"

namespace mt {
namespace batched_decoder_test {

struct Model {
  ModelConfig cfg;
  ParamRegistry reg;
  std::vector<float> params;
  explicit Model(ModelConfig c)
      : cfg((c.finalize(1), c)),
        reg(cfg, StageLayout{0, 1, 0, cfg.num_layers, true, true}),
        params(decoder_test_params(reg)) {}
};

// The carving against the closed form (alignment: < 64 bytes per buffer).
void expect_planned_is_carved(const BatchedDecoder& dec, const ParamRegistry& reg) {
  const double planned = BatchedDecoder::planned_bytes(reg, dec.options());
  EXPECT_LE(planned, double(dec.bytes()));
  EXPECT_LT(double(dec.bytes()), planned + 48 * 64);
}

// Six texts (prompts of 1 to 10 tokens, then generated ones), three live at
// a time, prefill chunks of up to 4 rows, steps of up to 8 rows.
void expect_schedule_matches_alone(const ModelConfig& c, const char* what) {
  Model m(c);
  const std::vector<int64_t> lengths = {9, 3, 16, 6, 12, 5}, prompt = {6, 1, 10, 2, 7, 5};
  const auto texts = random_texts(lengths, m.cfg.vocab_size, 3);
  const auto ref = alone_logits(m.reg, m.params.data(), texts);
  BatchedDecoderOptions opt;
  opt.tokens = 3 * 16;  // three of the longest text
  opt.block_size = 4;
  opt.max_sequences = 3;
  opt.max_rows = 8;
  BatchedDecoder dec(m.reg, m.params.data(), opt);
  expect_planned_is_carved(dec, m.reg);
  const ScheduleReport rep = run_schedule(dec, texts, prompt, ref, 4);
  std::printf("%s: %lld rows in %lld steps, worst relative error %.3g\n", what,
              static_cast<long long>(rep.rows), static_cast<long long>(rep.steps), rep.worst);
  EXPECT_LE(rep.worst, 1e-5) << what;
  EXPECT_EQ(rep.rows, 9 + 3 + 16 + 6 + 12 + 5) << what;
  // The schedule did what it says: several rows in a step, chunks of one
  // sequence, chunks beside single rows, late joiners, blocks reused.
  EXPECT_EQ(rep.widest_step, 8) << what;
  EXPECT_EQ(rep.longest_chunk, 4) << what;
  EXPECT_GT(rep.mixed_steps, 0) << what;
  EXPECT_GE(rep.joined_late, 3) << what;
  EXPECT_GT(rep.reused_blocks, 0) << what;
  EXPECT_EQ(dec.pool().free_blocks(), dec.pool().blocks()) << what;  // all given back
}

TEST(BatchedDecoder, LlamaMixedStepsEqualEachSequenceAlone) {
  expect_schedule_matches_alone(tiny_llama(), "llama");
}

TEST(BatchedDecoder, Gpt2MixedStepsEqualEachSequenceAlone) {
  expect_schedule_matches_alone(tiny_gpt2(), "gpt2");
}

// Multi-latent attention: each row's latent and RoPE key into its own
// sequence's blocks, its keys and values up-projected from those alone.
TEST(BatchedDecoder, MlaMixedStepsEqualEachSequenceAlone) {
  expect_schedule_matches_alone(tiny_mla(), "mla");
}

TEST(BatchedDecoder, MoeMixedStepsEqualEachSequenceAlone) {
  expect_schedule_matches_alone(tiny_moe(), "moe");
}

// A window of 5 keys in rings of 8 slots (2 blocks of 4): texts run past the
// ring; chunks of 3 rows (at most ring - window) once it wraps.
TEST(BatchedDecoder, SlidingWindowRingsEqualEachSequenceAlone) {
  ModelConfig c = tiny_llama();
  c.window_size = "5,0";
  Model m(c);
  const std::vector<int64_t> lengths = {20, 14, 9}, prompt = {12, 3, 9};
  const auto texts = random_texts(lengths, m.cfg.vocab_size, 4);
  const auto ref = alone_logits(m.reg, m.params.data(), texts);
  BatchedDecoderOptions opt;
  opt.tokens = 16;  // two sequences' rings
  opt.block_size = 4;
  opt.max_sequences = 2;
  opt.max_rows = 6;
  BatchedDecoder dec(m.reg, m.params.data(), opt);
  EXPECT_EQ(dec.pool().ring(), 8);
  EXPECT_EQ(dec.options().max_positions, m.cfg.max_position_embeddings);  // past the pool
  expect_planned_is_carved(dec, m.reg);
  const ScheduleReport rep = run_schedule(dec, texts, prompt, ref, 3);
  std::printf("window: worst relative error %.3g\n", rep.worst);
  EXPECT_LE(rep.worst, 1e-5);
  EXPECT_EQ(rep.rows, 20 + 14 + 9);
  // Four rows of one wrapped sequence in a step would overwrite keys its first reads.
  const int64_t seq = *dec.add_sequence();
  for (int i = 0; i < 3; ++i) {
    const std::vector<DecodeToken> three(3, DecodeToken{seq, 1});
    ASSERT_TRUE(bool(dec.step(three)));
  }
  const std::vector<DecodeToken> four(4, DecodeToken{seq, 1});
  EXPECT_THROW(dec.step(four), Error);
}

// Text A in chunks of 3, alone in its decoder, and with three other
// sequences' rows before and after its own in every step: its logits agree.
TEST(BatchedDecoder, ASequencesLogitsDoNotDependOnTheBatch) {
  Model m(tiny_llama());
  const auto texts = random_texts({12, 12, 12, 12}, m.cfg.vocab_size, 5);
  BatchedDecoderOptions opt;
  opt.tokens = 64;
  opt.block_size = 4;
  opt.max_sequences = 4;
  opt.max_rows = 12;
  BatchedDecoder alone(m.reg, m.params.data(), opt), crowd(m.reg, m.params.data(), opt);
  const int64_t a = *alone.add_sequence();
  std::vector<int64_t> seqs;
  for (int i = 0; i < 4; ++i) seqs.push_back(*crowd.add_sequence());
  const int64_t v = alone.vocab_rows();
  double worst = 0;
  int64_t identical = 0;
  for (int64_t p = 0; p < 12; p += 3) {
    std::vector<DecodeToken> mine, all;
    for (int64_t i = p; i < p + 3; ++i) mine.push_back({a, texts[0][size_t(i)]});
    for (int k : {1, 2}) all.push_back({seqs[size_t(k)], texts[size_t(k)][size_t(p)]});
    for (int64_t i = p; i < p + 3; ++i) all.push_back({seqs[0], texts[0][size_t(i)]});
    for (int64_t i = p; i < p + 3; ++i) all.push_back({seqs[3], texts[3][size_t(i)]});
    const DecodeStep one = alone.step(mine);
    const std::vector<float> want(one.logits, one.logits + 3 * v);
    const DecodeStep many = crowd.step(all);
    ASSERT_TRUE(bool(many));
    for (int64_t r = 0; r < 3; ++r) {
      const float* got = many.logits + (2 + r) * v;
      worst = std::max(worst, row_rel_error(got, want.data() + r * v, v));
      identical += std::equal(got, got + v, want.data() + r * v);
    }
  }
  std::printf("batch independence: worst relative difference %.3g, %lld of 12 rows identical\n",
              worst, static_cast<long long>(identical));
  EXPECT_LE(worst, 1e-5);
  EXPECT_EQ(crowd.length(seqs[0]), 12);
  EXPECT_EQ(crowd.length(seqs[1]), 4);
}

// A pool of 2 blocks of 4: a sequence of 5 positions takes both; another
// sequence's first row finds none (reported, nothing run, nothing changed),
// nor does an admission that reserves; freeing the first makes room and the
// second takes its blocks. A decoder of 2 sequences refuses a third.
TEST(BatchedDecoder, AFullPoolIsReportedAndFreeingMakesRoom) {
  Model m(tiny_llama());
  BatchedDecoderOptions opt;
  opt.tokens = 8;
  opt.block_size = 4;
  opt.max_sequences = 2;
  opt.max_rows = 5;
  BatchedDecoder dec(m.reg, m.params.data(), opt);
  EXPECT_EQ(dec.options().max_positions, 8);  // the pool's tokens
  const int64_t a = *dec.add_sequence();
  const std::vector<DecodeToken> five(5, DecodeToken{a, 2});
  ASSERT_TRUE(bool(dec.step(five)));
  EXPECT_EQ(dec.pool().free_blocks(), 0);
  const std::vector<int32_t> a_blocks = dec.pool().table(a);
  const int64_t b = *dec.add_sequence();
  EXPECT_FALSE(dec.add_sequence().has_value());  // two live: no third
  const DecodeToken row{b, 3};
  const DecodeStep full = dec.step(std::span<const DecodeToken>(&row, 1));
  EXPECT_FALSE(bool(full));
  EXPECT_EQ(full.blocks_short, 1);
  EXPECT_EQ(dec.length(b), 0);
  EXPECT_EQ(dec.length(a), 5);
  dec.free_sequence(b);
  EXPECT_FALSE(dec.add_sequence(1).has_value());  // reserving 1 position: no block free
  EXPECT_EQ(dec.pool().live_sequences(), 1);
  dec.free_sequence(a);
  EXPECT_EQ(dec.pool().free_blocks(), 2);
  const int64_t c = *dec.add_sequence(6);  // reserves both blocks again
  EXPECT_EQ(dec.pool().free_blocks(), 0);
  EXPECT_TRUE(std::is_permutation(a_blocks.begin(), a_blocks.end(),
                                  dec.pool().table(c).begin()));
  const DecodeToken next{c, 3};
  EXPECT_TRUE(bool(dec.step(std::span<const DecodeToken>(&next, 1))));
}

// Bad rows and options throw an Error naming the value.
TEST(BatchedDecoder, BadRowsAndOptionsAreRefusedByName) {
  Model m(tiny_gpt2());
  BatchedDecoderOptions opt;
  opt.tokens = 8;
  opt.block_size = 4;
  opt.max_sequences = 2;
  opt.max_rows = 2;
  BatchedDecoder dec(m.reg, m.params.data(), opt);
  const int64_t a = *dec.add_sequence();
  auto step = [&](std::vector<DecodeToken> rows) { return dec.step(rows); };
  auto message = [&](auto f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] { step({{a, 30}}); }).find("token id 30"), std::string::npos);
  EXPECT_NE(message([&] { step({{a + 7, 1}}); }).find("sequence " + std::to_string(a + 7)),
            std::string::npos);
  EXPECT_NE(message([&] { step({{a, 1}, {a, 1}, {a, 1}}); }).find("3 rows"), std::string::npos);
  EXPECT_NE(message([&] { step({}); }).find("0 rows"), std::string::npos);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(bool(step({{a, 1}, {a, 1}})));
  EXPECT_NE(message([&] { step({{a, 1}}); }).find("is full"), std::string::npos);
  dec.free_sequence(a);
  EXPECT_NE(message([&] { step({{a, 1}}); }).find("not live"), std::string::npos);
  EXPECT_THROW(dec.free_sequence(a), Error);
  BatchedDecoderOptions bad = opt;
  bad.block_size = 0;
  EXPECT_NE(message([&] { BatchedDecoder(m.reg, m.params.data(), bad); }).find("block of 0"),
            std::string::npos);
  bad = opt;
  bad.max_positions = m.cfg.max_position_embeddings + 1;
  EXPECT_NE(message([&] { BatchedDecoder(m.reg, m.params.data(), bad); }).find("25 positions"),
            std::string::npos);
}

}  // namespace batched_decoder_test
}  // namespace mt
