#include "observe/profiler.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "checkpoint/atomic_file.h"
#include "core/error.h"
#include "core/log.h"

namespace mt {

namespace {

// At most this many events per rank (~110 MB): a longer range drops the
// rest and says so.
constexpr size_t kMaxEvents = size_t(1) << 20;

// The header of a rank's part of the gather: then the label, then the events.
struct TrackHeader {
  int32_t rank;
  int32_t label_bytes;
  int64_t events;
  int64_t dropped;
};

bool profiled(const ProfileArgs& a, int rank) {
  return std::find(a.ranks.begin(), a.ranks.end(), rank) != a.ranks.end();
}

// Creates `dir` and writes a probe file there; throws naming the flag.
void check_writable(const std::string& dir, const ProfileArgs& a) {
  const std::string flag = a.dir.empty() ? "the profile directory (--save, or .)" : "--profile-dir";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  MT_CHECK(!ec && std::filesystem::is_directory(dir, ec), "--profile: cannot create ", flag, " ",
           dir, ": ", ec ? ec.message() : "exists and is not a directory",
           "; fix: pass --profile-dir DIR of a folder you can write");
  const std::string probe = dir + "/.profile_probe_" + std::to_string(::getpid());
  FILE* f = std::fopen(probe.c_str(), "wb");
  const bool ok = f != nullptr && std::fputs("probe\n", f) >= 0;
  const bool closed = f != nullptr && std::fclose(f) == 0;
  std::remove(probe.c_str());
  MT_CHECK(ok && closed, "--profile: ", flag, " ", dir,
           " is not writable; fix: pass --profile-dir DIR of a folder you can write");
}

}  // namespace

void validate_profile_args(const ProfileArgs& a, int world_size) {
  if (!a.enabled) return;
  MT_CHECK(a.step_start >= 0, "--profile-step-start ", a.step_start,
           " is negative; fix: the number of iterations done before the profiled ones (>= 0)");
  MT_CHECK(a.step_end > a.step_start, "--profile-step-end ", a.step_end,
           " is not after --profile-step-start ", a.step_start,
           ": the profiled iterations are those logged as start + 1 .. end, none here; fix: "
           "--profile-step-end > --profile-step-start (e.g. ",
           a.step_start, " and ", a.step_start + 2, ")");
  MT_CHECK(!a.ranks.empty(), "--profile-ranks names no rank; fix: e.g. --profile-ranks 0");
  for (int r : a.ranks)
    MT_CHECK(r >= 0 && r < world_size, "--profile-ranks ", r, ": no such rank in this run of ",
             world_size, " rank", world_size == 1 ? "" : "s", " (0 .. ", world_size - 1,
             "); fix: name ranks below ", world_size);
}

std::string profile_output_dir(const ProfileArgs& a, const std::string& tensorboard_dir,
                               const std::string& save) {
  if (!a.dir.empty()) return a.dir;
  if (!tensorboard_dir.empty()) return tensorboard_dir;
  if (!save.empty()) return save;
  return ".";
}

std::string rank_label(const ParallelState& ps) {
  std::string s = "rank " + std::to_string(ps.world_rank) + " (TP " + std::to_string(ps.tp_rank) +
                  ", PP " + std::to_string(ps.pp_rank) + ", DP " + std::to_string(ps.dp_rank);
  if (ps.cp_size > 1) s += ", CP " + std::to_string(ps.cp_rank);
  if (ps.ep_size > 1) s += ", EP " + std::to_string(ps.ep_rank);
  return s + ")";
}

Profiler::Profiler(const ProfileArgs& a, ParallelState& ps, const std::string& tensorboard_dir,
                   const std::string& save,
                   int64_t train_iters, int64_t first_iteration, size_t events_per_iteration)
    : args_(a), ps_(ps) {
  if (!a.enabled) return;
  const bool rank0 = ps.world_rank == 0;
  validate_profile_args(a, ps.world_size);
  if (a.use_pytorch_profiler)
    log_line(rank0,
             "note: --use-pytorch-profiler changes nothing here (no PyTorch); --profile "
             "writes this build's own Chrome trace (Trace Event Format)\n");
  dir_ = profile_output_dir(a, tensorboard_dir, save);
  // Rank 0 writes the file: it checks the folder, and every rank learns its verdict.
  std::string refusal;
  if (rank0) {
    try {
      check_writable(dir_, a);
    } catch (const Error& e) {
      refusal = e.what();
    }
  }
  uint64_t n = refusal.size();
  ps.world_comm.broadcast(&n, sizeof n, 0);
  if (n > 0) {
    refusal.resize(size_t(n));
    ps.world_comm.broadcast(refusal.data(), size_t(n), 0);
    throw Error(refusal);
  }
  // As Megatron: a range outside the iterations this run trains records
  // nothing (its profiler never starts), and one that runs past the end
  // stops with training.
  const int64_t first = std::max(a.step_start, first_iteration);
  const int64_t last = std::min(a.step_end, train_iters);
  if (a.step_start < first_iteration || a.step_start >= train_iters) {
    log_line(
        rank0,
        "note: --profile-step-start %lld is %s: no timeline is recorded (as "
        "Megatron-LM); fix: a --profile-step-start in [%lld, %lld)\n",
        static_cast<long long>(a.step_start),
        a.step_start >= train_iters ? "not below --train-iters" : "before the resumed iteration",
        static_cast<long long>(first_iteration), static_cast<long long>(train_iters));
    return;
  }
  if (!profiled(a, ps.world_rank)) return;
  const size_t iters = size_t(std::max<int64_t>(last - first, 1));
  timeline_ = std::make_unique<Timeline>(std::min(kMaxEvents, iters * events_per_iteration));
}

Profiler::~Profiler() {
  if (timeline_ != nullptr && ps_.timeline() == timeline_.get()) ps_.set_timeline(nullptr);
}

void Profiler::before_iteration(int64_t done) {
  if (!args_.enabled || done != args_.step_start) return;
  // The ranks' clocks: each takes its origin right after the same barrier.
  // On one host the steady clocks are one clock and the ranks leave the
  // barrier within microseconds. Across hosts each host's clock is its own;
  // the origins still differ only by the barrier's exit skew (about one
  // network latency, microseconds to tens of microseconds), and the drift
  // over a profiled range of seconds is far below that.
  ps_.world_comm.barrier();
  open_ = true;
  if (timeline_ == nullptr) return;
  ps_.set_timeline(timeline_.get());
  timeline_->start();
}

void Profiler::after_iteration(int64_t done) {
  if (open_ && done == args_.step_end) write(done);
}

void Profiler::finish() {
  if (open_) write(-1);
}

void Profiler::write(int64_t last_iteration) {
  open_ = false;
  std::vector<char> mine;
  if (timeline_ != nullptr) {
    timeline_->stop();
    ps_.set_timeline(nullptr);
    const std::string label = rank_label(ps_);
    const TrackHeader h{int32_t(ps_.world_rank), int32_t(label.size()), int64_t(timeline_->size()),
                        timeline_->dropped()};
    const size_t event_bytes = timeline_->size() * sizeof(TimelineEvent);
    mine.resize(sizeof h + label.size() + event_bytes);
    std::memcpy(mine.data(), &h, sizeof h);
    std::memcpy(mine.data() + sizeof h, label.data(), label.size());
    if (event_bytes > 0)
      std::memcpy(mine.data() + sizeof h + label.size(), timeline_->events(), event_bytes);
  }
  // Every rank agrees on the last iteration recorded (the same everywhere).
  const std::vector<std::vector<char>> parts =
      ps_.world_comm.gather_bytes(mine.data(), mine.size(), 0);
  if (ps_.world_rank != 0) return;
  std::vector<TimelineTrack> tracks;
  std::vector<std::vector<TimelineEvent>> events;  // aligned copies of each rank's events
  int64_t last = last_iteration, dropped = 0;
  size_t total = 0;
  std::string ranks;
  for (const std::vector<char>& p : parts) {
    if (p.empty()) continue;
    TrackHeader h;
    MT_CHECK(p.size() >= sizeof h, "--profile: a rank sent ", p.size(), " bytes (internal error)");
    std::memcpy(&h, p.data(), sizeof h);
    MT_CHECK(
        p.size() == sizeof h + size_t(h.label_bytes) + size_t(h.events) * sizeof(TimelineEvent),
        "--profile: rank ", h.rank, " sent ", p.size(), " bytes for ", h.events,
        " events (internal error)");
    events.emplace_back(size_t(h.events));
    if (h.events > 0)
      std::memcpy(events.back().data(), p.data() + sizeof h + size_t(h.label_bytes),
                  size_t(h.events) * sizeof(TimelineEvent));
    for (const TimelineEvent& e : events.back()) last = std::max(last, e.iteration);
    tracks.push_back({h.rank, std::string(p.data() + sizeof h, size_t(h.label_bytes)),
                      events.back().data(), size_t(h.events)});
    dropped += h.dropped;
    total += size_t(h.events);
    if (!ranks.empty()) ranks += ' ';
    ranks += std::to_string(h.rank);
  }
  const int64_t first = args_.step_start + 1;
  if (last < first) last = first;
  const std::string name =
      "timeline_iters_" + std::to_string(first) + "-" + std::to_string(last) + ".json";
  path_ = dir_ + "/" + name;
  const std::string json = trace_event_json(
      tracks, {{"\"profile_step_start\"", std::to_string(args_.step_start)},
               {"\"profile_step_end\"", std::to_string(args_.step_end)},
               {"\"first_iteration\"", std::to_string(first)},
               {"\"last_iteration\"", std::to_string(last)},
               {"\"layout\"", json_quote(ps_.layout())},
               {"\"world_size\"", std::to_string(ps_.world_size)},
               {"\"dropped_events\"", std::to_string(dropped)},
               {"\"clock\"", json_quote("each rank's steady clock, origin after a world barrier "
                                        "at the start of the range; microseconds")}});
  atomic_write_text(path_, json);
  log_line(true,
           "profile: timeline of iterations %lld-%lld, ranks %s (%zu events) written to %s; "
           "open it in https://ui.perfetto.dev or chrome://tracing\n",
           static_cast<long long>(first), static_cast<long long>(last), ranks.c_str(), total,
           path_.c_str());
  if (dropped > 0)
    log_line(true,
             "profile: %lld events were not recorded (each rank's buffer holds %zu); fix: a "
             "shorter range (--profile-step-start .. --profile-step-end)\n",
             static_cast<long long>(dropped), kMaxEvents);
}

}  // namespace mt
