// The bookkeeping of a paged key/value cache (vLLM's block manager): a pool of
// fixed-size blocks shared by the sequences being decoded, a block table per
// sequence, blocks taken as a sequence grows and given back when it is freed.
// Host-side only: which block holds what; the blocks' memory is the attention
// kinds' caches (model/batched_decoder.h). Every rank of a TP or EP group
// makes the same calls, so their tables agree without communication.
//
// A sequence's positions map to slots p mod ring (a sliding window's
// sequence reuses the slots of a ring of whole blocks; otherwise the ring
// covers its longest length and never wraps), slot s to block table[s / block_size].
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

namespace mt {

class KvBlockPool {
 public:
  // blocks: of block_size positions each; max_sequences live at once; ring:
  // a sequence's slots, a multiple of block_size (see above).
  KvBlockPool(int64_t blocks, int64_t block_size, int64_t max_sequences, int64_t ring);

  // A new sequence (no blocks, length 0): its id, or nothing when
  // max_sequences are live. Ids are not reused: a freed id stays invalid.
  std::optional<int64_t> add();
  // Gives the sequence's blocks back to the pool; the id becomes invalid.
  void free(int64_t seq);
  bool live(int64_t seq) const;

  // Blocks the sequence must take to hold `length` positions (0 if it holds them).
  int64_t blocks_to_hold(int64_t seq, int64_t length) const;
  // Takes those blocks: false (nothing taken) when the pool has too few free.
  bool hold(int64_t seq, int64_t length);
  // Positions fed so far; set by the decoder once a step has run.
  int64_t length(int64_t seq) const { return slot(seq).length; }
  void set_length(int64_t seq, int64_t length) { slot_mut(seq).length = length; }
  // The sequence's blocks in slot order (the pointer stays valid while it lives).
  const std::vector<int32_t>& table(int64_t seq) const { return slot(seq).table; }

  int64_t blocks() const { return blocks_; }
  int64_t block_size() const { return block_size_; }
  int64_t ring() const { return ring_; }
  int64_t free_blocks() const { return int64_t(free_.size()); }
  int64_t max_sequences() const { return int64_t(slots_.size()); }
  int64_t live_sequences() const { return live_; }

 private:
  struct Slot {
    int64_t id = -1;  // -1: free
    int64_t length = 0;
    std::vector<int32_t> table;  // reserved to the ring's blocks: never reallocates
  };
  const Slot& slot(int64_t seq) const;
  Slot& slot_mut(int64_t seq) { return const_cast<Slot&>(slot(seq)); }

  int64_t blocks_, block_size_, ring_;
  std::vector<Slot> slots_;
  std::vector<int32_t> free_;  // free block ids; the last is taken first
  int64_t next_id_ = 0, live_ = 0;
};

}  // namespace mt
