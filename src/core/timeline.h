// Timeline: one rank's record of what it did when (forward and backward per
// micro-batch, pipeline sends and receives, collectives, gradient sync, the
// optimizer step, checkpoint saves), written as Chrome's Trace Event Format
// ("X" complete events; opens in Perfetto and chrome://tracing).
//
// - Preallocated: the buffer of events is allocated and touched when the
//   Timeline is built; recording writes into it and never allocates. A full
//   buffer drops further events and counts them (dropped()).
// - Off costs one branch: a TimelineSpan over a null Timeline, or one that is
//   not recording, does nothing (no clock read).
// - Times are steady-clock nanoseconds from the origin set by start(). The
//   caller aligns ranks by calling start() right after a barrier (see
//   observe/profiler.h).
// - Events are kept in order of their start (a span takes its slot when it
//   begins and fills in its duration when it ends), so nested spans follow
//   their parent.
//
// The recorder knows no MPI: the communicator layer hooks its calls into it
// (comm/communicator.h) and the training loop gathers the ranks' events
// (observe/profiler.h).
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace mt {

// What a span is: its category in the trace ("cat") and the colour of the
// rendered timeline (scripts/render_timeline.py).
enum class TimelineKind : uint8_t {
  kIteration,   // one training step (train_step), the logged iteration time
  kForward,     // forward of one micro-batch through one model chunk
  kBackward,    // backward of the same
  kPipeRecv,    // a pipeline receive: the time blocked on the neighbour (the bubble)
  kPipeSend,    // a pipeline send being posted (isend)
  kCollective,  // a blocking collective or send/recv of a Communicator
  kCommStart,   // a non-blocking collective being posted
  kCommWait,    // the wait on a non-blocking operation (what overlap did not hide)
  kGradSync,    // gradient reduction (buckets, SP grads over TP, tied embedding)
  kOptimizer,   // grad norm, clipping, AdamW, the parameter all-gather
  kCheckpoint,  // a checkpoint save
};
inline constexpr int kTimelineKinds = 11;
const char* timeline_kind_name(TimelineKind kind);  // "forward", "collective", ...

// One span, trivially copyable: the training loop sends these raw between
// ranks of one job (the same binary on every rank).
struct TimelineEvent {
  int64_t start_ns = 0;  // from the origin
  int64_t dur_ns = -1;   // -1 while open
  int64_t bytes = -1;    // bytes moved (communication), -1: none
  int64_t iteration = -1;
  int32_t micro_batch = -1;
  int32_t chunk = -1;
  int32_t peer = -1;  // world rank of a point-to-point peer
  TimelineKind kind = TimelineKind::kIteration;
  char name[47] = {};   // "forward", "all_reduce_sum(float)", "recv forward", ...
  char group[16] = {};  // the Communicator's group name ("tp", "pp", "dp", ...)
};
static_assert(std::is_trivially_copyable_v<TimelineEvent>);

// What a span carries besides its kind and name (all optional).
struct SpanArgs {
  int32_t micro_batch = -1;
  int32_t chunk = -1;
  int32_t peer = -1;
  int64_t bytes = -1;
  const char* group = nullptr;
};

class Timeline {
 public:
  using Clock = std::chrono::steady_clock;

  // Room for `capacity` events, allocated and touched now.
  explicit Timeline(size_t capacity);

  // Sets the origin to now and starts recording (the buffer is kept: events
  // of an earlier range stay). stop() ends recording; spans still open then
  // are closed when they end.
  void start();
  void stop() { recording_ = false; }
  bool recording() const { return recording_; }
  // The training iteration stamped on the events that begin from now on.
  void set_iteration(int64_t iteration) { iteration_ = iteration; }

  // Opens a span; returns its slot, or -1 when not recording or full.
  int64_t begin(TimelineKind kind, const char* name, const SpanArgs& args = {});
  // Closes the span of slot i (from begin(); -1 is ignored).
  void end(int64_t i);

  const TimelineEvent* events() const { return events_.data(); }
  size_t size() const { return size_; }
  size_t capacity() const { return events_.size(); }
  int64_t dropped() const { return dropped_; }  // events not recorded: the buffer was full
  void clear() { size_ = 0, dropped_ = 0; }

 private:
  int64_t now_ns() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - origin_).count();
  }

  std::vector<TimelineEvent> events_;  // (capacity)
  size_t size_ = 0;
  int64_t dropped_ = 0;
  int64_t iteration_ = -1;
  Clock::time_point origin_{};
  bool recording_ = false;
};

// RAII span: begins when built, ends when destroyed; nothing at all when the
// timeline is null or not recording.
class TimelineSpan {
 public:
  TimelineSpan(Timeline* timeline, TimelineKind kind, const char* name, const SpanArgs& args = {}) {
    if (timeline != nullptr && timeline->recording()) {
      timeline_ = timeline;
      slot_ = timeline->begin(kind, name, args);
    }
  }
  ~TimelineSpan() {
    if (timeline_ != nullptr) timeline_->end(slot_);
  }
  TimelineSpan(const TimelineSpan&) = delete;
  TimelineSpan& operator=(const TimelineSpan&) = delete;

 private:
  Timeline* timeline_ = nullptr;
  int64_t slot_ = -1;
};

// One rank's events for the merged trace.
struct TimelineTrack {
  int rank = 0;       // the trace's pid (and tid): one track per rank
  std::string label;  // its process name, e.g. "rank 3 (TP 1, PP 1, DP 0)"
  const TimelineEvent* events = nullptr;
  size_t size = 0;
};

// The displayed name of an event: "forward mb 3 chunk 0", "iteration 11",
// "wait start_all_reduce_sum(float)", "all_gather".
std::string timeline_event_name(const TimelineEvent& e);

// The Trace Event Format JSON of `tracks`: {"traceEvents": [...],
// "displayTimeUnit": "ms", "otherData": {...}}. Per track: "M" metadata events
// naming it (process_name, process_sort_index, thread_name), then one "X"
// event per span with ts and dur in microseconds, pid = tid = rank, cat = the
// kind, and args (iteration, micro_batch, chunk, group, bytes, peer where set).
// A span still open has dur 0. `other`: extra key/values for otherData
// (already JSON values, e.g. {"\"profile_step_start\"", "10"}).
std::string trace_event_json(const std::vector<TimelineTrack>& tracks,
                             const std::vector<std::pair<std::string, std::string>>& other = {});

// `s` as a JSON string literal, quotes included.
std::string json_quote(const std::string& s);

}  // namespace mt
