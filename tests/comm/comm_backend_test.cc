// A second, in-process CommBackend behind Communicator: what Communicator
// keeps for every backend (size-1 short-circuits, argument checks, the 4 MB
// chunking of reductions, handles, accounting, failure messages) works the
// same over a transport that is not MPI.
//
// TwinBackend pretends to be rank 0 of a group of `size` ranks whose other
// ranks are twins of this one: they hold the same buffers and send what this
// rank sends. So a sum is size * x, rank i's chunk of anything is this rank's
// chunk, and a message to any peer comes back from it. Non-blocking calls
// finish in wait() / test(), so a test sees results appear only then. It logs
// every call it gets.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/comm_backend.h"
#include "comm/communicator.h"
#include "core/error.h"
#include "error_of.h"

namespace mt {
namespace comm_backend_test {

struct Call {
  std::string op;
  int64_t n;
};
using CallLog = std::shared_ptr<std::vector<Call>>;

constexpr int kNoMessage = 1, kUnsupported = 2;

std::string twin_error_text(int code) {
  return code == kNoMessage ? "nothing was sent with this tag" : "not supported by the twins";
}

class TwinRequest final : public CommRequest {
 public:
  explicit TwinRequest(std::function<int()> finish) : finish_(std::move(finish)) {}
  int wait() override { return std::exchange(finish_, [] { return 0; })(); }
  int test(bool* done) override {
    *done = true;
    return wait();
  }
  std::string error_text(int code) const override { return twin_error_text(code); }

 private:
  std::function<int()> finish_;
};

class TwinBackend final : public CommBackend {
 public:
  TwinBackend(int size, CallLog log) : size_(size), log_(std::move(log)) {}

  const char* kind() const override { return "TWIN"; }
  std::string error_text(int code) const override { return twin_error_text(code); }
  int rank() const override { return 0; }
  int size() const override { return size_; }
  std::vector<int> world_ranks() const override {
    std::vector<int> r;
    for (int i = 0; i < size_; ++i) r.push_back(10 + i);
    return r;
  }
  int max_tag() const override { return 99; }
  int split(int color, int key, std::unique_ptr<CommBackend>* out) override {
    log("split", color);
    if (color >= 0) *out = std::make_unique<TwinBackend>(1, log_);
    return 0;
  }
  std::string processor_name() const override { return "twin-host"; }

  int all_reduce(void* x, int64_t n, ElemType type, ReduceOp op) override {
    log("all_reduce", n);
    return scale(x, n, type, op);
  }
  int all_gather(void* out, const void* in, int64_t n, ElemType type) override {
    log("all_gather", n);
    const size_t bytes = size_t(n) * elem_bytes(type);
    std::vector<char> mine(static_cast<const char*>(in), static_cast<const char*>(in) + bytes);
    for (int i = 0; i < size_; ++i)
      std::memcpy(static_cast<char*>(out) + i * bytes, mine.data(), bytes);
    return 0;
  }
  int reduce_scatter(void* out, const void* in, int64_t n, ElemType type, ReduceOp op) override {
    log("reduce_scatter", n);
    std::memcpy(out, in, size_t(n) * elem_bytes(type));  // chunk 0 (this rank's)
    return scale(out, n, type, op);
  }
  int reduce_scatter_in_place(void* x, const ChunkSplit& split, ElemType type,
                              ReduceOp op) override {
    log("reduce_scatter_in_place", split.total());
    return scale(x, split.counts[0], type, op);  // chunk 0 starts at x
  }
  int all_gather_in_place(void* x, const ChunkSplit& split, ElemType type) override {
    log("all_gather_in_place", split.total());
    return 0;  // the twins' chunks are this rank's
  }
  int all_to_all_v(void* out, const ChunkSplit& recv_split, const void* in,
                   const ChunkSplit& send_split, ElemType type) override {
    log("all_to_all_v", send_split.total());
    const size_t elem = elem_bytes(type);  // rank i sends chunk 0 of its (our) input
    for (int i = 0; i < size_; ++i) {
      if (recv_split.counts[size_t(i)] != send_split.counts[0]) return kUnsupported;
      std::memcpy(static_cast<char*>(out) + size_t(recv_split.displs[size_t(i)]) * elem, in,
                  size_t(send_split.counts[0]) * elem);
    }
    return 0;
  }
  int broadcast(void*, int64_t n, ElemType, int) override { return log("broadcast", n), 0; }
  int barrier() override { return log("barrier", 0), 0; }
  int send(const void* x, int64_t n, ElemType type, int, int tag) override {
    log("send", n);
    const char* p = static_cast<const char*>(x);
    mailbox_[tag].assign(p, p + size_t(n) * elem_bytes(type));
    return 0;
  }
  int recv(void* x, int64_t n, ElemType type, int, int tag, int64_t* received) override {
    log("recv", n);
    auto it = mailbox_.find(tag);
    if (it == mailbox_.end()) return kNoMessage;
    *received = int64_t(it->second.size() / elem_bytes(type));
    std::memcpy(x, it->second.data(), std::min(it->second.size(), size_t(n) * elem_bytes(type)));
    mailbox_.erase(it);
    return 0;
  }

