// RoPE (fp32, OpenMP over head vectors). Rows are independent, so results do
// not depend on the thread count.
//
// The table reproduces the float32 arithmetic of Megatron's RotaryEmbedding
// and HF's LlamaRotaryEmbedding: inv_freq = 1.0 / base ** (arange(0, dim, 2) /
// dim) and freqs = outer(positions, inv_freq) are float32 tensors, so at long
// positions the angle carries float32 rounding (~pos * 6e-8 rad) that the
// trained weights have seen; we keep it, and evaluate only cos/sin themselves
// in double (correctly rounded to float).
#include "kernels/rope.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>

#include "backend/device.h"
#include "core/error.h"
#include "kernels/cpu_isa.h"
#include "kernels/cuda/rope.h"

namespace mt {

namespace {

// int(head_dim * rotary_percent) as Python computes it from the flag's decimal
// text: rotary_percent arrives as a float (0.7f = 0.69999998...), whose exact
// product can fall just below an integer that Python's double product reaches
// (10 * 0.7 = 7.000000000000001 -> 7, but 10 * 0.69999998 -> 6). Going back
// through the float's shortest decimal ("0.7") recovers Python's double.
int64_t rotary_dim(int64_t head_dim, float rotary_percent) {
  char buf[32];
  const auto res = std::to_chars(buf, buf + sizeof(buf) - 1, rotary_percent);
  *res.ptr = '\0';
  const double p = std::strtod(buf, nullptr);
  return int64_t(double(head_dim) * p);
}

// The shapes and the table, checked on the host before either device rotates.
void check_rope(int64_t b, int64_t a, int64_t s, int64_t d, const RopeTable& t, int64_t pos0,
                const char* who) {
  MT_CHECK(b >= 0 && a >= 0 && s >= 0 && d > 0, who, ": bad shape b=", b, " a=", a, " s=", s,
           " d=", d, "; fix: pass x as (b, a, s, d) with d the head dimension");
  MT_CHECK(t.rot_dim > 0 && t.rot_dim % 2 == 0 &&
               int64_t(t.cos.size()) == t.max_pos * (t.rot_dim / 2) && t.sin.size() == t.cos.size(),
           who, ": RoPE table not built (rot_dim=", t.rot_dim, ", max_pos=", t.max_pos,
           "); fix: make it with make_rope_table");
  MT_CHECK(d >= t.rot_dim, who, ": head dimension d=", d, " is smaller than the table's rot_dim=",
           t.rot_dim, "; fix: build the table with this model's head dimension (kv-channels)");
  MT_CHECK(pos0 >= 0 && pos0 + s <= t.max_pos, who, ": positions [", pos0, ", ", pos0 + s,
           ") exceed the RoPE table's max_pos=", t.max_pos,
           "; fix: raise --max-position-embeddings to at least ", pos0 + s,
           " or shorten the sequence");
}

// In place on x (b, a, s, d): y1 = x1 cos - x2 sin_sign, y2 = x2 cos + x1 sin_sign
// with sin_sign = sign * sin; sign -1 is the inverse rotation. Row (bi, j, t)
// is at position pos(bi, t).
template <class Pos>
void rotate(float* x, int64_t b, int64_t a, int64_t s, int64_t d, const RopeTable& t, Pos pos,
            float sign) {
  const int64_t half = t.rot_dim / 2, rows = b * a * s;
  const float* cos = t.cos.data();  // (the rows capture pointers, not the table)
  const float* sin = t.sin.data();
  const Isa isa = active_isa();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) on_isa(isa, [=] {
    float* x1 = x + r * d;
    float* x2 = x1 + half;
    const int64_t p = pos(r / (a * s), r % s);
    const float* cs = cos + p * half;
    const float* sn = sin + p * half;
#pragma omp simd
    for (int64_t i = 0; i < half; ++i) {
      const float u = x1[i], v = x2[i], c = cs[i], si = sign * sn[i];
      x1[i] = u * c - v * si;
      x2[i] = v * c + u * si;
    }
  });
}

void rotate(float* x, int64_t b, int64_t a, int64_t s, int64_t d, const RopeTable& t,
            int64_t pos0, float sign) {
  rotate(x, b, a, s, d, t, [pos0](int64_t, int64_t row) { return pos0 + row; }, sign);
}

// Per-token positions: checked against the table, on the CPU.
void rotate_at(float* x, int64_t b, int64_t a, int64_t s, int64_t d, const RopeTable& t,
               const int32_t* positions, float sign, const char* who) {
  check_rope(b, a, s, d, t, 0, who);
  MT_CHECK(positions != nullptr && !MT_ON_DEVICE(x), who,
           ": per-token positions (--reset-position-ids) are built for the CPU only, not the "
           "CUDA kernels; fix: run on the CPU, or leave out --reset-position-ids");
  for (int64_t i = 0; i < s * b; ++i)
    MT_CHECK(positions[i] >= 0 && positions[i] < t.max_pos, who, ": position ", positions[i],
             " is outside the RoPE table's [0, ", t.max_pos,
             "); fix: raise --max-position-embeddings");
  rotate(x, b, a, s, d, t,
         [positions, b](int64_t bi, int64_t row) { return int64_t(positions[row * b + bi]); },
         sign);
}
}  // namespace

