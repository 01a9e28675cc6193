#include "data/hf_bpe.h"

#include <atomic>
#include <cstdio>
#include <cstring>
#include <queue>

#include "core/error.h"
#include "data/hf_text.h"

namespace mt {

namespace {

std::atomic<uint64_t> g_next_instance{1};

uint64_t pair_key(int32_t a, int32_t b) { return uint64_t(uint32_t(a)) << 32 | uint32_t(b); }

uint64_t mix(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Per thread: piece -> ids, for pieces up to kMaxCachedBytes (tokenizers'
// BPE cache). Open addressing over flat arrays (the pieces' bytes and ids in
// two arenas): one probe touches one slot, not a node per entry. Keyed by the
// model instance; emptied when half full.
class PieceCache {
 public:
  static constexpr size_t kMaxCachedBytes = 64, kSlots = size_t(1) << 18;

  // The cached ids of `piece` (hash h) appended to out; false when absent.
  bool find(std::string_view piece, uint64_t h, std::vector<int32_t>& out) const {
    for (size_t i = h & (kSlots - 1);; i = (i + 1) & (kSlots - 1)) {
      const Slot& s = slots_[i];
      if (s.hash == 0) return false;
      if (s.hash == h && s.key_len == piece.size() &&
          std::memcmp(keys_.data() + s.key_off, piece.data(), piece.size()) == 0) {
        out.insert(out.end(), ids_.begin() + s.ids_off, ids_.begin() + s.ids_off + s.ids_len);
        return true;
      }
    }
  }
  void insert(std::string_view piece, uint64_t h, const int32_t* ids, size_t n) {
    if (used_ * 2 >= kSlots) reset(owner_);
    size_t i = h & (kSlots - 1);
    while (slots_[i].hash != 0) i = (i + 1) & (kSlots - 1);
    slots_[i] = {h, uint32_t(keys_.size()), uint32_t(piece.size()), uint32_t(ids_.size()), uint32_t(n)};
    keys_.append(piece);
    ids_.insert(ids_.end(), ids, ids + n);
    ++used_;
  }
  void reset(uint64_t owner) {
    slots_.assign(kSlots, Slot{});
    keys_.clear();
    ids_.clear();
    used_ = 0;
    owner_ = owner;
  }
  uint64_t owner() const { return owner_; }

 private:
  struct Slot {
    uint64_t hash = 0;  // 0 = empty
    uint32_t key_off = 0, key_len = 0, ids_off = 0, ids_len = 0;
  };
  std::vector<Slot> slots_;
  std::string keys_;
  std::vector<int32_t> ids_;
  size_t used_ = 0;
  uint64_t owner_ = 0;
};

}  // namespace

HfBpe HfBpe::from_json(const nlohmann::json& m, const std::string& where) {
  const std::string type = m.value("type", std::string("BPE"));
  MT_CHECK(type == "BPE", where, ": model type \"", type,
           "\" is not supported by megatron.cpp's "
           "HuggingFaceTokenizer (src/data/hf_bpe.cc builds BPE only; WordPiece, Unigram and "
           "WordLevel are not built); fix: use a BPE tokenizer");
  MT_CHECK(!m.contains("dropout") || m.at("dropout").is_null(), where, ": BPE dropout ",
           m.at("dropout").dump(), " is not supported (src/data/hf_bpe.cc); fix: set \"dropout\": null");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    MT_CHECK(!m.contains(key) || m.at(key).is_null() || m.at(key).get<std::string>().empty(), where, ": BPE ",
             key, " \"", m.at(key).get<std::string>(),
             "\" is not supported "
             "(src/data/hf_bpe.cc); fix: use a tokenizer without it");
  HfBpe bpe;
  bpe.instance_id_ = g_next_instance.fetch_add(1);
  const nlohmann::json& vocab = m.at("vocab");
  MT_CHECK(vocab.is_object(), where, ": BPE \"vocab\" is not an object; the file is damaged");
  bpe.vocab_.reserve(vocab.size());
  int32_t max_id = -1;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const int64_t id = it.value().get<int64_t>();
    MT_CHECK(id >= 0 && id < (int64_t(1) << 31), where, ": vocab entry \"", it.key(), "\" has id ", id,
             "; ids must be in [0, 2^31)");
    bpe.vocab_.emplace(it.key(), int32_t(id));
    max_id = std::max(max_id, int32_t(id));
  }
  bpe.id_to_token_.assign(size_t(max_id + 1), std::string());
  for (const auto& [tok, id] : bpe.vocab_) bpe.id_to_token_[size_t(id)] = tok;

  auto id_of = [&](const std::string& tok, size_t rank) {
    auto it = bpe.vocab_.find(tok);
    MT_CHECK(it != bpe.vocab_.end(), where, ": merge ", rank, " uses \"", tok,
             "\", which is not in "
             "the vocabulary; the file is damaged");
    return it->second;
  };
  const nlohmann::json& merges = m.at("merges");
  std::unordered_map<uint64_t, Merge> merge_map;
  merge_map.reserve(merges.size());
  for (size_t r = 0; r < merges.size(); ++r) {
    std::string a, b;
    if (merges[r].is_string()) {
      const std::string s = merges[r].get<std::string>();
      const size_t sp = s.find(' ', 1);
      MT_CHECK(sp != std::string::npos, where, ": merge ", r, " \"", s, "\" is not \"a b\"");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else {
      a = merges[r].at(0).get<std::string>();
      b = merges[r].at(1).get<std::string>();
    }
    const int32_t ia = id_of(a, r), ib = id_of(b, r);
    // A repeated pair keeps its last rank, as tokenizers (a map collected in order).
    merge_map.insert_or_assign(pair_key(ia, ib), Merge{int32_t(r), id_of(a + b, r)});
  }
  bpe.merges_.build(merge_map);
  bpe.char_ids_.assign(0x10000, -1);
  for (const auto& [tok, id] : bpe.vocab_) {
    size_t len = 0;
    if (tok.empty() || hf_char_len(static_cast<unsigned char>(tok[0])) != tok.size()) continue;
    const char32_t cp = hf_char_at(tok, 0, len);
    if (cp < 0x10000) bpe.char_ids_[cp] = id;
  }
  if (m.contains("unk_token") && m.at("unk_token").is_string()) {
    const std::string unk = m.at("unk_token").get<std::string>();
    auto it = bpe.vocab_.find(unk);
    MT_CHECK(it != bpe.vocab_.end(), where, ": BPE unk_token \"", unk, "\" is not in the vocabulary");
    bpe.unk_id_ = it->second;
  }
  bpe.byte_fallback_ = m.value("byte_fallback", false);
  bpe.fuse_unk_ = m.value("fuse_unk", false);
  bpe.ignore_merges_ = m.value("ignore_merges", false);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    auto it = bpe.vocab_.find(std::string_view(name));
    bpe.byte_ids_[b] = it == bpe.vocab_.end() ? -1 : it->second;
  }
  return bpe;
}

const std::string& HfBpe::id_to_token(int32_t id) const {
  static const std::string kEmpty;
  return id >= 0 && size_t(id) < id_to_token_.size() ? id_to_token_[size_t(id)] : kEmpty;
}

void HfBpe::MergeTable::build(const std::unordered_map<uint64_t, Merge>& entries) {
  size_t cap = 16;
  while (cap < 2 * entries.size()) cap *= 2;
  keys.assign(cap, 0);
  values.assign(cap, Merge{0, 0});
  mask = cap - 1;
  for (const auto& [key, merge] : entries) {
    size_t i = mix(key) & mask;
    while (keys[i] != 0) i = (i + 1) & mask;
    keys[i] = key + 1;
    values[i] = merge;
  }
}

const HfBpe::Merge* HfBpe::MergeTable::find(uint64_t key) const {
  for (size_t i = mix(key) & mask;; i = (i + 1) & mask) {
    if (keys[i] == key + 1) return &values[i];
    if (keys[i] == 0) return nullptr;
  }
}

const HfBpe::Merge* HfBpe::find_merge(int32_t a, int32_t b) const { return merges_.find(pair_key(a, b)); }

void HfBpe::encode(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  if (ignore_merges_) {
    auto it = vocab_.find(piece);
    if (it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  if (piece.size() > PieceCache::kMaxCachedBytes) {
    merge_word(piece, out);
    return;
  }
  thread_local PieceCache cache;
  if (cache.owner() != instance_id_) cache.reset(instance_id_);
  const uint64_t h = std::hash<std::string_view>{}(piece) | 1;
  if (cache.find(piece, h, out)) return;
  const size_t before = out.size();
  merge_word(piece, out);
  cache.insert(piece, h, out.data() + before, out.size() - before);
}

void HfBpe::merge_word(std::string_view w, std::vector<int32_t>& out) const {
  // Symbols as a doubly linked list over a vector (tokenizers' Word).
  struct Sym {
    int32_t id, prev, next;
    bool alive;
  };
  thread_local std::vector<Sym> syms;
  syms.clear();
  auto add = [&](int32_t id) {
    const int32_t k = int32_t(syms.size());
    syms.push_back({id, k - 1, k + 1, true});
  };
  int32_t unk_pending = -1;  // an unk not yet added (fuse_unk extends it)
  for (size_t i = 0, len = 0; i < w.size(); i += len) {
    const char32_t cp = hf_char_at(w, i, len);
    int32_t id = -1;
    if (cp < 0x10000) {
      id = char_ids_[cp];
    } else if (auto it = vocab_.find(w.substr(i, len)); it != vocab_.end()) {
      id = it->second;
    }
    if (id >= 0) {
      if (unk_pending >= 0) add(unk_pending);
      unk_pending = -1;
      add(id);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (size_t k = 0; k < len; ++k) all = all && byte_ids_[static_cast<unsigned char>(w[i + k])] >= 0;
      if (all) {  // (tokenizers adds these before a pending unk, as here)
        for (size_t k = 0; k < len; ++k) add(byte_ids_[static_cast<unsigned char>(w[i + k])]);
        continue;
      }
    }
    if (unk_id_ >= 0) {
      if (unk_pending >= 0 && !fuse_unk_) add(unk_pending);
      unk_pending = unk_id_;
    }
  }
  if (unk_pending >= 0) add(unk_pending);
  if (syms.empty()) return;
  syms.back().next = -1;

  struct Cand {
    int32_t rank, pos, id;
    bool operator<(const Cand& o) const {  // priority_queue top = lowest rank, then leftmost
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  thread_local std::vector<Cand> heap_storage;
  heap_storage.clear();
  std::priority_queue<Cand> heap(std::less<Cand>(), std::move(heap_storage));
  for (size_t k = 0; k + 1 < syms.size(); ++k)
    if (const Merge* m = find_merge(syms[k].id, syms[k + 1].id)) heap.push({m->rank, int32_t(k), m->id});
  while (!heap.empty()) {
    const Cand top = heap.top();
    heap.pop();
    Sym& left = syms[size_t(top.pos)];
    if (!left.alive || left.next < 0) continue;
    Sym& right = syms[size_t(left.next)];
    const Merge* m = find_merge(left.id, right.id);
    if (m == nullptr || m->id != top.id) continue;
    left.id = top.id;
    right.alive = false;
    left.next = right.next;
    if (left.next >= 0) syms[size_t(left.next)].prev = top.pos;
    if (left.prev >= 0)
      if (const Merge* p = find_merge(syms[size_t(left.prev)].id, left.id))
        heap.push({p->rank, left.prev, p->id});
    if (left.next >= 0)
      if (const Merge* n = find_merge(left.id, syms[size_t(left.next)].id))
        heap.push({n->rank, top.pos, n->id});
  }
  for (int32_t k = 0; k >= 0; k = syms[size_t(k)].next) out.push_back(syms[size_t(k)].id);
}

}  // namespace mt
