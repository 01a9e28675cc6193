// A reader of TensorBoard event files written from the specifications alone
// (TFRecord framing: tensorflow/core/lib/io/record_writer.cc; the Event,
// Summary and Summary.Value messages: tensorflow/core/util/event.proto and
// tensorflow/core/framework/summary.proto), with its own bitwise CRC-32C, so
// that the tests check megatron's writer against the format rather than
// against itself. Any framing, checksum or protobuf error fails the test.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

namespace mt::test {

// CRC-32C, bit by bit: reflected polynomial 0x82F63B78, init and final xor ~0.
inline uint32_t spec_crc32c(const uint8_t* p, size_t n) {
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

inline uint32_t spec_masked_crc(const uint8_t* p, size_t n) {
  const uint32_t crc = spec_crc32c(p, n);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

struct TbScalar {
  std::string tag;
  float value = 0;
  int64_t step = 0;
  double wall_time = 0;
};

struct TbEvent {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;
  std::vector<TbScalar> values;
};

// Protobuf wire format: a cursor over one message's bytes.
struct ProtoCursor {
  const uint8_t* p;
  const uint8_t* end;
  bool ok = true;

  bool done() const { return !ok || p >= end; }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p >= end) break;
      const uint8_t b = *p++;
      v |= uint64_t(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return v;
    }
    ok = false;
    return 0;
  }
  template <class T>
  T fixed() {
    T v{};
    if (end - p < ptrdiff_t(sizeof v)) {
      ok = false;
      return v;
    }
    std::memcpy(&v, p, sizeof v);
    p += sizeof v;
    return v;
  }
  std::string bytes() {
    const uint64_t n = varint();
    if (!ok || uint64_t(end - p) < n) {
      ok = false;
      return {};
    }
    std::string s(reinterpret_cast<const char*>(p), size_t(n));
    p += n;
    return s;
  }
  void skip(uint32_t wire_type) {
    switch (wire_type) {
      case 0:
        varint();
        break;
      case 1:
        fixed<uint64_t>();
        break;
      case 2:
        bytes();
        break;
      case 5:
        fixed<uint32_t>();
        break;
      default:
        ok = false;
    }
  }
};

inline ProtoCursor cursor_of(const std::string& s) {
  const auto* b = reinterpret_cast<const uint8_t*>(s.data());
  return ProtoCursor{b, b + s.size()};
}

// Summary.Value { string tag = 1; float simple_value = 2; }
inline bool parse_value(const std::string& bytes, TbScalar* out) {
  ProtoCursor c = cursor_of(bytes);
  bool has_value = false;
  while (!c.done()) {
    const uint64_t key = c.varint();
    const uint32_t field = uint32_t(key >> 3), wire = uint32_t(key & 7);
    if (field == 1 && wire == 2) {
      out->tag = c.bytes();
    } else if (field == 2 && wire == 5) {
      out->value = c.fixed<float>();
      has_value = true;
    } else {
      c.skip(wire);
    }
  }
  return c.ok && has_value;
}

// Event { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
// Summary { repeated Value value = 1; }
inline bool parse_event(const std::string& bytes, TbEvent* out) {
  ProtoCursor c = cursor_of(bytes);
  std::vector<std::string> values;
  while (!c.done()) {
    const uint64_t key = c.varint();
    const uint32_t field = uint32_t(key >> 3), wire = uint32_t(key & 7);
    if (field == 1 && wire == 1) {
      out->wall_time = c.fixed<double>();
    } else if (field == 2 && wire == 0) {
      out->step = int64_t(c.varint());
    } else if (field == 3 && wire == 2) {
      out->file_version = c.bytes();
    } else if (field == 5 && wire == 2) {
      const std::string summary = c.bytes();
      ProtoCursor s = cursor_of(summary);
      while (!s.done()) {
        const uint64_t k = s.varint();
        if ((k >> 3) == 1 && (k & 7) == 2)
          values.push_back(s.bytes());
        else
          s.skip(uint32_t(k & 7));
      }
      if (!s.ok) return false;
    } else {
      c.skip(wire);
    }
  }
  for (const std::string& v : values) {
    TbScalar sc;
    if (!parse_value(v, &sc)) return false;
    sc.step = out->step;
    sc.wall_time = out->wall_time;
    out->values.push_back(sc);
  }
  return c.ok;
}

// Every record of an events file; ADD_FAILUREs on a framing, CRC or protobuf error.
inline std::vector<TbEvent> read_events_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string data((std::istreambuf_iterator<char>(in)), {});
  const auto* b = reinterpret_cast<const uint8_t*>(data.data());
  std::vector<TbEvent> events;
  size_t pos = 0;
  while (pos < data.size()) {
    if (data.size() - pos < 12) {
      ADD_FAILURE() << path << ": truncated record header at byte " << pos;
      break;
    }
    uint64_t len;
    uint32_t len_crc;
    std::memcpy(&len, b + pos, 8);
    std::memcpy(&len_crc, b + pos + 8, 4);
    if (len_crc != spec_masked_crc(b + pos, 8)) {
      ADD_FAILURE() << path << ": bad length CRC at byte " << pos;
      break;
    }
    if (data.size() - pos - 12 < len + 4) {
      ADD_FAILURE() << path << ": truncated record at byte " << pos;
      break;
    }
    uint32_t data_crc;
    std::memcpy(&data_crc, b + pos + 12 + len, 4);
    if (data_crc != spec_masked_crc(b + pos + 12, size_t(len))) {
      ADD_FAILURE() << path << ": bad data CRC at byte " << pos;
      break;
    }
    TbEvent e;
    if (!parse_event(data.substr(pos + 12, size_t(len)), &e)) {
      ADD_FAILURE() << path << ": not an Event protobuf at byte " << pos;
      break;
    }
    events.push_back(e);
    pos += 12 + len + 4;
  }
  return events;
}

// The events files of a directory (names holding "tfevents", as TensorBoard
// finds them), sorted by name (their time stamp first).
inline std::vector<std::string> events_files(const std::string& dir) {
  std::vector<std::string> out;
  if (!std::filesystem::is_directory(dir)) return out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().find("tfevents") != std::string::npos)
      out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

// tag -> step -> value, over a file's scalars (a repeated (tag, step) fails).
using TbSeries = std::map<std::string, std::map<int64_t, float>>;
inline TbSeries scalars_by_tag(const std::vector<TbEvent>& events) {
  TbSeries out;
  for (const TbEvent& e : events)
    for (const TbScalar& s : e.values) {
      EXPECT_EQ(out[s.tag].count(s.step), 0u) << s.tag << " written twice at step " << s.step;
      out[s.tag][s.step] = s.value;
    }
  return out;
}

}  // namespace mt::test
