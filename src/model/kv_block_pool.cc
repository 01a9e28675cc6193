#include "model/kv_block_pool.h"

#include <algorithm>

#include "core/error.h"

namespace mt {

KvBlockPool::KvBlockPool(int64_t blocks, int64_t block_size, int64_t max_sequences, int64_t ring)
    : blocks_(blocks), block_size_(block_size), ring_(ring) {
  MT_CHECK(block_size >= 1, "a key/value block of ", block_size, " positions; it needs >= 1");
  MT_CHECK(blocks >= 1, "a key/value pool of ", blocks, " blocks; it needs >= 1");
  MT_CHECK(max_sequences >= 1, "a decoder of ", max_sequences,
           " sequences at most; it needs >= 1");
  MT_CHECK(ring >= block_size && ring % block_size == 0, "a sequence's ring of ", ring,
           " slots is not a multiple of the ", block_size, "-position blocks (internal error)");
  slots_.resize(size_t(max_sequences));
  for (Slot& s : slots_) s.table.reserve(size_t(std::min(ring / block_size, blocks)));
  free_.resize(size_t(blocks));
  for (int64_t b = 0; b < blocks; ++b) free_[size_t(b)] = int32_t(blocks - 1 - b);  // 0 first
}

const KvBlockPool::Slot& KvBlockPool::slot(int64_t seq) const {
  const int64_t n = int64_t(slots_.size());
  MT_CHECK(seq >= 0 && seq < next_id_ && slots_[size_t(seq % n)].id == seq, "sequence ", seq,
           " is not live in the decoder (never added, or already freed); fix: use an id "
           "add_sequence returned, before freeing it");
  return slots_[size_t(seq % n)];
}

bool KvBlockPool::live(int64_t seq) const {
  const int64_t n = int64_t(slots_.size());
  return seq >= 0 && seq < next_id_ && slots_[size_t(seq % n)].id == seq;
}

std::optional<int64_t> KvBlockPool::add() {
  // Ids advance by one; a slot takes the ids congruent to it, so the next id
  // goes to the first free slot at or after it (mod the slot count).
  const int64_t n = int64_t(slots_.size());
  if (live_ == n) return std::nullopt;
  int64_t id = next_id_;
  while (slots_[size_t(id % n)].id >= 0) ++id;
  Slot& s = slots_[size_t(id % n)];
  s.id = id;
  s.length = 0;
  s.table.clear();
  next_id_ = id + 1;
  ++live_;
  return id;
}

void KvBlockPool::free(int64_t seq) {
  Slot& s = slot_mut(seq);
  for (auto it = s.table.rbegin(); it != s.table.rend(); ++it) free_.push_back(*it);
  s.table.clear();
  s.id = -1;
  --live_;
}

int64_t KvBlockPool::blocks_to_hold(int64_t seq, int64_t length) const {
  const int64_t slots = std::min(length, ring_);
  const int64_t need = (slots + block_size_ - 1) / block_size_;
  return std::max<int64_t>(0, need - int64_t(slot(seq).table.size()));
}

bool KvBlockPool::hold(int64_t seq, int64_t length) {
  const int64_t more = blocks_to_hold(seq, length);
  if (more > free_blocks()) return false;
  Slot& s = slot_mut(seq);
  for (int64_t i = 0; i < more; ++i) {
    s.table.push_back(free_.back());
    free_.pop_back();
  }
  return true;
}

}  // namespace mt
