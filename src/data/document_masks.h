// Documents inside a sequence, as Megatron's GPT dataset marks them
// (_get_ltor_masks_and_position_ids under --reset-position-ids,
// --reset-attention-mask and --eod-mask-loss): a sample's tokens may hold
// several documents, each ended by the tokenizer's end-of-document token.
// The end-of-document token belongs to the document it ends; the next one
// starts on the token after it.
#pragma once
#include <cstdint>

namespace mt {

struct DocumentFlags {
  bool reset_position_ids = false;    // positions restart at 0 in every document
  bool reset_attention_mask = false;  // a token attends only within its document
  bool eod_mask_loss = false;         // no loss where the input token is the end of a document
  int32_t eod = -1;                   // the tokenizer's end-of-document id
  bool any() const { return reset_position_ids || reset_attention_mask || eod_mask_loss; }
};

// For one sample's s input tokens:
//   positions[t]  = t, or with reset_position_ids t - start(t);
//   doc_start[t]  = start(t) with reset_attention_mask, else 0: the first key
//                   position token t's query may see;
//   loss_mask[t]  = 0 with eod_mask_loss where tokens[t] is the end of a
//                   document, else 1;
// start(t) = 1 + the last end-of-document position before t (0 if none).
// Returns the number of tokens whose loss counts (Σ loss_mask).
int64_t document_masks(const int32_t* tokens, int64_t s, const DocumentFlags& flags,
                       int32_t* positions, int32_t* doc_start, float* loss_mask);

}  // namespace mt
