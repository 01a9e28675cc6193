// Writes the seed corpus of the fuzz targets: small valid files made by our
// own writers, so the seeds follow the formats as the code changes (no
// binary files in git). Usage: make_corpus <out_dir>; creates
// <out_dir>/<target>/seed_* for each target of tests/fuzz.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "data/indexed_dataset.h"
#include "fuzz_util.h"

namespace fs = std::filesystem;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void put(const fs::path& dir, const std::string& name, const std::string& bytes) {
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << bytes;
}

// One indexed-dataset seed: uint32 .idx length, the .idx, the .bin.
void dataset_seed(const fs::path& dir, const std::string& name, mt::TokenDType dtype,
                  const std::vector<std::vector<int32_t>>& docs) {
  const std::string prefix = mt::fuzz::temp_path("seed");
  mt::IndexedDatasetWriter w(prefix, dtype);
  for (const auto& d : docs) w.add_document(d);
  w.finalize();
  const std::string idx = slurp(prefix + ".idx"), bin = slurp(prefix + ".bin");
  const uint32_t n = uint32_t(idx.size());
  put(dir, name, std::string(reinterpret_cast<const char*>(&n), 4) + idx + bin);
}

void safetensors_seed(const fs::path& dir, const std::string& name,
                      const std::vector<mt::StDType>& dtypes, bool metadata) {
  static const std::vector<unsigned char> bytes(64, 0x3c);  // any payload
  mt::SafetensorsWriter w;
  for (size_t i = 0; i < dtypes.size(); ++i) {
    const std::vector<int64_t> shape = i % 3 == 0   ? std::vector<int64_t>{2, 3}
                                       : i % 3 == 1 ? std::vector<int64_t>{4}
                                                    : std::vector<int64_t>{};
    w.add("t" + std::to_string(i), dtypes[i], shape, bytes.data());
  }
  if (metadata) {
    w.set_metadata("format", "megatron.cpp");
    w.set_metadata("slices", R"({"t0": [0, 6]})");
  }
  const std::string path = mt::fuzz::temp_path("seed.safetensors");
  w.write(path);
  put(dir, name, slurp(path));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <out_dir>\n", argv[0]);
    return 2;
  }
  const fs::path out = argv[1];
  using D = mt::TokenDType;
  const fs::path ds = out / "indexed_dataset";
  dataset_seed(ds, "seed_u16", D::kUInt16, {{1, 2, 3}, {4, 5}, {6}});
  dataset_seed(ds, "seed_i32", D::kInt32, {{70000, 1}, {}, {2, 3, 4, 5}});
  dataset_seed(ds, "seed_u8", D::kUInt8, {{7}});
  dataset_seed(ds, "seed_i64", D::kInt64, {{1, 2}, {3}});
  dataset_seed(ds, "seed_f32", D::kFloat32, {{1, 2, 3}});
  dataset_seed(ds, "seed_empty", D::kUInt16, {});

  using S = mt::StDType;
  const fs::path st = out / "safetensors";
  safetensors_seed(st, "seed_f32", {S::kF32, S::kF32}, true);
  safetensors_seed(st, "seed_mixed", {S::kBF16, S::kF16, S::kF64, S::kI64, S::kU8}, false);
  safetensors_seed(st, "seed_scalar", {S::kI32, S::kBool, S::kF32}, true);
  safetensors_seed(st, "seed_empty", {}, false);

  // meta.json as save_checkpoint writes it (iteration 10: fuzz_checkpoint_meta).
  const fs::path meta = out / "checkpoint_meta";
  const std::string model =
      R"("model":{"attention_dropout":0.1,"ffn_hidden_size":128,"hidden_dropout":0.1,)"
      R"("hidden_size":32,"init_method_std":0.02,"layernorm_epsilon":1e-05,)"
      R"("make_vocab_size_divisible_by":128,"max_position_embeddings":32,)"
      R"("num_attention_heads":4,"num_layers":2,"padded_vocab_size":128,"seq_length":32,)"
      R"("vocab_size":18})";
  put(meta, "seed_char",
      R"({"args":{"layer_stage":[0,0],)" + model +
          R"(,"seed":1234,"tokenizer":{"type":"char","vocab":["\n"," ","a","b"]}},)"
          R"("consumed_samples":32,"data_parallel_size":1,"format":"megatron.cpp checkpoint",)"
          R"("iteration":10,"pipeline_model_parallel_size":1,"skipped_iterations":0,)"
          R"("tensor_model_parallel_size":1,"version":1})");
  put(meta, "seed_pp2_fp16",
      R"({"args":{"layer_stage":[0,1],)" + model +
          R"(,"tokenizer":{"type":"gpt2","vocab_file":"vocab.json"}},)"
          R"("consumed_samples":320,"data_parallel_size":2,"format":"megatron.cpp checkpoint",)"
          R"("grad_scaler":{"scale":65536.0,"growth_tracker":3},)"
          R"("iteration":10,"pipeline_model_parallel_size":2,"skipped_iterations":1,)"
          R"("tensor_model_parallel_size":2,"version":1})");
  return 0;
}
