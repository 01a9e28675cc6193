#include "core/timeline.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace mt {

const char* timeline_kind_name(TimelineKind kind) {
  static const char* names[kTimelineKinds] = {
      "iteration",  "forward",   "backward",  "pipeline_recv", "pipeline_send", "collective",
      "comm_start", "comm_wait", "grad_sync", "optimizer",     "checkpoint"};
  const int k = int(kind);
  return k >= 0 && k < kTimelineKinds ? names[k] : "unknown";
}

Timeline::Timeline(size_t capacity) : events_(capacity) {}  // value-initialised: touched

void Timeline::start() {
  origin_ = Clock::now();
  recording_ = true;
}

int64_t Timeline::begin(TimelineKind kind, const char* name, const SpanArgs& args) {
  if (!recording_) return -1;
  if (size_ == events_.size()) {
    ++dropped_;
    return -1;
  }
  TimelineEvent& e = events_[size_];
  e.start_ns = now_ns();
  e.dur_ns = -1;
  e.bytes = args.bytes;
  e.iteration = iteration_;
  e.micro_batch = args.micro_batch;
  e.chunk = args.chunk;
  e.peer = args.peer;
  e.kind = kind;
  std::strncpy(e.name, name, sizeof e.name - 1);
  e.name[sizeof e.name - 1] = '\0';
  if (args.group != nullptr) {
    std::strncpy(e.group, args.group, sizeof e.group - 1);
    e.group[sizeof e.group - 1] = '\0';
  } else {
    e.group[0] = '\0';
  }
  return int64_t(size_++);
}

void Timeline::end(int64_t i) {
  if (i < 0 || size_t(i) >= size_) return;
  TimelineEvent& e = events_[size_t(i)];
  e.dur_ns = now_ns() - e.start_ns;
}

std::string timeline_event_name(const TimelineEvent& e) {
  std::string s;
  if (e.kind == TimelineKind::kCommWait) s = "wait ";
  s += e.name;
  // (appended piece by piece: "literal" + std::string trips GCC 12's false -Wrestrict)
  if (e.kind == TimelineKind::kIteration && e.iteration >= 0) {
    s += ' ';
    s += std::to_string(e.iteration);
  }
  if (e.micro_batch >= 0) {
    s += " mb ";
    s += std::to_string(e.micro_batch);
  }
  if (e.chunk >= 0) {
    s += " chunk ";
    s += std::to_string(e.chunk);
  }
  return s;
}

std::string json_quote(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(static_cast<unsigned char>(c)));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

namespace {

// Microseconds with nanosecond digits: "1234.567".
std::string micros(int64_t ns) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%" PRId64 ".%03" PRId64, ns / 1000, (ns < 0 ? -ns : ns) % 1000);
  return buf;
}

void append_metadata(std::string& out, const char* name, int pid, const std::string& arg) {
  out += "{\"name\":\"";
  out += name;
  out += "\",\"ph\":\"M\",\"ts\":0,\"pid\":" + std::to_string(pid) +
         ",\"tid\":" + std::to_string(pid) + ",\"args\":{" + arg + "}},\n";
}

}  // namespace

std::string trace_event_json(const std::vector<TimelineTrack>& tracks,
                             const std::vector<std::pair<std::string, std::string>>& other) {
  std::string out = "{\"displayTimeUnit\":\"ms\",\"otherData\":{";
  for (size_t i = 0; i < other.size(); ++i)
    out += (i ? "," : "") + other[i].first + ":" + other[i].second;
  out += "},\n\"traceEvents\":[\n";
  for (const TimelineTrack& t : tracks) {
    append_metadata(out, "process_name", t.rank, "\"name\":" + json_quote(t.label));
    append_metadata(out, "process_sort_index", t.rank, "\"sort_index\":" + std::to_string(t.rank));
    append_metadata(out, "thread_name", t.rank,
                    "\"name\":" + json_quote("rank " + std::to_string(t.rank)));
  }
  bool first = true;
  for (const TimelineTrack& t : tracks) {
    const std::string id = std::to_string(t.rank);
    for (size_t i = 0; i < t.size; ++i) {
      const TimelineEvent& e = t.events[i];
      if (!first) out += ",\n";
      first = false;
      out += "{\"name\":" + json_quote(timeline_event_name(e)) + ",\"cat\":\"" +
             timeline_kind_name(e.kind) + "\",\"ph\":\"X\",\"ts\":" + micros(e.start_ns) +
             ",\"dur\":" + micros(e.dur_ns < 0 ? 0 : e.dur_ns) + ",\"pid\":" + id +
             ",\"tid\":" + id + ",\"args\":{\"iteration\":" + std::to_string(e.iteration);
      if (e.micro_batch >= 0) out += ",\"micro_batch\":" + std::to_string(e.micro_batch);
      if (e.chunk >= 0) out += ",\"chunk\":" + std::to_string(e.chunk);
      if (e.group[0] != '\0') out += ",\"group\":" + json_quote(e.group);
      if (e.bytes >= 0) out += ",\"bytes\":" + std::to_string(e.bytes);
      if (e.peer >= 0) out += ",\"peer\":" + std::to_string(e.peer);
      out += "}}";
    }
  }
  out += "\n]}\n";
  return out;
}

}  // namespace mt
