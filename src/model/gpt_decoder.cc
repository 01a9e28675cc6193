#include "model/gpt_decoder.h"

#include <algorithm>

namespace mt {

BatchedDecoderOptions GptDecoder::options(const ModelConfig& c, int64_t positions) {
  const int64_t context = c.max_position_embeddings, window = c.window_left();
  MT_CHECK(positions >= 0 && positions <= context, "a decoder cache of ", positions,
           " positions; it holds 1 to ", context, " (the model's context), 0 for all");
  const int64_t p = positions == 0 ? context : positions;
  const int64_t rows = window >= 0 ? std::min(p, window + 1) : p;  // a window's ring
  BatchedDecoderOptions o;
  o.tokens = rows;
  o.block_size = rows;  // one block: the sequence's whole cache
  o.max_sequences = 1;
  o.max_rows = 1;
  o.max_positions = p;
  return o;
}

GptDecoder::GptDecoder(const ParamRegistry& reg, const float* params, const TensorParallel& tp,
                       int64_t positions, const Communicator* ep)
    : dec_(reg, params, options(reg.config(), positions), tp, ep), seq_(*dec_.add_sequence()) {}

double GptDecoder::planned_bytes(const ParamRegistry& reg, int64_t positions) {
  return BatchedDecoder::planned_bytes(reg, options(reg.config(), positions));
}

const float* GptDecoder::step(int32_t token) {
  MT_CHECK(position() < capacity(), "the decoder's cache of ", capacity(), " positions is full");
  const DecodeToken row{seq_, token};
  const DecodeStep out = dec_.step(std::span<const DecodeToken>(&row, 1));
  MT_CHECK(bool(out), "the decoder's one block is taken (internal error)");
  return out.logits;
}

void GptDecoder::reset() {
  dec_.free_sequence(seq_);
  seq_ = *dec_.add_sequence();
}

}  // namespace mt
