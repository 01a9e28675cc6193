// `megatron convert` (Megatron-LM's tools/checkpoint/convert.py, loader and
// saver in one binary):
//
//   hf -> megatron: a Hugging Face gpt2 / llama / mixtral / qwen / deepseek folder (config.json, safetensors
//     weights, tokenizer files) becomes a release checkpoint
//     <save>/release/mp_rank_TT_PPP/model.safetensors + meta.json + tokenizer/,
//     tracker "release", at the target TP/PP sizes; `train --load` fine-tunes it
//     from iteration 0 with a fresh optimizer, `generate --load` decodes it.
//   megatron -> hf: any checkpoint (the tracker's iteration, any TP/PP) becomes
//     config.json + safetensors weights (fp32, or bf16) + the tokenizer files.
//
// Both directions stream one tensor at a time (peak memory: one target shard
// or output file plus one full tensor) and refuse, before writing anything,
// whatever would not convert exactly: unknown architectures and options,
// missing, extra or misshaped tensors, TP/PP sizes that do not divide.
#pragma once
#include <cstdint>
#include <string>

namespace mt {

struct ConvertOptions {
  std::string load_dir, save_dir;
  // hf -> megatron
  int target_tp = 1, target_pp = 1;
  // Experts split over EP ranks: 1 keeps every expert in each mp_rank shard;
  // N > 1 writes them to N expert directories per stage (checkpoint_io.h).
  int target_ep = 1;
  int64_t make_vocab_size_divisible_by = 128;  // Megatron's default
  bool overwrite = false;  // --overwrite-checkpoints: write into a --save-dir that holds some
  // megatron -> hf
  bool bf16 = false;
  int64_t max_shard_size_mb = 5000;  // MB = 10^6 bytes, as Hugging Face counts
};

// Each prints progress and one summary line (with the peak RSS) to stdout;
// every refusal is an mt::Error naming the thing and the fix.
void convert_hf_to_megatron(const ConvertOptions& o);
void convert_megatron_to_hf(const ConvertOptions& o);

// The process's peak resident memory so far (getrusage ru_maxrss), in MB.
double peak_rss_mb();

}  // namespace mt
