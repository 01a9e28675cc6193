// CRC-32C (Castagnoli: polynomial 0x1EDC6F41, bit-reflected, initial value
// and final xor 0xFFFFFFFF), the checksum of checkpoint files and tensors.
// CRC-32C("123456789") = 0xE3069283.
//
// On x86-64 CPUs with SSE4.2 it runs on the crc32 instruction, three
// independent streams at a time (the instruction's latency is 3 cycles, its
// throughput 1 per cycle) joined with crc32c_combine; elsewhere (or without
// SSE4.2 at run time) a slicing-by-8 table. Both give the same values (tested).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace mt {

// The CRC of (bytes whose CRC is `crc`) followed by data[0, n): crc32c_extend(0,
// d, n) is the CRC of d, and extending it by more bytes continues the same CRC.
uint32_t crc32c_extend(uint32_t crc, const void* data, size_t n);
inline uint32_t crc32c(const void* data, size_t n) { return crc32c_extend(0, data, n); }

// The same value as crc32c(data, n), hashed in 4 MB pieces on all OpenMP
// threads and joined with crc32c_combine (large tensors of a checkpoint).
uint32_t crc32c_parallel(const void* data, size_t n);

// The CRC of A followed by B from crc(A), crc(B) and B's length in bytes.
uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

// The two implementations behind crc32c_extend, for tests and the benchmark.
uint32_t crc32c_extend_portable(uint32_t crc, const void* data, size_t n);
bool crc32c_hardware_available();  // SSE4.2 on this CPU (false off x86-64)
uint32_t crc32c_extend_hardware(uint32_t crc, const void* data, size_t n);  // needs the above

// "e3069283": 8 lowercase hex digits, as checkpoints store it.
std::string crc32c_hex(uint32_t crc);
// Parses exactly 8 hex digits; false for anything else.
bool crc32c_from_hex(const std::string& s, uint32_t* out);

}  // namespace mt
