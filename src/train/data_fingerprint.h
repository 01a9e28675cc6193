// What a checkpoint remembers of the data it was trained on: for each dataset
// (a .bin/.idx prefix), both files' sizes and CRC-32C, saved in meta.json's
// args ("datasets"). A resume whose dataset under the same path has other
// contents would silently continue on other samples than the checkpoint's
// consumed ones (Megatron's sample order is a function of the documents), so
// it stops and says so, unless --allow-changed-data. A --mock-data run records
// what its documents are instead (they are computed, not read).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mt {

// One record per prefix: {"prefix", "path" (absolute), "bin_bytes", "idx_bytes",
// "bin_crc32c", "idx_crc32c"}. Reads every byte of both files, mapped (CRC-32C
// on the crc32 instruction over the OpenMP threads: GB/s from the page cache).
nlohmann::json dataset_fingerprints(const std::vector<std::string>& prefixes);

// --mock-data's record: {"mock": "MockGPTDataset", "documents", "seed",
// "max_sequence_length", "split", "vocab_size", "eod"}.
nlohmann::json mock_data_record(int64_t vocab_size, int64_t eod);

// One line when the checkpoint's data and this run's differ in kind (mock
// documents against a data path, either way) or in their mock record; "" when
// not. Like a changed --data-path (which Megatron allows) it is a note, not a
// refusal: the run goes on reading its own data from the consumed samples on.
std::string changed_data_source(const nlohmann::json& saved, const nlohmann::json& now,
                                const std::string& checkpoint);

// The first dataset whose contents differ between the checkpoint's records
// (`saved`; a checkpoint without them: none) and this run's (`now`), as one
// line naming the files, what changed and the fixes; "" when none did.
// Datasets are matched by absolute path; one in only one of the lists is a
// change of --data-path, which Megatron allows, not of contents.
std::string changed_dataset(const nlohmann::json& saved, const nlohmann::json& now,
                            const std::string& checkpoint);

}  // namespace mt
