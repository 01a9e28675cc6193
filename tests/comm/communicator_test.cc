// Collectives on the real MPI world: run plain (world 1) and under
// `mpirun -n 2` by CTest. Every expected value is written for any world size.
// All ranks make the same sequence of collective calls, whatever fails, so a
// failing check on one rank never leaves another hanging.
#include "comm/communicator.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstring>
#include <string>
#include <vector>

#include "comm/mpi_backend.h"
#include "core/error.h"
#include "error_of.h"

namespace mt {
namespace communicator_test {

using test::error_of;

TEST(Communicator, WorldMatchesMpi) {
  Communicator world = Communicator::world();
  int r = 0, s = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  EXPECT_EQ(world.rank(), r);
  EXPECT_EQ(world.size(), s);
  EXPECT_EQ(world.name(), "world");
  EXPECT_TRUE(world.is_member());
}

TEST(Communicator, AllReduceSumAndMax) {
  Communicator c = Communicator::world();
  const int r = c.rank(), w = c.size();
  const int n = 7;
  std::vector<float> f(n);
  std::vector<double> d(n);
  std::vector<int64_t> l(n);
  for (int i = 0; i < n; ++i) {
    f[i] = float(r + 1) * 0.5f + float(i);
    d[i] = double(r) * 1e-3 + double(i);
    l[i] = int64_t(r + 1) << 33;
  }
  c.all_reduce_sum(f.data(), n);
  c.all_reduce_sum(d.data(), n);
  c.all_reduce_sum(l.data(), n);
  const double rank_sum = double(w) * double(w - 1) / 2;
  for (int i = 0; i < n; ++i) {
    EXPECT_FLOAT_EQ(f[i], float(0.5 * (rank_sum + w) + double(w) * i)) << i;
    EXPECT_NEAR(d[i], rank_sum * 1e-3 + double(w) * i, 1e-12) << i;
    EXPECT_EQ(l[i], int64_t(rank_sum + w) << 33) << i;
  }

  std::vector<float> fm(n);
  std::vector<double> dm(n);
  std::vector<int> im(n);
  for (int i = 0; i < n; ++i) {
    fm[i] = float(r * 10 + i) * (i % 2 ? -1.0f : 1.0f);  // max of negatives: rank 0's
    dm[i] = double(r) - 0.25 * i;
    im[i] = -r + i;
  }
  c.all_reduce_max(fm.data(), n);
  c.all_reduce_max(dm.data(), n);
  c.all_reduce_max(im.data(), n);
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(fm[i], i % 2 ? -float(i) : float((w - 1) * 10 + i)) << i;
    EXPECT_EQ(dm[i], double(w - 1) - 0.25 * i) << i;
    EXPECT_EQ(im[i], i) << i;
  }
}

TEST(Communicator, LargeAllReduce) {
  Communicator c = Communicator::world();
  const int64_t n = int64_t(1) << 20;
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[size_t(i)] = float(i % 1000) + float(c.rank());
  c.all_reduce_sum(x.data(), n);
  const float rank_sum = float(c.size() * (c.size() - 1) / 2);
  int bad = 0;
  for (int64_t i = 0; i < n; ++i)
    bad += x[size_t(i)] != float(c.size()) * float(i % 1000) + rank_sum;
  EXPECT_EQ(bad, 0);
}

TEST(Communicator, AllGatherAndReduceScatter) {
  Communicator c = Communicator::world();
  const int r = c.rank(), w = c.size();
  const int n = 5;
  std::vector<float> in(n), out(size_t(n * w), -1.0f);
  for (int j = 0; j < n; ++j) in[j] = float(100 * r + j);
  c.all_gather(out.data(), in.data(), n);
  for (int q = 0; q < w; ++q)
    for (int j = 0; j < n; ++j) EXPECT_EQ(out[size_t(q * n + j)], float(100 * q + j));

  // In place: this rank's chunk already sits in the output.
  std::vector<float> buf(size_t(n * w), -1.0f);
  for (int j = 0; j < n; ++j) buf[size_t(r * n + j)] = float(7 * r + j);
  c.all_gather(buf.data(), buf.data() + r * n, n);
  for (int q = 0; q < w; ++q)
    for (int j = 0; j < n; ++j) EXPECT_EQ(buf[size_t(q * n + j)], float(7 * q + j));

  // in[k] = k + rank over size * n elements; chunk `rank` of the sum.
  std::vector<float> full(size_t(n * w)), mine(n, -1.0f);
  for (int k = 0; k < n * w; ++k) full[size_t(k)] = float(k + r);
  c.reduce_scatter_sum(mine.data(), full.data(), n);
  for (int j = 0; j < n; ++j) EXPECT_EQ(mine[j], float(w * (r * n + j) + w * (w - 1) / 2)) << j;
}

// Rank r sends (r + 1) * (j + 1) % 4 elements to rank j (some zero), each
// value naming sender, receiver and position; counts exchanged first.
TEST(Communicator, AllToAllVariableCounts) {
  Communicator c = Communicator::world();
  const int r = c.rank(), w = c.size();
  std::vector<int64_t> send_counts(static_cast<size_t>(w), 0);
  for (int j = 0; j < w; ++j) send_counts[size_t(j)] = (r + 1) * (j + 1) % 4;
  const std::vector<int64_t> recv_counts = c.all_to_all_counts(send_counts);
  for (int i = 0; i < w; ++i) EXPECT_EQ(recv_counts[size_t(i)], (i + 1) * (r + 1) % 4) << i;
  const ChunkSplit send = chunk_split(send_counts), recv = chunk_split(recv_counts);
  std::vector<float> in(size_t(send.total()));
  std::vector<uint16_t> in16(in.size());
  for (int j = 0; j < w; ++j)
    for (int k = 0; k < send.counts[size_t(j)]; ++k) {
      in[size_t(send.displs[size_t(j)] + k)] = float(1000 * r + 10 * j + k);
      in16[size_t(send.displs[size_t(j)] + k)] = uint16_t(1000 * r + 10 * j + k);
    }
  std::vector<float> out(size_t(recv.total()), -1.0f);
  std::vector<uint16_t> out16(out.size(), 0);
  c.all_to_all_v(out.data(), recv, in.data(), send);
  c.all_to_all_v(out16.data(), recv, in16.data(), send);
  for (int i = 0; i < w; ++i)
    for (int k = 0; k < recv.counts[size_t(i)]; ++k) {
      EXPECT_EQ(out[size_t(recv.displs[size_t(i)] + k)], float(1000 * i + 10 * r + k));
      EXPECT_EQ(out16[size_t(recv.displs[size_t(i)] + k)], uint16_t(1000 * i + 10 * r + k));
    }
  // Mismatched splits are refused by name, not sent.
  const ChunkSplit wrong = chunk_split(std::vector<int64_t>(size_t(w + 1), 0));
  EXPECT_THROW(c.all_to_all_v(out.data(), wrong, in.data(), send), Error);
}

TEST(Communicator, BroadcastFromLastRank) {
  Communicator c = Communicator::world();
  const int root = c.size() - 1;
  char msg[32] = {0};
  if (c.rank() == root) std::snprintf(msg, sizeof(msg), "hello from %d", root);
  c.broadcast(msg, sizeof(msg), root);
  EXPECT_EQ(std::string(msg), "hello from " + std::to_string(root));
  c.barrier();
}

TEST(Communicator, SendRecvRing) {
  Communicator c = Communicator::world();
  const int r = c.rank(), w = c.size();
  const int n = 1000;
  const int next = (r + 1) % w, prev = (r + w - 1) % w;
  std::vector<float> out(n), in(n, -1.0f);
  for (int j = 0; j < n; ++j) out[j] = float(r * n + j);
  // Non-blocking ring (works for a world of 1 too: a message to self).
  {
    CommHandle recv = c.irecv(in.data(), n, prev, 11);
    CommHandle send = c.isend(out.data(), n, next, 11);
    send.wait();
    recv.wait();
    EXPECT_FALSE(recv.pending());
  }
  int bad = 0;
  for (int j = 0; j < n; ++j) bad += in[j] != float(prev * n + j);
  EXPECT_EQ(bad, 0);
  // The same with bf16 (uint16) elements: what the context-parallel ring
  // sends; sent_bytes counts the sends' bytes (2 per element).
  {
    c.reset_sent_bytes();
    std::vector<uint16_t> out16(n), in16(n, 0xffff);
    for (int j = 0; j < n; ++j) out16[j] = uint16_t(r * 7 + j);
    CommHandle recv = c.irecv(in16.data(), n, prev, 14);
    CommHandle send = c.isend(out16.data(), n, next, 14);
    send.wait();
    recv.wait();
    for (int j = 0; j < n; ++j) bad += in16[j] != uint16_t(prev * 7 + j);
    EXPECT_EQ(bad, 0);
    EXPECT_EQ(c.sent_bytes(), int64_t(n) * 2);
    c.reset_sent_bytes();
    EXPECT_EQ(c.sent_bytes(), 0);
  }
  // Blocking ring: even ranks send first, odd ranks receive first.
  if (w > 1) {
    std::fill(in.begin(), in.end(), -1.0f);
    if (r % 2 == 0) {
      c.send(out.data(), n, next, 12);
      c.recv(in.data(), n, prev, 12);
    } else {
      c.recv(in.data(), n, prev, 12);
      c.send(out.data(), n, next, 12);
    }
    bad = 0;
    for (int j = 0; j < n; ++j) bad += in[j] != float(prev * n + j);
    EXPECT_EQ(bad, 0);
    // A short message is reported with both sizes.
    std::string err;
    if (r == 0) c.send(out.data(), 3, 1, 13);
    if (r == 1) err = error_of([&] { c.recv(in.data(), 4, 0, 13); });
    if (r == 1) {
      EXPECT_NE(err.find("got 3 elements, expected 4"), std::string::npos) << err;
    }
  }
}

TEST(Communicator, NonBlockingCollectives) {
  Communicator c = Communicator::world();
  const int r = c.rank(), w = c.size();
  const int n = 4096;
  std::vector<float> a(n), b(n);
  for (int j = 0; j < n; ++j) {
    a[j] = float(j % 64 + r);
    b[j] = float(r + 1);
  }
  {
    CommHandle ha = c.start_all_reduce_sum(a.data(), n);
    CommHandle hb = c.start_all_reduce_sum(b.data(), n);  // two in flight
    ha.wait();
    ha.wait();  // a second wait is a no-op
  }             // hb completes in its destructor
  const float rank_sum = float(w * (w - 1) / 2);
  int bad = 0;
  for (int j = 0; j < n; ++j)
    bad += a[j] != float(w * (j % 64)) + rank_sum || b[j] != rank_sum + float(w);
  EXPECT_EQ(bad, 0);

  const int m = 3;
  std::vector<float> in(m), out(size_t(m * w)), full(size_t(m * w)), mine(m);
  for (int j = 0; j < m; ++j) in[j] = float(10 * r + j);
  for (int k = 0; k < m * w; ++k) full[size_t(k)] = float(k);
  CommHandle g = c.start_all_gather(out.data(), in.data(), m);
  CommHandle s = c.start_reduce_scatter_sum(mine.data(), full.data(), m);
  while (!g.test()) {
  }
  s.wait();
  for (int q = 0; q < w; ++q)
    for (int j = 0; j < m; ++j) EXPECT_EQ(out[size_t(q * m + j)], float(10 * q + j));
  for (int j = 0; j < m; ++j) EXPECT_EQ(mine[j], float(w * (r * m + j)));
}

TEST(Communicator, NullGroupRefusesEveryOperation) {
  // Split the world so that only rank 0 is in a group; the others get null.
  Communicator world = Communicator::world();
  Communicator only0 = world.split(world.rank() == 0 ? 0 : -1, 0, "only0");
  EXPECT_EQ(only0.is_member(), world.rank() == 0);
  EXPECT_EQ(only0.size(), world.rank() == 0 ? 1 : 0);

  Communicator null;
  EXPECT_EQ(null.size(), 0);
  EXPECT_EQ(null.rank(), -1);
  float x = 1.0f;
  const std::string err = error_of([&] { null.all_reduce_sum(&x, 1); });
  EXPECT_NE(err.find("not a member"), std::string::npos) << err;
  EXPECT_NE(err.find("'null'"), std::string::npos) << err;
  EXPECT_THROW(null.barrier(), Error);
  EXPECT_THROW(null.broadcast(&x, 4, 0), Error);
  EXPECT_THROW(null.start_all_reduce_sum(&x, 1), Error);
}

TEST(Communicator, SizeOneShortCircuits) {
  Communicator world = Communicator::world();
  Communicator c = world.split(world.rank(), 0, "self");
  ASSERT_EQ(c.size(), 1);
  float x[3] = {1, 2, 3}, out[3] = {0, 0, 0};
  c.all_reduce_sum(x, 3);
  EXPECT_EQ(x[2], 3.0f);
  c.all_gather(out, x, 3);
  EXPECT_EQ(out[1], 2.0f);
  c.reduce_scatter_sum(out, x, 3);
  EXPECT_EQ(out[0], 1.0f);
  CommHandle h = c.start_all_reduce_sum(x, 3);
  EXPECT_FALSE(h.pending());
}

// Splits by rank parity, ranked in reverse; the new groups know their names
// and members, and every rank's host name is gathered in rank order.
TEST(Communicator, SplitAndProcessorNames) {
  Communicator world = Communicator::world();
  const int r = world.rank(), w = world.size();
  Communicator half = world.split(r % 2, -r, "parity");
  const int members = (w - r % 2 + 1) / 2;
  ASSERT_EQ(half.size(), members);
  EXPECT_EQ(half.name(), "parity");
  EXPECT_EQ(half.id().name, "parity");
  for (int q = 0; q < members; ++q)  // reversed: rank 0 of the group is the highest world rank
    EXPECT_EQ(half.world_rank_of(q), (members - 1 - q) * 2 + r % 2) << q;
  int64_t x = r;
  half.all_reduce_sum(&x, 1);
  int64_t expect = 0;
  for (int q = r % 2; q < w; q += 2) expect += q;
  EXPECT_EQ(x, expect);

  const std::vector<std::string> names = world.processor_names();
  ASSERT_EQ(int(names.size()), w);
  char mine[MPI_MAX_PROCESSOR_NAME] = {0};
  int len = 0;
  MPI_Get_processor_name(mine, &len);
  EXPECT_EQ(names[size_t(r)], std::string(mine, size_t(len)));
  for (const std::string& n : names) EXPECT_FALSE(n.empty());
  EXPECT_THROW(Communicator().split(0, 0, "x"), Error);
}

TEST(Communicator, ErrorsNameOperationGroupAndMpiReason) {
  Communicator c = Communicator::world();
  float x[4] = {0, 0, 0, 0};
  std::string err = error_of([&] { c.send(x, 1, c.size(), 0); });
  EXPECT_NE(err.find("peer " + std::to_string(c.size())), std::string::npos) << err;
  err = error_of([&] { c.broadcast(x, 4, -1); });
  EXPECT_NE(err.find("root -1"), std::string::npos) << err;
  err = error_of([&] { c.all_gather(x + 1, x, 2); });  // overlapping, not in place
  if (c.size() > 1) {
    EXPECT_NE(err.find("overlaps"), std::string::npos) << err;
  }
  // MPI's own check (MpiEnv makes the world return errors instead of aborting).
  err = error_of(
      [&] { check_mpi(MPI_Send(x, -1, MPI_FLOAT, 0, 0, MPI_COMM_WORLD), "send", c.name()); });
  EXPECT_NE(err.find("MPI send on group 'world' failed: "), std::string::npos) << err;
  EXPECT_NE(err.find("MPI_ERR_COUNT"), std::string::npos) << err;
}

}  // namespace communicator_test
}  // namespace mt
