// Numerically stable (max subtracted before exp); exponentials are computed
// once (vectorised exp_f32: libm's expf is ~8x slower here) and, for the
// gradient, kept in the logits buffer between the sum and the finish step.
#include "kernels/cross_entropy.h"

#include <algorithm>
#include <cmath>

#include "backend/device.h"
#include "core/error.h"
#include "kernels/cpu_isa.h"
#include "kernels/cuda/cross_entropy.h"
#include "kernels/vec_math.h"

namespace mt {

void check_targets(const int32_t* targets, int64_t n, int64_t v) {
  if (MT_ON_DEVICE(targets)) return cuda::check_targets(targets, n, v);
  for (int64_t i = 0; i < n; ++i)
    MT_CHECK(targets[i] >= 0 && targets[i] < v, "cross-entropy: target id ", targets[i],
             " at row ", i, " is outside [0, ", v,
             "); fix: check the dataset's token ids against the model's vocab size");
}

namespace {

// One row's steps. The three phases below and the fused cross_entropy_rows
// run these same functions, so both give the same bits.

// sum_exp = Σ_j exp(z_j - mx); target_logit = z_t - mx (0 when t is outside
// the row); with keep_exp, z_j = exp(z_j - mx).
void row_sums(double& sum_exp, double& target_logit, float* z, float mx, int64_t t, int64_t v,
              bool keep_exp) {
  target_logit = (t >= 0 && t < v) ? double(z[t] - mx) : 0.0;
  // Up to ~1e5 terms in [0, 1]: float partial sums over blocks of kBlock
  // (vectorised; each lane adds kBlock/16 terms, so round-off stays ~1e-7
  // relative), accumulated in double so the loss does not depend on float
  // round-off of the vocabulary size.
  constexpr int64_t kBlock = 512;
  double sum = 0.0;
  for (int64_t j0 = 0; j0 < v; j0 += kBlock) {
    const int64_t j1 = std::min(v, j0 + kBlock);
    float part = 0.f;
    if (keep_exp) {
#pragma omp simd reduction(+ : part)
      for (int64_t j = j0; j < j1; ++j) {
        const float e = exp_f32(z[j] - mx);
        z[j] = e;
        part += e;
      }
    } else {
#pragma omp simd reduction(+ : part)
      for (int64_t j = j0; j < j1; ++j) part += exp_f32(z[j] - mx);
    }
    sum += double(part);
  }
  sum_exp = sum;
}

// g_j = grad_scale * (e_j / sum_exp - [j == t]), e the row's exponentials;
// g may be e itself (fp32, in place) or bf16 storage (each value rounded once).
template <class T>
void row_grad(T* g, const float* e, double sum_exp, int64_t t, int64_t v, float grad_scale) {
  const float mul = float(double(grad_scale) / sum_exp);
  const bool has_t = t >= 0 && t < v;
  const float g_t = has_t ? e[t] * mul - grad_scale : 0.f;  // before g overwrites e
#pragma omp simd
  for (int64_t j = 0; j < v; ++j) store_f32(g, j, e[j] * mul);
  if (has_t) store_f32(g, t, g_t);
}

// row_scale: the row's own factor on grad_scale (null: 1); a row of factor 0
// gets a zero gradient.
void row_finish(float& loss, WriteView grad, const float* e, double sum_exp,
                double target_logit, int64_t t, int64_t v, float grad_scale,
                const float* row_scale) {
  loss = float(std::log(sum_exp) - target_logit);
  if (grad_scale == 0.f) return;
  const float scale = row_scale ? grad_scale * *row_scale : grad_scale;
  visit(grad, [&](auto* g) { row_grad(g, e, sum_exp, t, v, scale); });
}

// Per-row scales (the loss mask) are built for the CPU only.
void check_row_scale_on_host(const char* who, const float* row_scale, const void* out) {
  MT_CHECK(row_scale == nullptr || !MT_ON_DEVICE(out), who,
           ": a loss mask (--eod-mask-loss) is built for the CPU only, not the CUDA kernels; "
           "fix: run on the CPU, or leave out --eod-mask-loss");
}

}  // namespace

void cross_entropy_shard_max(float* row_max, const float* logits, int64_t n, int64_t v_local) {
  if (MT_ON_DEVICE(row_max)) return cuda::cross_entropy_shard_max(row_max, logits, n, v_local);
  const Isa isa = active_isa();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    on_isa(isa, [=] { row_max[i] = mt::row_max(logits + i * v_local, v_local); });
}

void cross_entropy_shard_sums(double* sum_exp, double* target_logit, float* logits,
                              const float* row_max, const int32_t* targets, int64_t n,
                              int64_t v_local, int64_t v_start, bool keep_exp) {
  if (MT_ON_DEVICE(sum_exp))
    return cuda::cross_entropy_shard_sums(sum_exp, target_logit, logits, row_max, targets, n,
                                          v_local, v_start, keep_exp);
  const Isa isa = active_isa();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) on_isa(isa, [=] {
    row_sums(sum_exp[i], target_logit[i], logits + i * v_local, row_max[i],
             int64_t(targets[i]) - v_start, v_local, keep_exp);
  });
}

void cross_entropy_shard_finish(float* losses, WriteView grad, const float* logits,
                                const double* sum_exp, const double* target_logit,
                                const int32_t* targets, int64_t n, int64_t v_local,
                                int64_t v_start, float grad_scale, const float* row_scale) {
  check_row_scale_on_host("cross_entropy_shard_finish", row_scale, losses);
  if (MT_ON_DEVICE(losses))
    return cuda::cross_entropy_shard_finish(losses, grad, logits, sum_exp, target_logit, targets,
                                            n, v_local, v_start, grad_scale);
  const Isa isa = active_isa();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) on_isa(isa, [=] {
    row_finish(losses[i], grad.at(i * v_local), logits + i * v_local, sum_exp[i],
               target_logit[i], int64_t(targets[i]) - v_start, v_local, grad_scale,
               row_scale ? row_scale + i : nullptr);
  });
}

void cross_entropy_rows(float* losses, float* logits, WriteView grad, const int32_t* targets,
                        int64_t n, int64_t v, float grad_scale, const float* row_scale) {
  check_row_scale_on_host("cross_entropy_rows", row_scale, losses);
  if (MT_ON_DEVICE(losses))
    return cuda::cross_entropy_rows(losses, logits, grad, targets, n, v, grad_scale);
  const Isa isa = active_isa();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) on_isa(isa, [=] {
    float* z = logits + i * v;
    double sum = 0, target = 0;
    row_sums(sum, target, z, row_max(z, v), targets[i], v, grad_scale != 0.f);
    row_finish(losses[i], grad.at(i * v), z, sum, target, targets[i], v, grad_scale,
               row_scale ? row_scale + i : nullptr);
  });
}

void softmax_cross_entropy(float* losses, float* logits, const int32_t* targets, int64_t n,
                           int64_t v, float grad_scale) {
  if (MT_ON_DEVICE(losses))
    return cuda::softmax_cross_entropy(losses, logits, targets, n, v, grad_scale);
  MT_CHECK(n >= 0 && v > 0, "softmax_cross_entropy: bad shape n=", n, " v=", v,
           "; fix: pass the row count and a positive vocabulary size");
  check_targets(targets, n, v);
  cross_entropy_rows(losses, logits, logits, targets, n, v, grad_scale);
}

}  // namespace mt