RopeTable make_rope_table(int64_t max_pos, int64_t head_dim, float rotary_percent, float base,
                          const RopeScaling& scaling) {
  MT_CHECK(max_pos > 0, "make_rope_table: max_pos=", max_pos,
           " must be > 0; fix: set --max-position-embeddings");
  MT_CHECK(head_dim > 0, "make_rope_table: head_dim=", head_dim,
           " must be > 0; fix: check --kv-channels / hidden size and heads");
  MT_CHECK(rotary_percent > 0.f && rotary_percent <= 1.f, "make_rope_table: --rotary-percent=",
           rotary_percent, " must be in (0, 1]; fix: use e.g. 1.0 or 0.5");
  MT_CHECK(std::isfinite(base) && base > 0.f, "make_rope_table: rotary base=", base,
           " must be > 0; fix: use e.g. --rotary-base 10000");
  const int64_t rot_dim = rotary_dim(head_dim, rotary_percent);
  MT_CHECK(rot_dim > 0 && rot_dim % 2 == 0, "make_rope_table: rotary dimension int(head_dim ",
           head_dim, " * --rotary-percent ", rotary_percent, ") = ", rot_dim,
           " must be even and > 0; fix: choose --rotary-percent so that it is");
  RopeTable t;
  t.max_pos = max_pos;
  t.rot_dim = rot_dim;
  const int64_t half = rot_dim / 2;
  std::vector<float> inv_freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i)  // std::pow(float, float) is powf
    inv_freq[size_t(i)] = 1.0f / std::pow(base, float(2 * i) / float(rot_dim));
  rope_scale_inv_freq(inv_freq.data(), half, scaling, base);
  const float factor = rope_cos_sin_factor(scaling);  // YaRN's concentration factor, else 1
  t.cos.resize(size_t(max_pos * half));
  t.sin.resize(size_t(max_pos * half));
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < max_pos; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const float angle = float(p) * inv_freq[size_t(i)];  // float32 product, as torch.outer
      t.cos[size_t(p * half + i)] = float(std::cos(double(angle))) * factor;
      t.sin[size_t(p * half + i)] = float(std::sin(double(angle))) * factor;
    }
  return t;
}

// x (b, a, s, d) =, in place
void rope_forward(float* x, int64_t b, int64_t a, int64_t s, int64_t d, const RopeTable& t,
                  int64_t pos0) {
  check_rope(b, a, s, d, t, pos0, "rope_forward");
  if (MT_ON_DEVICE(x)) return cuda::rope_forward(x, b, a, s, d, t, pos0);
  rotate(x, b, a, s, d, t, pos0, 1.f);
}

// dx (b, a, s, d) =, in place
void rope_backward(float* dx, int64_t b, int64_t a, int64_t s, int64_t d, const RopeTable& t,
                   int64_t pos0) {
  check_rope(b, a, s, d, t, pos0, "rope_backward");
  if (MT_ON_DEVICE(dx)) return cuda::rope_backward(dx, b, a, s, d, t, pos0);
  rotate(dx, b, a, s, d, t, pos0, -1.f);
}

void rope_forward_at(float* x, int64_t b, int64_t a, int64_t s, int64_t d, const RopeTable& t,
                     const int32_t* positions) {
  rotate_at(x, b, a, s, d, t, positions, 1.f, "rope_forward_at");
}

void rope_backward_at(float* dx, int64_t b, int64_t a, int64_t s, int64_t d, const RopeTable& t,
                      const int32_t* positions) {
  rotate_at(dx, b, a, s, d, t, positions, -1.f, "rope_backward_at");
}

}  // namespace mt
