#include "fuzz_util.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace mt::fuzz {
namespace {

std::string make_dir() {
  // $TMPDIR first: scripts/fuzz.sh points it at a directory it removes, so
  // the files of a crashed run do not pile up in /dev/shm.
  const char* env = std::getenv("TMPDIR");
  const std::string base = env && *env ? env
                           : std::filesystem::is_directory("/dev/shm") ? "/dev/shm"
                                                                        : "/tmp";
  std::string tmpl = base + "/mt_fuzz_XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    std::perror("mt_fuzz: mkdtemp");
    std::abort();
  }
  return tmpl;
}

struct Dir {
  std::string path = make_dir();
  ~Dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

}  // namespace

std::string temp_path(const std::string& name) {
  static Dir dir;  // removed by the static destructor when libFuzzer exits
  return dir.path + "/" + name;
}

void write_file(const std::string& path, const uint8_t* data, size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || (size > 0 && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0) {
    std::perror(("mt_fuzz: write " + path).c_str());
    std::abort();
  }
}

void wrong_answer(const std::string& what) {
  std::fprintf(stderr, "mt_fuzz: WRONG ANSWER: %s\n", what.c_str());
  std::abort();
}

}  // namespace mt::fuzz
