#include "comm/comm_backend.h"

#include <climits>

#include "core/error.h"

namespace mt {

size_t elem_bytes(ElemType type) {
  switch (type) {
    case ElemType::kF32:
    case ElemType::kI32:
      return 4;
    case ElemType::kF64:
    case ElemType::kI64:
      return 8;
    case ElemType::kU16:
      return 2;
    case ElemType::kU8:
      return 1;
  }
  MT_FAIL("unknown element type ", int(type));
}

ChunkSplit chunk_split(const std::vector<int64_t>& counts) {
  ChunkSplit s;
  int64_t at = 0;
  for (int64_t c : counts) {
    MT_CHECK(c >= 0 && at + c <= INT_MAX, "chunk_split: chunk of ", c, " floats at offset ", at,
             " does not fit an MPI count (0 .. ", INT_MAX,
             "); fix: use smaller buckets (--ddp-bucket-size)");
    s.counts.push_back(int(c));
    s.displs.push_back(int(at));
    at += c;
  }
  return s;
}

void fail_comm(const char* kind, const char* op, const std::string& group,
               const std::string& reason) {
  MT_FAIL(kind, " ", op, " on group '", group, "' failed: ", reason,
          "; fix: see the first error of the job (another rank may have failed first)");
}

}  // namespace mt
