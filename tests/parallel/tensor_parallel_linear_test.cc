// Equivalence tests of ColumnParallelLinear / RowParallelLinear on the whole
// MPI world as the TP group (plain run = world 1; CTest also runs them under
// `mpirun -n 2` and `-n 4`), with and without sequence parallelism. Every rank
// builds the same full inputs and weights from a fixed seed, computes the
// unsharded layer with plain linear_forward / linear_backward, takes its
// shard, runs the parallel function and compares:
//   column-parallel  out = the column block of Y; dinput = dX (or its slab with
//                    SP); dweight / dbias = the row block of dW / db;
//   row-parallel     out = Y (or its slab with SP); dinput = the column block
//                    of dX; dweight = the column block of dW; dbias = db
//                    (with SP after an all-reduce over TP).
// plus a two-layer MLP (column → gelu → row) against the unsharded MLP.
// Parameter gradients are pre-filled to check they accumulate (`+=`); dinput
// and outputs are pre-filled with garbage to check they are overwritten (`=`).
// All ranks make the same collective calls whatever fails.
#include "parallel_test_util.h"
#include "parallel/tensor_parallel_linear.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/gelu.h"
#include "kernels/matmul.h"
#include "kernels/precision.h"

namespace mt {
namespace tensor_parallel_linear_test {

constexpr int64_t kS = 8, kB = 2, kN = kS * kB;  // tokens, sequence-first (s, b)
constexpr int64_t kIn = 12, kOut = 16;           // divisible by 1, 2, 4

Vec filled(int64_t n, float value) { return Vec(static_cast<size_t>(n), value); }

Vec plus(const Vec& a, const Vec& b) {
  Vec c(a.size());
  for (size_t i = 0; i < a.size(); ++i) c[i] = a[i] + b[i];
  return c;
}

// One unsharded linear layer and its gradients, computed on every rank.
struct FullLinear {
  int64_t in, out;
  Vec x, w, b, dy;      // x (n, in), w (out, in), b (out), dy (n, out)
  Vec y, dx, dw, db;    // y (n, out), dx (n, in), dw (out, in), db (out)
};

FullLinear full_linear(int64_t in, int64_t out, uint32_t seed) {
  FullLinear f{in, out, random_vec(kN * in, seed), random_vec(out * in, seed + 1),
               random_vec(out, seed + 2), random_vec(kN * out, seed + 3),
               filled(kN * out, 0), filled(kN * in, 0), filled(out * in, 0), filled(out, 0)};
  linear_forward(f.y.data(), f.x.data(), f.w.data(), f.b.data(), kN, in, out);
  linear_backward(f.dx.data(), f.dw.data(), f.db.data(), f.dy.data(), f.x.data(), f.w.data(),
                  kN, in, out);
  return f;
}

class TpLinear : public ::testing::TestWithParam<bool> {};  // param: sequence_parallel

TEST_P(TpLinear, ColumnParallelMatchesFullLinear) {
  Communicator comm = Communicator::world();
  const bool sp = GetParam();
  const TensorParallel tp{&comm, sp};
  const int64_t t = comm.size(), r = comm.rank();
  const int64_t out_l = kOut / t, n_l = kN / t;
  const FullLinear f = full_linear(kIn, kOut, 1000);

  const Vec w = rows_of(f.w, kIn, r * out_l, out_l);              // (out/tp, in)
  const Vec b = rows_of(f.b, 1, r * out_l, out_l);                // (out/tp)
  const Vec x = sp ? rows_of(f.x, kIn, r * n_l, n_l) : f.x;       // (n or n/tp, in)
  Vec out = filled(kN * out_l, kGarbage), gathered = filled(kN * kIn, kGarbage);
  column_parallel_linear_forward(out.data(), gathered.data(), x.data(), w.data(), b.data(), kN,
                                 kIn, out_l, tp);
  expect_close(out, cols_of(f.y, kN, kOut, r * out_l, out_l), "column fwd out");

  const Vec dout = cols_of(f.dy, kN, kOut, r * out_l, out_l);    // (n, out/tp)
  const Vec dw0 = random_vec(out_l * kIn, 77), db0 = random_vec(out_l, 78);
  Vec dx = filled(x.size(), kGarbage), dw = dw0, db = db0, dfull = filled(kN * kIn, kGarbage);
  // Without SP the header allows dfull to alias dinput: exercise that.
  column_parallel_linear_backward(dx.data(), dw.data(), db.data(), gathered.data(),
                                  sp ? dfull.data() : dx.data(), dout.data(), x.data(), w.data(),
                                  kN, kIn, out_l, tp);
  expect_close(dx, sp ? rows_of(f.dx, kIn, r * n_l, n_l) : f.dx, "column bwd dinput");
  expect_close(dw, plus(dw0, rows_of(f.dw, kIn, r * out_l, out_l)), "column bwd dweight");
  expect_close(db, plus(db0, rows_of(f.db, 1, r * out_l, out_l)), "column bwd dbias");
}

TEST_P(TpLinear, RowParallelMatchesFullLinear) {
  Communicator comm = Communicator::world();
  const bool sp = GetParam();
  const TensorParallel tp{&comm, sp};
  const int64_t t = comm.size(), r = comm.rank();
  const int64_t in_l = kIn / t, n_l = kN / t, rows = sp ? n_l : kN;
  const FullLinear f = full_linear(kIn, kOut, 2000);

  const Vec w = cols_of(f.w, kOut, kIn, r * in_l, in_l);         // (out, in/tp)
  const Vec x = cols_of(f.x, kN, kIn, r * in_l, in_l);           // (n, in/tp)
  Vec out = filled(rows * kOut, kGarbage), partial = filled(kN * kOut, kGarbage);
  // Without SP the header allows partial to alias out: exercise that.
  row_parallel_linear_forward(out.data(), sp ? partial.data() : out.data(), x.data(), w.data(),
                              f.b.data(), kN, in_l, kOut, tp);
  expect_close(out, sp ? rows_of(f.y, kOut, r * n_l, n_l) : f.y, "row fwd out");

  const Vec dout = sp ? rows_of(f.dy, kOut, r * n_l, n_l) : f.dy;  // (n or n/tp, out)
  const Vec dw0 = random_vec(kOut * in_l, 87), db0 = random_vec(kOut, 88);  // same on all ranks
  Vec dx = filled(kN * in_l, kGarbage), dw = dw0, db = db0, dfull = filled(kN * kOut, kGarbage);
  row_parallel_linear_backward(dx.data(), dw.data(), db.data(), dfull.data(), dout.data(),
                               x.data(), w.data(), kN, in_l, kOut, tp);
  expect_close(dx, cols_of(f.dx, kN, kIn, r * in_l, in_l), "row bwd dinput");
  expect_close(dw, plus(dw0, cols_of(f.dw, kOut, kIn, r * in_l, in_l)), "row bwd dweight");
  if (sp) {
    // Each rank's dbias holds db0 + the sum over its slab: after the all-reduce
    // over TP (done by the caller, as for LayerNorm weights) tp·db0 + db.
    comm.all_reduce_sum(db.data(), kOut);
    Vec want = f.db;
    for (int64_t j = 0; j < kOut; ++j) want[j] += float(t) * db0[j];
    expect_close(db, want, "row bwd dbias (SP, all-reduced)");
  } else {
    expect_close(db, plus(db0, f.db), "row bwd dbias");
  }
}

// Column-parallel FC1 → gelu → row-parallel FC2 (Megatron's MLP: one
// all-reduce, or with SP one all-gather and one reduce-scatter, per pass)
// equals the unsharded MLP, forward and every gradient.
TEST_P(TpLinear, ColumnGeluRowMlpMatchesFullMlp) {
  Communicator comm = Communicator::world();
  const bool sp = GetParam();
  const TensorParallel tp{&comm, sp};
  const int64_t t = comm.size(), r = comm.rank();
  constexpr int64_t kH = kIn, kF = kOut;  // hidden h, ffn f
  const int64_t f_l = kF / t, n_l = kN / t, rows = sp ? n_l : kN;

  // Unsharded MLP: y1 = x·W1ᵀ + b1, a = gelu(y1), y = a·W2ᵀ + b2.
  const Vec x = random_vec(kN * kH, 3000), w1 = random_vec(kF * kH, 3001),
            b1 = random_vec(kF, 3002), w2 = random_vec(kH * kF, 3003),
            b2 = random_vec(kH, 3004), dy = random_vec(kN * kH, 3005);
  Vec y1 = filled(kN * kF, 0), a = filled(kN * kF, 0), y = filled(kN * kH, 0);
  linear_forward(y1.data(), x.data(), w1.data(), b1.data(), kN, kH, kF);
  gelu_forward(a.data(), y1.data(), kN * kF);
  linear_forward(y.data(), a.data(), w2.data(), b2.data(), kN, kF, kH);
  Vec da = filled(kN * kF, 0), dw2 = filled(kH * kF, 0), db2 = filled(kH, 0);
  Vec dy1 = filled(kN * kF, 0), dx = filled(kN * kH, 0), dw1 = filled(kF * kH, 0),
      db1 = filled(kF, 0);
  linear_backward(da.data(), dw2.data(), db2.data(), dy.data(), a.data(), w2.data(), kN, kF, kH);
  gelu_backward(dy1.data(), y1.data(), da.data(), kN * kF);
  linear_backward(dx.data(), dw1.data(), db1.data(), dy1.data(), x.data(), w1.data(), kN, kH, kF);

  // Shards: W1 rows, b1 rows, W2 columns; b2 replicated.
  const Vec w1_l = rows_of(w1, kH, r * f_l, f_l), b1_l = rows_of(b1, 1, r * f_l, f_l);
  const Vec w2_l = cols_of(w2, kH, kF, r * f_l, f_l);
  const Vec x_in = sp ? rows_of(x, kH, r * n_l, n_l) : x;
  Vec gathered = filled(kN * kH, kGarbage), y1_l = filled(kN * f_l, kGarbage),
      a_l = filled(kN * f_l, kGarbage), y_out = filled(rows * kH, kGarbage),
      partial = filled(kN * kH, kGarbage);
  column_parallel_linear_forward(y1_l.data(), gathered.data(), x_in.data(), w1_l.data(),
                                 b1_l.data(), kN, kH, f_l, tp);
  gelu_forward(a_l.data(), y1_l.data(), kN * f_l);
  row_parallel_linear_forward(y_out.data(), partial.data(), a_l.data(), w2_l.data(), b2.data(),
                              kN, f_l, kH, tp);
  expect_close(y_out, sp ? rows_of(y, kH, r * n_l, n_l) : y, "mlp fwd out");

  const Vec dy_in = sp ? rows_of(dy, kH, r * n_l, n_l) : dy;
  Vec da_l = filled(kN * f_l, kGarbage), dw2_l = filled(kH * f_l, 0), db2_p = filled(kH, 0),
      dfull2 = filled(kN * kH, kGarbage);
  row_parallel_linear_backward(da_l.data(), dw2_l.data(), db2_p.data(), dfull2.data(),
                               dy_in.data(), a_l.data(), w2_l.data(), kN, f_l, kH, tp);
  if (sp) comm.all_reduce_sum(db2_p.data(), kH);
  gelu_backward(da_l.data(), y1_l.data(), da_l.data(), kN * f_l);  // in place: now dy1_l
  Vec dx_l = filled(x_in.size(), kGarbage), dw1_l = filled(f_l * kH, 0), db1_l = filled(f_l, 0),
      dfull1 = filled(kN * kH, kGarbage);
  column_parallel_linear_backward(dx_l.data(), dw1_l.data(), db1_l.data(), gathered.data(),
                                  dfull1.data(), da_l.data(), x_in.data(), w1_l.data(), kN, kH,
                                  f_l, tp);

  expect_close(da_l, cols_of(dy1, kN, kF, r * f_l, f_l), "mlp bwd d(fc1 out)");
  expect_close(dx_l, sp ? rows_of(dx, kH, r * n_l, n_l) : dx, "mlp bwd dx");
  expect_close(dw1_l, rows_of(dw1, kH, r * f_l, f_l), "mlp bwd dW1");
  expect_close(db1_l, rows_of(db1, 1, r * f_l, f_l), "mlp bwd db1");
  expect_close(dw2_l, cols_of(dw2, kH, kF, r * f_l, f_l), "mlp bwd dW2");
  expect_close(db2_p, db2, "mlp bwd db2");
}

// Mixed precision passes through: with cm.math = bf16 (weights from a bf16
// shadow of the shard) both layers equal the unsharded bf16 linear layer, which
// itself differs from fp32. Elementwise rounding does not depend on the
// sharding, so only the fp32 summation order of the row-parallel reduction
// differs.
TEST_P(TpLinear, Bf16ShardsMatchFullBf16Linear) {
  Communicator comm = Communicator::world();
  const bool sp = GetParam();
  const TensorParallel tp{&comm, sp};
  const int64_t t = comm.size(), r = comm.rank(), n_l = kN / t;
  const FullLinear f = full_linear(kIn, kOut, 5000);  // fp32
  Compute full_cm;
  full_cm.math = MathMode::kBF16;
  Vec y = filled(kN * kOut, 0), dx = filled(kN * kIn, 0), dw = filled(kOut * kIn, 0),
      db = filled(kOut, 0);
  linear_forward(y.data(), f.x.data(), f.w.data(), f.b.data(), kN, kIn, kOut, full_cm);
  linear_backward(dx.data(), dw.data(), db.data(), f.dy.data(), f.x.data(), f.w.data(), kN, kIn,
                  kOut, false, full_cm);
  double off = 0;  // bf16 vs fp32, relative to the largest output
  double scale = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    off = std::max(off, double(std::fabs(y[i] - f.y[i])));
    scale = std::max(scale, double(std::fabs(f.y[i])));
  }
  EXPECT_GT(off, 1e-4 * scale) << "the bf16 linear layer equals the fp32 one";

