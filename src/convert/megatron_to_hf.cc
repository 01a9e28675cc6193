// megatron -> hf: a checkpoint (any TP/PP) becomes a Hugging Face folder.
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "checkpoint/atomic_file.h"
#include "checkpoint/dir_lock.h"
#include "convert/convert.h"
#include "convert/hf_config.h"
#include "convert/hf_folder.h"
#include "convert/hf_weights.h"
#include "core/error.h"
#include "core/log.h"
#include "train/checkpoint_dir.h"
#include "train/checkpoint_io.h"
#include "train/checkpoint_shard.h"
#include "train/checkpoint_tokenizer.h"
#include "train/checkpoint_verify.h"

namespace mt {

namespace fs = std::filesystem;

namespace {

bool is_weight_file(const std::string& f) {
  return f == "model.safetensors" || f == "model.safetensors.index.json" ||
         (f.rfind("model-", 0) == 0 && f.size() > 12 &&
          f.compare(f.size() - 12, 12, ".safetensors") == 0);
}

// Creates --save-dir and locks it for the conversion (checkpoint/dir_lock.h:
// one writer per folder; the caller holds the result), then refuses a folder
// holding a model (unless --overwrite-checkpoints, which removes its weight
// files first, so no stale shard survives).
DirLock prepare_hf_dir(const ConvertOptions& o) {
  std::error_code ec;
  fs::create_directories(o.save_dir, ec);
  MT_CHECK(!ec && fs::is_directory(o.save_dir, ec), "cannot create --save-dir ", o.save_dir, ": ",
           ec ? ec.message() : "exists and is not a directory");
  DirLock lock = lock_dir_or_fail(o.save_dir, "--save-dir");
  std::vector<fs::path> held;
  for (const fs::directory_entry& e : fs::directory_iterator(o.save_dir, ec)) {
    const std::string f = e.path().filename().string();
    if (f == "config.json" || is_weight_file(f)) held.push_back(e.path());
  }
  if (held.empty()) return lock;
  MT_CHECK(o.overwrite, "--save-dir ", o.save_dir, " already holds a model (",
           held.front().filename().string(), (held.size() > 1 ? ", ..." : ""),
           "); fix: choose a new --save-dir, or pass --overwrite-checkpoints to replace it");
  for (const fs::path& p : held)
    if (is_weight_file(p.filename().string())) fs::remove(p, ec);
  return lock;
}

// The checkpoint's tokenizer files (checked against their recorded hashes)
// under Hugging Face's names; returns what was copied, for the log.
std::string copy_tokenizer(const nlohmann::json& record, const std::string& iter,
                           const std::string& out) {
  const std::string type = record.value("type", "");
  if (type == "char" || type == "NullTokenizer")
    return "none (" + type + " has no Hugging Face tokenizer; the weights are written alone)";
  const nlohmann::json r = adopt_tokenizer_record(record, iter);
  std::string copied;
  for (const auto& [role, name] : {std::pair<const char*, const char*>{"vocab_file", "vocab.json"},
                                   {"merge_file", "merges.txt"},
                                   {"tokenizer_model", "tokenizer.model"}}) {
    if (!r.contains(role) || !r.at(role).is_object()) continue;
    std::error_code ec;
    fs::copy_file(r.at(role).at("path").get<std::string>(), out + "/" + name,
                  fs::copy_options::overwrite_existing, ec);
    MT_CHECK(!ec, "cannot copy the tokenizer file ", name, " into ", out, ": ", ec.message());
    copied += (copied.empty() ? "" : ", ") + std::string(name);
  }
  return type + " (" + copied + ")";
}

}  // namespace

void convert_megatron_to_hf(const ConvertOptions& o) {
  const Timer timer;
  MT_CHECK(o.max_shard_size_mb > 0, "--max-shard-size-mb ", o.max_shard_size_mb, " must be > 0");
  const nlohmann::json meta = read_checkpoint_meta(o.load_dir);
  const int64_t it = meta.at("iteration").get<int64_t>();
  const std::string iter = checkpoint_iteration_dir(o.load_dir, it);
  const int tp = meta.at("tensor_model_parallel_size").get<int>();
  const int pp = meta.at("pipeline_model_parallel_size").get<int>();
  const nlohmann::json& args = meta.at("args");
  const ModelConfig cfg = model_config_from_json(args.at("model"));
  const std::vector<int> layer_stage = args.at("layer_stage").get<std::vector<int>>();
  const HfFamily fam = hf_family_of(cfg);
  MT_CHECK(cfg.padded_vocab_size >= cfg.vocab_size && cfg.vocab_size > 0, "checkpoint ", iter,
           ": padded vocabulary ", cfg.padded_vocab_size, " is smaller than the vocabulary ",
           cfg.vocab_size, "; the meta.json is damaged");

  const ParamRegistry full_reg(cfg, StageLayout{0, 1, 0, cfg.num_layers, true, true, {}});
  const std::vector<HfParamMap> maps = hf_param_maps(fam, full_reg, "transformer.");
  std::vector<HfTensor> order;
  int64_t params = 0;
  for (const HfParamMap& m : maps)
    for (const HfTensor& t : m.hf) {
      order.push_back(t);
      params += t.numel();
    }
  const DirLock lock = prepare_hf_dir(o);  // held until the folder is complete
  log_line(true, "convert: %s (iteration %lld, TP%d PP%d) -> %s %s: %s\n", o.load_dir.c_str(),
           static_cast<long long>(it), tp, pp, hf_family_name(fam), o.save_dir.c_str(),
           cfg.summary().c_str());
  HfWeightsWriter out(o.save_dir, order, o.bf16, uint64_t(o.max_shard_size_mb) * 1000000);

  const CheckpointVerifier verifier(meta, o.load_dir, iter, true);
  const std::string note = verification_note(verifier, iter, true);
  if (!note.empty()) log_line(true, "%s\n", note.c_str());
  std::map<std::string, SafetensorsReader> shards;  // by rank dir, opened when first read
  std::vector<float> full;
  for (const HfParamMap& m : maps) {
    const ParamSpec& p = *m.param;
    full.resize(size_t(p.global_rows * p.global_cols));
    const ShardSource read = [&](const std::string& rank_dir, float* dst, int64_t n) {
      SafetensorsReader& r = shards[rank_dir];
      if (r.path().empty()) verifier.open(r, rank_dir + "/model.safetensors");
      MT_CHECK(r.has(p.name), r.path(), " has no tensor '", p.name,
               "'; the checkpoint is incomplete or not of its meta.json's model");
      r.read_f32(p.name, dst, n);
      r.release_pages(p.name);
    };
    read_full_tensor(iter, read, p, tp, saved_stage_of(p, pp, layer_stage), full.data());
    std::vector<std::vector<float>> hf(m.hf.size());
    std::vector<float*> ptrs;
    for (size_t i = 0; i < m.hf.size(); ++i) {
      hf[i].resize(size_t(m.hf[i].numel()));
      ptrs.push_back(hf[i].data());
    }
    megatron_to_hf(m, cfg, full.data(), ptrs);
    for (size_t i = 0; i < m.hf.size(); ++i) out.put(m.hf[i].name, std::move(hf[i]));
  }
  out.finish();
  const std::string dtype = o.bf16 ? "bfloat16" : "float32";
  const nlohmann::json& record = args.at("tokenizer");
  atomic_write_text(o.save_dir + "/config.json",
                    hf_config_from_model(cfg, fam, record, dtype).dump(2) + "\n");
  const std::string tok = copy_tokenizer(record, iter, o.save_dir);
  log_line(true, "convert: wrote %s (%s, %zu weight file%s, %lld parameters, %s, tokenizer %s) in "
           "%.1f s; peak RSS %.1f MB\n", o.save_dir.c_str(), hf_family_name(fam), out.files(),
           out.files() == 1 ? "" : "s", static_cast<long long>(params), dtype.c_str(), tok.c_str(),
           timer.seconds(), peak_rss_mb());
}

}  // namespace mt
