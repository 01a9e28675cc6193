// One micro-batch's data as the model reads it: its tokens and labels and,
// with Megatron's document flags (--reset-position-ids, --reset-attention-mask,
// --eod-mask-loss; data/document_masks.h), each token's position, the first key
// each query sees and the loss mask. The data loader fills it; the model keeps
// it until the micro-batch's backward.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

namespace mt {

struct MicroBatchInput {
  std::vector<int32_t> tokens, labels;  // (b, s) of this rank's sequence part (s/CP with CP)
  // Empty unless the document flags ask for them:
  std::vector<int32_t> positions;  // (b, s) position ids (--reset-position-ids)
  std::vector<int32_t> doc_start;  // (b, s_global) first visible key (--reset-attention-mask)
  std::vector<float> loss_mask;    // (b, s) 1 where the token's loss counts (--eod-mask-loss)
  int64_t loss_tokens = 0;   // Σ loss_mask over the whole micro-batch (every CP rank's part)
  // Multi-token prediction with CP (model/mtp.h: its depths read tokens past
  // this rank's chunks): the whole samples (b, s_global), the loss mask only
  // with --eod-mask-loss. Empty otherwise (tokens, labels and loss_mask are whole).
  std::vector<int32_t> sample_tokens, sample_labels;
  std::vector<float> sample_loss_mask;
  int64_t first_sample = 0;  // global index of its first sample (keys the dropout masks)
};

// Fills micro-batch k.
using MicroBatchFn = std::function<void(int64_t k, MicroBatchInput& mb)>;

}  // namespace mt
