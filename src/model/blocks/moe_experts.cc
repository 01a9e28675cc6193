// The experts' forward and backward over the dispatched rows
// (moe_experts.h): per expert, or grouped (--moe-grouped-gemm).
#include "model/blocks/moe_experts.h"

#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "kernels/matmul.h"
#include "kernels/swiglu.h"
#include "model/blocks/moe_dispatch.h"

namespace mt {

namespace {

// Elements from expert 0's tensor to expert 1's in the flat buffer (the
// experts' same-named tensors are evenly spaced: the registry lays each
// expert's tensors out in the same order); checked for all.
template <class P, class Get>
int64_t expert_stride(const std::vector<ExpertParams<P>>& ex, Get get, int64_t numel) {
  if (ex.size() < 2) return numel;  // one expert: its own size
  auto addr = [&](size_t i) {
    if constexpr (std::is_same_v<P, ReadView>) {
      const ReadView v = get(ex[i]);
      return v.bf16 ? reinterpret_cast<intptr_t>(v.bf16) / 2
                    : reinterpret_cast<intptr_t>(v.f32) / 4;
    } else {
      return reinterpret_cast<intptr_t>(get(ex[i])) / 4;
    }
  };
  const int64_t stride = int64_t(addr(1) - addr(0));
  for (size_t i = 2; i < ex.size(); ++i)
    MT_CHECK(int64_t(addr(i) - addr(i - 1)) == stride,
             "--moe-grouped-gemm: experts' weights are not evenly spaced (internal error)");
  return stride;
}

// The local experts as one batched product per linear (--moe-grouped-gemm).
// act = the activation of fc1 over each local expert's rows (grouped: all of
// them at once), as the experts' forward runs it.
void experts_activation(WriteView act, const MoeRecord& rec, const GptShapes& sh) {
  const MoeShapes& m = moe_of(sh);
  const auto activation = [&](WriteView out, ReadView in, int64_t rows) {
    if (sh.swiglu)
      swiglu_forward(out, in, rows, m.f);
    else
      plain_activation_forward(sh, out, in, rows * m.f);
  };
  if (m.grouped) {
    const int64_t all = m.local * expert_rows(rec, sh, 0).padded;
    if (all > 0) activation(act, rec.fc1, all);
    return;
  }
  for (int64_t i = 0; i < m.local; ++i) {
    const ExpertRows er = expert_rows(rec, sh, i);
    if (er.padded > 0) activation(act.at(er.begin * m.f), rec.fc1.at(er.begin * m.f_in), er.padded);
  }
}

void grouped_experts_forward(MoeRecord& rec, WriteView act, const MoeParams<ReadView>& w,
                             const GptShapes& sh) {
  const MoeShapes& m = moe_of(sh);
  const int64_t rows = expert_rows(rec, sh, 0).padded;
  if (rows == 0) return;
  const auto fc1 = [](const ExpertParams<ReadView>& e) { return e.fc1_w; };
  const auto fc2 = [](const ExpertParams<ReadView>& e) { return e.fc2_w; };
  grouped_linear_forward(rec.fc1, rec.xin, w.experts[0].fc1_w,
                         expert_stride(w.experts, fc1, m.f_in * sh.h), m.local, rows, sh.h, m.f_in,
                         sh.cm);
  experts_activation(act, rec, sh);
  grouped_linear_forward(rec.y, act, w.experts[0].fc2_w,
                         expert_stride(w.experts, fc2, sh.h * m.f), m.local, rows, m.f, sh.h,
                         sh.cm);
}

void grouped_experts_backward(float* dxin, const MoeParams<float*>& g, const float* dy,
                              const MoeRecord& rec, ReadView act, MoeWorkspace& ws,
                              const MoeParams<ReadView>& w, const GptShapes& sh) {
  const MoeShapes& m = moe_of(sh);
  const int64_t rows = expert_rows(rec, sh, 0).padded, all = m.local * rows;
  if (rows == 0) return;
  const auto fc1 = [](const ExpertParams<ReadView>& e) { return e.fc1_w; };
  const auto fc2 = [](const ExpertParams<ReadView>& e) { return e.fc2_w; };
  const auto gfc1 = [](const ExpertParams<float*>& e) { return e.fc1_w; };
  const auto gfc2 = [](const ExpertParams<float*>& e) { return e.fc2_w; };
  grouped_linear_backward(ws.dact, g.experts[0].fc2_w, expert_stride(g.experts, gfc2, sh.h * m.f),
                          dy, act, w.experts[0].fc2_w,
                          expert_stride(w.experts, fc2, sh.h * m.f), m.local, rows, m.f, sh.h,
                          sh.cm);
  float* dfc1 = ws.dact;
  if (sh.swiglu) {
    dfc1 = ws.dfc_in;
    swiglu_backward(dfc1, rec.fc1, ws.dact, all, m.f);
  } else {
    plain_activation_backward(sh, ws.dact, rec.fc1, ws.dact, all * m.f);
  }
  grouped_linear_backward(dxin, g.experts[0].fc1_w, expert_stride(g.experts, gfc1, m.f_in * sh.h),
                          dfc1, rec.xin, w.experts[0].fc1_w,
                          expert_stride(w.experts, fc1, m.f_in * sh.h), m.local, rows, sh.h, m.f_in,
                          sh.cm);
}

}  // namespace

void experts_forward(MoeRecord& rec, WriteView act, const MoeParams<ReadView>& w,
                     const GptShapes& sh) {
  const MoeShapes& m = moe_of(sh);
  if (m.grouped) return grouped_experts_forward(rec, act, w, sh);
  for (int64_t i = 0; i < m.local; ++i) {
    const ExpertRows er = expert_rows(rec, sh, i);
    if (er.padded == 0) continue;  // an expert without tokens
    const ExpertParams<ReadView>& e = w.experts[size_t(i)];
    linear_forward(rec.fc1.at(er.begin * m.f_in), rec.xin.at(er.begin * sh.h), e.fc1_w, e.fc1_b,
                   er.padded, sh.h, m.f_in, sh.cm);
  }
  experts_activation(act, rec, sh);
  for (int64_t i = 0; i < m.local; ++i) {
    const ExpertRows er = expert_rows(rec, sh, i);
    if (er.padded == 0) continue;
    const ExpertParams<ReadView>& e = w.experts[size_t(i)];
    linear_forward(rec.y.at(er.begin * sh.h), act.at(er.begin * m.f), e.fc2_w, e.fc2_b, er.padded,
                   m.f, sh.h, sh.cm);
  }
}

void experts_backward(float* dxin, const MoeParams<float*>& g, const float* dy,
                      const MoeRecord& rec, MoeWorkspace& ws, const MoeParams<ReadView>& w,
                      const GptShapes& sh) {
  const MoeShapes& m = moe_of(sh);
  if (rec.recompute_act) experts_activation(ws.act, rec, sh);
  const ReadView act = rec.recompute_act ? ws.act : rec.act;
  if (m.grouped) return grouped_experts_backward(dxin, g, dy, rec, act, ws, w, sh);
  for (int64_t i = 0; i < m.local; ++i) {
    const ExpertRows er = expert_rows(rec, sh, i);
    const int64_t rows = er.padded;
    if (rows == 0) continue;
    const ExpertParams<ReadView>& e = w.experts[size_t(i)];
    const ExpertParams<float*>& ge = g.experts[size_t(i)];
    const ReadView fc1 = rec.fc1.at(er.begin * m.f_in);
    float* dact = ws.dact + er.begin * m.f;
    linear_backward(dact, ge.fc2_w, ge.fc2_b, dy + er.begin * sh.h, act.at(er.begin * m.f),
                    e.fc2_w, rows, m.f, sh.h, false, sh.cm);
    float* dfc1 = dact;
    if (sh.swiglu) {
      dfc1 = ws.dfc_in + er.begin * m.f_in;
      swiglu_backward(dfc1, fc1, dact, rows, m.f);
    } else {
      plain_activation_backward(sh, dact, fc1, dact, rows * m.f);
    }
    linear_backward(dxin + er.begin * sh.h, ge.fc1_w, ge.fc1_b, dfc1, rec.xin.at(er.begin * sh.h),
                    e.fc1_w, rows, sh.h, m.f_in, false, sh.cm);
  }
}

}  // namespace mt
