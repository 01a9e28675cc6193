#include "observe/progress_log.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/error.h"

namespace mt {

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string local_time(double seconds) {
  const std::time_t t = std::time_t(seconds);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

double parse_local_time(const std::string& text) {
  std::tm tm{};
  if (std::sscanf(text.c_str(), "%d-%d-%d %d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec) != 6)
    return -1;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  tm.tm_isdst = -1;
  return double(std::mktime(&tm));
}

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream in(line);
  for (std::string part; std::getline(in, part, '\t');) out.push_back(part);
  return out;
}

// The text after ": " of a "Name: value" field.
std::string field_value(const std::string& f) {
  const size_t at = f.find(": ");
  return at == std::string::npos ? std::string() : f.substr(at + 2);
}

}  // namespace

ProgressLog::ProgressLog(const std::string& save_dir, int world_size, bool active,
                         double flops_at_start)
    : path_(save_dir + "/progress.txt"),
      world_size_(world_size),
      active_(active),
      flops_at_start_(flops_at_start),
      start_seconds_(now_seconds()) {
  append("Starting job");
}

void ProgressLog::append(const std::string& event) {
  if (!active_) return;
  std::ofstream out(path_, std::ios::app);
  const char* job = std::getenv("SLURM_JOB_ID");
  out << local_time(now_seconds()) << "\tJob ID: " << (job ? job : "") << "\t# GPUs: "
      << world_size_ << "\t" << event << "\n";
  MT_CHECK(out.good(), "--log-progress: cannot append to ", path_,
           "; fix: check the --save folder's permissions and free space");
}

void ProgressLog::checkpoint(int64_t iteration, double flops, int64_t tokens, bool async) {
  if (!active_) return;
  // Megatron's get_start_time_from_progress_log: the first "Starting job"
  // since the world size last changed, and the operations committed then.
  double start = -1, start_flops = 0, latest = 0, uncommitted = -1;
  std::ifstream in(path_);
  for (std::string line; std::getline(in, line);) {
    const std::vector<std::string> f = split_tabs(line);
    if (f.size() < 4) continue;
    const std::string& event = f[3];
    if (event == "Saved checkpoint" && f.size() > 7) latest = std::atof(field_value(f[7]).c_str());
    if (event == "Saving async checkpoint" && f.size() > 7)
      uncommitted = std::atof(field_value(f[7]).c_str());
    if (event == "Saved async checkpoint" && uncommitted >= 0) {
      latest = uncommitted;
      uncommitted = -1;
    }
    if (std::atoi(field_value(f[2]).c_str()) != world_size_) {
      start = -1;
      continue;
    }
    if (event == "Starting job" && start < 0) {
      start = parse_local_time(f[0]);
      start_flops = latest;
    }
  }
  const double now = now_seconds();
  const double job = (flops - flops_at_start_) / ((now - start_seconds_) * 1e12 * world_size_);
  const double elapsed = start >= 0 ? now - start : now - start_seconds_;
  const double cumulative =
      (flops - (start >= 0 ? start_flops : flops_at_start_)) / (elapsed * 1e12 * world_size_);
  char line[512];
  std::snprintf(line, sizeof line,
                "%s\tIteration: %lld\tJob throughput: %.1f TFLOP/s/GPU\tCumulative throughput: "
                "%.1f TFLOP/s/GPU\tFloating-point operations: %.2e\tTokens (in billions): %.2f",
                async ? "Saving async checkpoint" : "Saved checkpoint",
                static_cast<long long>(iteration), job, cumulative, flops, double(tokens) / 1e9);
  append(line);
}

void ProgressLog::async_committed(int64_t iteration) {
  append("Saved async checkpoint\tIteration: " + std::to_string(iteration));
}

}  // namespace mt