  int start_all_reduce(void* x, int64_t n, ElemType type, ReduceOp op, Request* req) override {
    log("start_all_reduce", n);
    *req = std::make_unique<TwinRequest>([=, this] { return scale(x, n, type, op); });
    return 0;
  }
  int start_all_gather(void* out, const void* in, int64_t n, ElemType type,
                       Request* req) override {
    *req = std::make_unique<TwinRequest>([=, this] { return all_gather(out, in, n, type); });
    return 0;
  }
  int start_reduce_scatter(void* out, const void* in, int64_t n, ElemType type, ReduceOp op,
                           Request* req) override {
    *req = std::make_unique<TwinRequest>(
        [=, this] { return reduce_scatter(out, in, n, type, op); });
    return 0;
  }
  int start_reduce_scatter_in_place(void* x, const ChunkSplit& split, ElemType type, ReduceOp op,
                                    Request* req) override {
    const ChunkSplit* s = &split;  // outlives the request (the contract)
    *req = std::make_unique<TwinRequest>(
        [=, this] { return reduce_scatter_in_place(x, *s, type, op); });
    return 0;
  }
  int start_all_gather_in_place(void* x, const ChunkSplit& split, ElemType type,
                                Request* req) override {
    *req = std::make_unique<TwinRequest>([] { return 0; });
    return 0;
  }
  int isend(const void* x, int64_t n, ElemType type, int peer, int tag, Request* req) override {
    const int rc = send(x, n, type, peer, tag);  // buffered: done at once
    *req = std::make_unique<TwinRequest>([] { return 0; });
    return rc;
  }
  int irecv(void* x, int64_t n, ElemType type, int peer, int tag, Request* req) override {
    *req = std::make_unique<TwinRequest>([=, this] {
      int64_t got = 0;
      return recv(x, n, type, peer, tag, &got);
    });
    return 0;
  }

 private:
  void log(const char* op, int64_t n) { log_->push_back({op, n}); }
  // The reduction over `size_` twins of x: (n), f32 only.
  int scale(void* x, int64_t n, ElemType type, ReduceOp op) const {
    if (type != ElemType::kF32 || op == ReduceOp::kBf16Sum) return kUnsupported;
    if (op == ReduceOp::kSum)
      for (int64_t i = 0; i < n; ++i) static_cast<float*>(x)[i] *= float(size_);
    return 0;
  }

