// The local compute of the context-parallel attention ring
// (parallel/context_parallel_attention.h): what a rank does to the chunks it
// holds between the ring's transfers. Grouped-query attention repeats each
// key/value group's (2b, g, c, d) over its a/g heads (2b, a, c, d); only the
// groups travel. `batches` = 2b (two chunks of b samples), cd = c·d.
#pragma once
#include <cstdint>

#include "kernels/attention.h"
#include "kernels/precision.h"

namespace mt {

// packed (2b, g, c, d) = the first head of each group                      [=]
template <class T>
void pack_head_groups(T* packed, const T* heads, int64_t batches, int64_t a, int64_t g, int64_t cd);
// heads (2b, a, c, d) = each head its group's                                [=]
template <class T>
void unpack_head_groups(T* heads, const T* packed, int64_t batches, int64_t a, int64_t g,
                        int64_t cd);
// packed (2b, g, c, d) += the sum of each group's heads' gradients           [+=]
void add_head_group_sums(float* packed, const float* heads, int64_t batches, int64_t a, int64_t g,
                         int64_t cd);
// heads (2b, a, c, d) = the group's gradient on its first head, 0 on the
// others (the QKV gradient sums a group's heads, so the sum is the group's)  [=]
void head_groups_to_first_heads(float* heads, const float* packed, int64_t batches, int64_t a,
                                int64_t g, int64_t cd);
// dst (n) += src (n)                                                         [+=]
void add_inplace(float* dst, const float* src, int64_t n);
// D (2, b, a, c) = rowsum over dv of dctx (2, b, a, c, dv) · ctx_sbh (s, b, a·dv),
// c = s/2: the softmax backward's row term of this rank's two chunks          [=]
void ring_row_dsum(float* dsum, const float* dctx, ReadView ctx_sbh, const AttentionDims& dims);

}  // namespace mt
