// TensorBoard event files, written by hand (no protobuf library): what
// torch.utils.tensorboard's SummaryWriter writes for add_scalar, so that
// `tensorboard --logdir DIR` shows a run as it shows Megatron-LM's.
//
// A file is a sequence of TFRecords, each
//   uint64 length | uint32 masked CRC-32C of those 8 bytes | data | uint32 masked CRC-32C of data
// (little-endian; mask(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8), whose data is one
// tensorflow.Event protobuf:
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; float simple_value = 2; }
// The first record is an Event with file_version "brain.Event:2"; each scalar
// after it is one Event with one Value, as add_scalar writes it.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>

namespace mt {

// The TFRecord checksum of data[0, n): CRC-32C, rotated right by 15 and offset.
uint32_t tfrecord_masked_crc(const void* data, size_t n);

// One TFRecord around `data` (the framing above).
std::string tfrecord(const std::string& data);

// Event protobufs (the encoding above; fields at their defaults are omitted,
// as protobuf does: step 0 writes no step field).
std::string event_file_version(double wall_time);
std::string event_scalar(double wall_time, int64_t step, const std::string& tag, float value);

// The events file name torch's SummaryWriter gives (and so Megatron's runs):
// "events.out.tfevents.<10-digit unix time>.<hostname>.<pid>.<n>", n counting
// the files this process opened in that second from 0.
std::string events_file_name(int64_t unix_time, int n);

// One events file, opened at construction (its first record written and
// flushed). add_scalar buffers in the C stream; flush() pushes what was added
// to the file, so that a TensorBoard reading it sees it.
class TensorBoardWriter {
 public:
  // Opens a NEW events file in `dir` (created if missing, as SummaryWriter
  // does); throws Error naming the path and the fix when `dir` is not a
  // directory or cannot be written.
  explicit TensorBoardWriter(const std::string& dir);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  void add_scalar(const std::string& tag, double value, int64_t step);
  // Writes the buffered records to the file. A failed write (a full disk)
  // warns once and turns the writer off: the run goes on without TensorBoard.
  void flush();
  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& event);
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace mt
