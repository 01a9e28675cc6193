#include "data/document_masks.h"

namespace mt {

int64_t document_masks(const int32_t* tokens, int64_t s, const DocumentFlags& flags,
                       int32_t* positions, int32_t* doc_start, float* loss_mask) {
  int64_t start = 0, counted = 0;
  for (int64_t t = 0; t < s; ++t) {
    const bool eod = tokens[t] == flags.eod;
    positions[t] = int32_t(flags.reset_position_ids ? t - start : t);
    doc_start[t] = int32_t(flags.reset_attention_mask ? start : 0);
    loss_mask[t] = flags.eod_mask_loss && eod ? 0.f : 1.f;
    counted += loss_mask[t] != 0.f;
    if (eod) start = t + 1;
  }
  return counted;
}

}  // namespace mt