  int size_;
  CallLog log_;
  std::map<int, std::vector<char>> mailbox_;  // tag -> the last message sent with it
};

Communicator twins(int size, const CallLog& log, const char* name = "twins") {
  return Communicator(std::make_unique<TwinBackend>(size, log), name);
}

using test::error_of;

TEST(CommBackend, GroupOfOneNeverReachesTheCollectives) {
  auto log = std::make_shared<std::vector<Call>>();
  Communicator c = twins(1, log, "self");
  EXPECT_EQ(c.size(), 1);
  EXPECT_EQ(c.rank(), 0);
  EXPECT_EQ(c.world_rank_of(0), 10);
  EXPECT_EQ(c.id().members, "world ranks 10");
  float x[4] = {1, 2, 3, 4}, out[4] = {0, 0, 0, 0};
  c.all_reduce_sum(x, 4);
  c.all_gather(out, x, 4);
  const ChunkSplit one = chunk_split({4});
  c.all_to_all_v(out, one, x, one);
  c.reduce_scatter_sum_in_place(x, one);
  c.broadcast(x, sizeof(x), 0);
  c.barrier();
  EXPECT_EQ(c.all_to_all_counts({7}), std::vector<int64_t>{7});
  CommHandle h = c.start_all_reduce_sum(x, 4);
  EXPECT_FALSE(h.pending());
  EXPECT_EQ(x[3], 4.0f);
  EXPECT_EQ(out[2], 3.0f);
  EXPECT_EQ(log->size(), 0u);
  // Point-to-point to oneself does reach the backend.
  c.send(x, 4, 0, 5);
  float y[4] = {0, 0, 0, 0};
  c.recv(y, 4, 0, 5);
  EXPECT_EQ(y[1], 2.0f);
  EXPECT_EQ(log->size(), 2u);
}

TEST(CommBackend, ReductionsAreChunkedByTheCommunicator) {
  auto log = std::make_shared<std::vector<Call>>();
  Communicator c = twins(2, log);
  const int64_t chunk = kReduceChunkBytes / 4, n = 2 * chunk + 5;
  std::vector<float> x(size_t(n), 1.5f);
  c.all_reduce_sum(x.data(), n);
  ASSERT_EQ(log->size(), 3u);
  EXPECT_EQ((*log)[0].n, chunk);
  EXPECT_EQ((*log)[2].n, 5);
  EXPECT_EQ(x.front(), 3.0f);
  EXPECT_EQ(x.back(), 3.0f);
  EXPECT_GT(c.busy_seconds(), 0.0);

  // A small reduce-scatter is one backend call, a large one a chunked all-reduce.
  log->clear();
  std::vector<float> small(8, 1.0f);
  const ChunkSplit halves = chunk_split({4, 4});
  c.reduce_scatter_sum_in_place(small.data(), halves);
  ASSERT_EQ(log->size(), 1u);
  EXPECT_EQ((*log)[0].op, "reduce_scatter_in_place");
  EXPECT_EQ(small[0], 2.0f);
  log->clear();
  const ChunkSplit big = chunk_split({chunk, chunk});
  std::vector<float> y(size_t(2 * chunk), 1.0f);
  c.reduce_scatter_sum_in_place(y.data(), big);
  ASSERT_EQ(log->size(), 2u);
  EXPECT_EQ((*log)[0].op, "all_reduce");
  EXPECT_EQ(y.back(), 2.0f);
}

TEST(CommBackend, HandlesFinishInWait) {
  auto log = std::make_shared<std::vector<Call>>();
  Communicator c = twins(2, log);
  std::vector<float> x(6, 1.0f), out(6, 0.0f);
  CommHandle h = c.start_all_reduce_sum(x.data(), 6);
  EXPECT_TRUE(h.pending());
  EXPECT_EQ(x[0], 1.0f);  // not yet
  h.wait();
  EXPECT_FALSE(h.pending());
  EXPECT_EQ(x[0], 2.0f);
  {
    CommHandle g = c.start_all_gather(out.data(), x.data(), 3);
  }  // completes in its destructor
  EXPECT_EQ(out[5], 2.0f);
  CommHandle r = c.start_reduce_scatter_sum(out.data(), x.data(), 3);
  EXPECT_TRUE(r.test());
  EXPECT_EQ(out[0], 4.0f);

  // A message to a twin comes back; the bytes sent are counted.
  const uint16_t msg[3] = {7, 8, 9};
  uint16_t got[3] = {0, 0, 0};
  CommHandle rx = c.irecv(got, 3, 1, 4);
  CommHandle tx = c.isend(msg, 3, 1, 4);
  tx.wait();
  rx.wait();
  EXPECT_EQ(got[2], 9);
  EXPECT_EQ(c.sent_bytes(), 6);
}

TEST(CommBackend, AllToAllAndCountsGoThroughTheBackend) {
  auto log = std::make_shared<std::vector<Call>>();
  Communicator c = twins(2, log);
  EXPECT_EQ(c.all_to_all_counts({3, 1}), (std::vector<int64_t>{3, 3}));
  const ChunkSplit send = chunk_split({3, 1}), recv = chunk_split({3, 3});
  const float in[4] = {1, 2, 3, 4};
  std::vector<float> out(6, 0.0f);
  c.all_to_all_v(out.data(), recv, in, send);
  EXPECT_EQ(out, (std::vector<float>{1, 2, 3, 1, 2, 3}));
  // Splits that do not fit the group are refused before the backend sees them.
  log->clear();
  EXPECT_THROW(c.all_to_all_v(out.data(), chunk_split({6}), in, send), Error);
  EXPECT_TRUE(log->empty());
}

TEST(CommBackend, SplitAndNamesComeFromTheBackend) {
  auto log = std::make_shared<std::vector<Call>>();
  Communicator c = twins(2, log);
  EXPECT_EQ(c.processor_names(), (std::vector<std::string>{"twin-host", "twin-host"}));
  Communicator sub = c.split(0, 0, "sub");
  EXPECT_EQ(sub.size(), 1);
  EXPECT_EQ(sub.name(), "sub");
  Communicator none = c.split(-1, 0, "none");
  EXPECT_FALSE(none.is_member());
  EXPECT_EQ(none.name(), "none");
  EXPECT_NE(error_of([&] { none.barrier(); }).find("not a member"), std::string::npos);
}

TEST(CommBackend, FailuresNameTheBackendAndItsReason) {
  auto log = std::make_shared<std::vector<Call>>();
  Communicator c = twins(2, log);
  float x[2] = {0, 0};
  std::string err = error_of([&] { c.recv(x, 2, 1, 3); });
  EXPECT_NE(err.find("TWIN recv on group 'twins' failed: nothing was sent with this tag"),
            std::string::npos)
      << err;
  double d = 1.0;  // the twins sum floats only
  err = error_of([&] { c.all_reduce_sum(&d, 1); });
  EXPECT_NE(err.find("TWIN all_reduce_sum(double) on group 'twins' failed"), std::string::npos)
      << err;
  CommHandle h = c.irecv(x, 2, 1, 8);
  err = error_of([&] { h.wait(); });
  EXPECT_NE(err.find("TWIN irecv on group 'twins' failed"), std::string::npos) << err;
  EXPECT_FALSE(h.pending());
  EXPECT_THROW(c.send(x, 2, 1, 100), Error);  // above the backend's max_tag
}

}  // namespace comm_backend_test
}  // namespace mt