  // A bf16 run's weights: bf16 storage, what the kernels read.
  auto stored_bf16 = [](const Vec& w, std::vector<uint16_t>* w16) {
    w16->resize(w.size());
    f32_to_bf16(w16->data(), w.data(), int64_t(w.size()));
    return ReadView(w16->data());
  };
  Compute cm;
  cm.math = MathMode::kBF16;
  std::vector<uint16_t> w16;
  {  // column-parallel
    const int64_t out_l = kOut / t;
    const Vec w = rows_of(f.w, kIn, r * out_l, out_l), b = rows_of(f.b, 1, r * out_l, out_l);
    const Vec x = sp ? rows_of(f.x, kIn, r * n_l, n_l) : f.x;
    const ReadView wr = stored_bf16(w, &w16);
    Vec out = filled(kN * out_l, kGarbage), gathered = filled(kN * kIn, kGarbage);
    column_parallel_linear_forward(out.data(), gathered.data(), x.data(), wr, b.data(), kN,
                                   kIn, out_l, tp, cm);
    expect_close(out, cols_of(y, kN, kOut, r * out_l, out_l), "bf16 column fwd");
    const Vec dout = cols_of(f.dy, kN, kOut, r * out_l, out_l);
    Vec dxl = filled(x.size(), kGarbage), dwl = filled(out_l * kIn, 0), dbl = filled(out_l, 0),
        dfull = filled(kN * kIn, kGarbage);
    column_parallel_linear_backward(dxl.data(), dwl.data(), dbl.data(), gathered.data(),
                                    dfull.data(), dout.data(), x.data(), wr, kN, kIn, out_l,
                                    tp, cm);
    expect_close(dxl, sp ? rows_of(dx, kIn, r * n_l, n_l) : dx, "bf16 column bwd dinput");
    expect_close(dwl, rows_of(dw, kIn, r * out_l, out_l), "bf16 column bwd dweight");
  }
  {  // row-parallel
    const int64_t in_l = kIn / t, rows = sp ? n_l : kN;
    const Vec w = cols_of(f.w, kOut, kIn, r * in_l, in_l), x = cols_of(f.x, kN, kIn, r * in_l, in_l);
    const ReadView wr = stored_bf16(w, &w16);
    Vec out = filled(rows * kOut, kGarbage), partial = filled(kN * kOut, kGarbage);
    row_parallel_linear_forward(out.data(), partial.data(), x.data(), wr, f.b.data(), kN,
                                in_l, kOut, tp, cm);
    expect_close(out, sp ? rows_of(y, kOut, r * n_l, n_l) : y, "bf16 row fwd");
    const Vec dout = sp ? rows_of(f.dy, kOut, r * n_l, n_l) : f.dy;
    Vec dxl = filled(kN * in_l, kGarbage), dwl = filled(kOut * in_l, 0), dbl = filled(kOut, 0),
        dfull = filled(kN * kOut, kGarbage);
    row_parallel_linear_backward(dxl.data(), dwl.data(), dbl.data(), dfull.data(), dout.data(),
                                 x.data(), wr, kN, in_l, kOut, tp, cm);
    expect_close(dxl, cols_of(dx, kN, kIn, r * in_l, in_l), "bf16 row bwd dinput");
    expect_close(dwl, cols_of(dw, kOut, kIn, r * in_l, in_l), "bf16 row bwd dweight");
  }
}

INSTANTIATE_TEST_SUITE_P(SequenceParallel, TpLinear, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return i.param ? "Sp" : "NoSp";
                         });

