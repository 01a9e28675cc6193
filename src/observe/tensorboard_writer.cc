#include "observe/tensorboard_writer.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "checkpoint/crc32c.h"
#include "core/error.h"
#include "core/log.h"

namespace mt {

namespace {

// Protobuf wire types.
constexpr uint32_t kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += char(uint8_t(v) | 0x80);
    v >>= 7;
  }
  out += char(uint8_t(v));
}

void put_tag(std::string& out, uint32_t field, uint32_t wire_type) {
  put_varint(out, uint64_t(field) << 3 | wire_type);
}

template <class T>
void put_le(std::string& out, T v) {  // little-endian, as protobuf's fixed fields
  uint8_t b[sizeof(T)];
  std::memcpy(b, &v, sizeof v);  // x86-64 and the other targets here are little-endian
  out.append(reinterpret_cast<const char*>(b), sizeof b);
}

void put_bytes(std::string& out, uint32_t field, const std::string& bytes) {
  put_tag(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out += bytes;
}

// Event's fields 1 (wall_time) and 2 (step; left out when 0, protobuf's default).
std::string event_header(double wall_time, int64_t step) {
  std::string e;
  put_tag(e, 1, kFixed64);
  put_le(e, wall_time);
  if (step != 0) {
    put_tag(e, 2, kVarint);
    put_varint(e, uint64_t(step));  // int64: two's complement, 10 bytes if negative
  }
  return e;
}

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

uint32_t tfrecord_masked_crc(const void* data, size_t n) {
  const uint32_t crc = crc32c(data, n);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string tfrecord(const std::string& data) {
  std::string r;
  const uint64_t len = data.size();
  put_le(r, len);
  put_le(r, tfrecord_masked_crc(r.data(), sizeof len));
  r += data;
  put_le(r, tfrecord_masked_crc(data.data(), data.size()));
  return r;
}

std::string event_file_version(double wall_time) {
  std::string e = event_header(wall_time, 0);
  put_bytes(e, 3, "brain.Event:2");
  return e;
}

std::string event_scalar(double wall_time, int64_t step, const std::string& tag, float value) {
  std::string v;  // Summary.Value
  put_bytes(v, 1, tag);
  put_tag(v, 2, kFixed32);
  put_le(v, value);
  std::string summary;
  put_bytes(summary, 1, v);
  std::string e = event_header(wall_time, step);
  put_bytes(e, 5, summary);
  return e;
}

std::string events_file_name(int64_t unix_time, int n) {
  char host[256] = "localhost";
  if (::gethostname(host, sizeof host) != 0) std::strcpy(host, "localhost");
  host[sizeof host - 1] = '\0';
  char buf[400];
  std::snprintf(buf, sizeof buf, "events.out.tfevents.%010lld.%s.%d.%d",
                static_cast<long long>(unix_time), host, int(::getpid()), n);
  return buf;
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  MT_CHECK(!fs::exists(st) || fs::is_directory(st), "--tensorboard-dir ", dir,
           " is not a directory; fix: pass a directory (it is created if missing)");
  fs::create_directories(dir, ec);
  MT_CHECK(!ec, "cannot create the --tensorboard-dir directory ", dir, " (", ec.message(),
           "); fix: pass a directory this user can create and write");
  const double now = unix_seconds();
  // A new file each run (a resumed one too): never one that exists ("x").
  for (int n = 0; file_ == nullptr && n < 1000; ++n) {
    path_ = (fs::path(dir) / events_file_name(int64_t(now), n)).string();
    file_ = std::fopen(path_.c_str(), "wbx");
    if (file_ == nullptr && errno != EEXIST) break;
  }
  MT_CHECK(file_ != nullptr, "cannot write TensorBoard events to --tensorboard-dir ", dir, " (",
           path_, ": ", std::strerror(errno), "); fix: pass a directory this user can write");
  const std::string first = tfrecord(event_file_version(now));
  const bool written =
      std::fwrite(first.data(), 1, first.size(), file_) == first.size() && std::fflush(file_) == 0;
  if (!written) {
    const int err = errno;
    std::fclose(file_);
    file_ = nullptr;
    MT_FAIL("cannot write TensorBoard events to --tensorboard-dir ", dir, " (", path_, ": ",
            std::strerror(err), "); fix: free space there or pass another directory");
  }
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void TensorBoardWriter::write_record(const std::string& event) {
  if (file_ == nullptr) return;
  const std::string r = tfrecord(event);
  if (std::fwrite(r.data(), 1, r.size(), file_) != r.size()) flush();  // reports and stops
}

void TensorBoardWriter::add_scalar(const std::string& tag, double value, int64_t step) {
  write_record(event_scalar(unix_seconds(), step, tag, float(value)));
}

void TensorBoardWriter::flush() {
  if (file_ == nullptr) return;
  if (std::fflush(file_) == 0 && !std::ferror(file_)) return;
  log_line(true,
           "warning: writing TensorBoard events to %s failed (%s); no more are written "
           "this run (training goes on)\n",
           path_.c_str(), std::strerror(errno));
  std::fclose(file_);
  file_ = nullptr;
}

}  // namespace mt
