// The batched decoder across ranks (CTest runs this under mpirun -n 2; a
// plain run is a world of one): the world as the TP group of a Llama-shaped
// and a GPT-2-shaped model, and as the EP group of an MoE model, feeding the
// mixed schedule of tests/model/decoder_test_util.h, gives on every rank the
// logits one rank's GptDecoder gives each sequence alone.
#include <gtest/gtest.h>

#include <cstdio>

#include "comm/communicator.h"
#include "model/decoder_test_util.h"

namespace mt {
namespace batched_decoder_tp_test {

enum class Split { kTensor, kExpert };

void expect_world_matches_one_rank(ModelConfig c, Split split, const char* what) {
  const Communicator world = Communicator::world();
  const int ranks = world.size(), rank = world.rank();
  c.finalize(split == Split::kTensor ? ranks : 1);
  // One rank's whole model: the reference.
  const ParamRegistry one(c, StageLayout{0, 1, 0, c.num_layers, true, true});
  const std::vector<float> one_params = decoder_test_params(one);
  const std::vector<int64_t> lengths = {9, 3, 14, 6, 11}, prompt = {6, 1, 10, 2, 7};
  const auto texts = random_texts(lengths, c.vocab_size, 8);
  const auto ref = alone_logits(one, one_params.data(), texts);
  // This rank's shard of the same model (the initialisation is keyed by global index).
  StageLayout st{0, 1, 0, c.num_layers, true, true};
  if (split == Split::kTensor) st.tp_rank = rank, st.tp_size = ranks;
  if (split == Split::kExpert) st.ep_rank = rank, st.ep_size = ranks;
  const ParamRegistry reg(c, st);
  const std::vector<float> params = decoder_test_params(reg);
  BatchedDecoderOptions opt;
  opt.tokens = 3 * 14;
  opt.block_size = 4;
  opt.max_sequences = 3;
  opt.max_rows = 8;
  const TensorParallel tp{split == Split::kTensor ? &world : nullptr, false};
  const Communicator* ep = split == Split::kExpert && ranks > 1 ? &world : nullptr;
  BatchedDecoder dec(reg, params.data(), opt, tp, ep);
  const double planned = BatchedDecoder::planned_bytes(reg, dec.options());
  EXPECT_LE(planned, double(dec.bytes()));
  EXPECT_LT(double(dec.bytes()), planned + 48 * 64);
  const ScheduleReport rep = run_schedule(dec, texts, prompt, ref, 4);
  if (rank == 0)
    std::printf("%s on %d ranks: %lld rows in %lld steps, worst relative error %.3g\n", what,
                ranks, static_cast<long long>(rep.rows), static_cast<long long>(rep.steps),
                rep.worst);
  EXPECT_LE(rep.worst, 1e-5) << what << " rank " << rank;
  EXPECT_EQ(rep.rows, 9 + 3 + 14 + 6 + 11);
  EXPECT_GT(rep.mixed_steps, 0);
}

TEST(BatchedDecoderRanks, LlamaTensorParallelEqualsOneRank) {
  expect_world_matches_one_rank(tiny_llama(), Split::kTensor, "llama TP");
}

TEST(BatchedDecoderRanks, Gpt2TensorParallelEqualsOneRank) {
  expect_world_matches_one_rank(tiny_gpt2(), Split::kTensor, "gpt2 TP");
}

// Multi-latent attention: every rank caches the whole latent, its heads' keys
// and values up-projected from it, the projection all-reduced.
TEST(BatchedDecoderRanks, MlaTensorParallelEqualsOneRank) {
  expect_world_matches_one_rank(tiny_mla(), Split::kTensor, "mla TP");
}

TEST(BatchedDecoderRanks, MoeExpertParallelEqualsOneRank) {
  expect_world_matches_one_rank(tiny_moe(), Split::kExpert, "moe EP");
}

}  // namespace batched_decoder_tp_test
}  // namespace mt