// Without a group (tp == nullptr, size 1) both layers are plain linear layers,
// whatever sequence_parallel says.
TEST(TpLinearNoGroup, BothLayersArePlainLinear) {
  const FullLinear f = full_linear(kIn, kOut, 4000);
  for (bool sp : {false, true}) {
    const TensorParallel tp{nullptr, sp};
    EXPECT_EQ(tp.size(), 1);
    Vec out = filled(kN * kOut, kGarbage), ws = filled(kN * kOut, kGarbage),
        gathered = filled(kN * kIn, kGarbage);
    column_parallel_linear_forward(out.data(), gathered.data(), f.x.data(), f.w.data(),
                                   f.b.data(), kN, kIn, kOut, tp);
    expect_close(out, f.y, "column fwd, no group");
    std::fill(out.begin(), out.end(), kGarbage);
    row_parallel_linear_forward(out.data(), ws.data(), f.x.data(), f.w.data(), f.b.data(), kN,
                                kIn, kOut, tp);
    expect_close(out, f.y, "row fwd, no group");

    Vec dx = filled(kN * kIn, kGarbage), dw = filled(kOut * kIn, 0), db = filled(kOut, 0),
        dfull = filled(kN * kIn, kGarbage);
    column_parallel_linear_backward(dx.data(), dw.data(), db.data(), gathered.data(),
                                    dfull.data(), f.dy.data(), f.x.data(), f.w.data(), kN, kIn,
                                    kOut, tp);
    expect_close(dx, f.dx, "column bwd dx, no group");
    expect_close(dw, f.dw, "column bwd dW, no group");
    expect_close(db, f.db, "column bwd db, no group");
    std::fill(dx.begin(), dx.end(), kGarbage);
    std::fill(dw.begin(), dw.end(), 0.f);
    std::fill(db.begin(), db.end(), 0.f);
    row_parallel_linear_backward(dx.data(), dw.data(), db.data(), ws.data(), f.dy.data(),
                                 f.x.data(), f.w.data(), kN, kIn, kOut, tp);
    expect_close(dx, f.dx, "row bwd dx, no group");
    expect_close(dw, f.dw, "row bwd dW, no group");
    expect_close(db, f.db, "row bwd db, no group");
  }
}

}  // namespace tensor_parallel_linear_test
}  // namespace mt
