// --data-cache-path: blend indices (data/blend.h) saved once and reused, as
// Megatron's BlendedDataset caches its dataset_index / dataset_sample_index.
// World rank 0 reads the file for the blend's description or, if it is absent
// or damaged, builds the index and writes it (atomically); then every other
// rank reads it (or builds it where the folder is not shared). File
// <dir>/blend_index_<sha256 of the description, 16 hex>.bin:
//   8 bytes  magic "MTBLEND1"
//   uint64   description length L, then L bytes of description
//   uint64   N samples; int16[N] dataset index; int64[N] dataset sample index
//   uint32   CRC-32C of everything before it
// all little-endian. A damaged file is rebuilt, said once ("truncated", or
// "corrupt": a CRC-32C or size mismatch, a changed sample count); never trusted.
#pragma once
#include <string>

#include "data/dataset_builder.h"
#include "comm/communicator.h"

namespace mt {

// Empty `dir`: no cache (every rank builds each index in memory).
BlendIndexSource blend_cache_source(const std::string& dir, const Communicator& world);

// The cache file of a description, and its reader (false: absent or damaged,
// with why in *problem) and writer (throws mt::Error naming the file).
std::string blend_cache_file(const std::string& dir, const std::string& description);
bool read_blend_cache(const std::string& file, const std::string& description, BlendIndex* index,
                      std::string* problem);
void write_blend_cache(const std::string& file, const std::string& description,
                       const BlendIndex& index);

}  // namespace mt
