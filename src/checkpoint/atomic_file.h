// Crash-safe file writes: write to "<path>.tmp", fsync, rename over <path>,
// fsync the directory. A reader then sees either the old file or the whole new
// one, never a torn one; a crash leaves at most a stray "<path>.tmp". This is
// how checkpoints are saved and how `latest_checkpointed_iteration.txt` is
// written last, so a half-saved checkpoint never looks complete.
//
// Every failure (no such directory, permission, disk full, short write) throws
// mt::Error naming the path and the system's reason.
#pragma once
#include <cstddef>
#include <string>

namespace mt {

// Writes a file through "<path>.tmp". Append with write(), then commit() to
// fsync + rename + fsync the directory. If the writer is destroyed (or throws)
// before commit(), the temporary file is removed and <path> is untouched.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(const std::string& path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  // Appends `bytes` bytes (handles partial writes and EINTR).
  void write(const void* data, size_t bytes);
  // fsync, close, rename "<path>.tmp" -> <path>, fsync the parent directory.
  void commit();

  const std::string& path() const { return path_; }
  const std::string& tmp_path() const { return tmp_path_; }
  size_t bytes_written() const { return written_; }

 private:
  void discard() noexcept;  // close and unlink the temporary file

  std::string path_;
  std::string tmp_path_;
  int fd_ = -1;
  size_t written_ = 0;
  bool committed_ = false;
};

// Replaces the file at `path` with `content` atomically (see above).
void atomic_write_text(const std::string& path, const std::string& content);

// Reads a whole file; throws mt::Error naming the path if it cannot be read.
std::string read_text_file(const std::string& path);

// fsync of a directory, so that a rename or a new entry in it survives a
// crash. `dir` may be "" (meaning ".").
void fsync_dir(const std::string& dir);

// The directory part of a path: "a/b/c.txt" -> "a/b", "c.txt" -> ".", "/x" -> "/".
std::string parent_dir(const std::string& path);

}  // namespace mt
