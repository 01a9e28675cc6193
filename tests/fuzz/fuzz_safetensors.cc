// libFuzzer target: the safetensors reader (checkpoint/safetensors.h).
// Input: the whole file. Contract: a bad file throws mt::Error; for an
// accepted one every tensor's shape, dtype and byte range agree with each
// other and lie inside the file, and reading it (as a checkpoint load does:
// allocate numel floats, read_f32) either works or throws mt::Error.
#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "core/error.h"
#include "fuzz_util.h"

using mt::fuzz::wrong_answer;

namespace {

void check_accepted(const mt::SafetensorsReader& r, size_t file_size) {
  for (const std::string& name : r.names()) {
    const mt::StTensorInfo& info = r.info(name);
    const int64_t numel = info.numel();
    const size_t es = mt::st_dtype_size(info.dtype);
    if (numel < 0) wrong_answer("accepted tensor '" + name + "' with an invalid shape");
    if (info.begin > info.end || info.end > file_size)
      wrong_answer("tensor '" + name + "' lies outside the file");
    // Compare without multiplying (the product is what may overflow).
    if (uint64_t(numel) != info.bytes() / es || info.bytes() % es != 0)
      wrong_answer("tensor '" + name + "': numel disagrees with its byte range");
    if (r.raw(name) == nullptr && info.bytes() > 0) wrong_answer("null data");
    std::vector<float> out(static_cast<size_t>(numel));  // what a checkpoint load allocates
    try {
      r.read_f32(name, out.data(), numel);
      r.read_f32(name, out.data(), info.shape);
    } catch (const mt::Error&) {  // e.g. an integer dtype
    }
  }
  (void)r.metadata_or("format", "");
  try {
    r.info("no such tensor \x01");
    wrong_answer("info() of a missing tensor did not throw");
  } catch (const mt::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = mt::fuzz::temp_path("t.safetensors");
  mt::fuzz::write_file(path, data, size);
  try {
    mt::SafetensorsReader r(path);
    check_accepted(r, size);
  } catch (const mt::Error&) {  // a refused file: the expected outcome
  }
  return 0;
}
