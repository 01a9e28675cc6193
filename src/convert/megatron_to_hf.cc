// megatron -> hf: a checkpoint (any TP/PP) becomes a Hugging Face folder.
#include <filesystem>
#include <map>
#include <memory>

#include <nlohmann/json.hpp>

#include "checkpoint/atomic_dir.h"
#include "checkpoint/atomic_file.h"
#include "checkpoint/dir_lock.h"
#include "convert/convert.h"
#include "convert/convert_output.h"
#include "convert/hf_config.h"
#include "convert/hf_deepseek.h"
#include "convert/hf_folder.h"
#include "convert/hf_weights.h"
#include "core/error.h"
#include "core/log.h"
#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/checkpoint_io.h"
#include "checkpoint/checkpoint_shard.h"
#include "checkpoint/checkpoint_tokenizer.h"
#include "checkpoint/checkpoint_verify.h"

namespace mt {

namespace fs = std::filesystem;

namespace {

bool is_weight_file(const std::string& f) {
  return f == "model.safetensors" || f == "model.safetensors.index.json" ||
         (f.rfind("model-", 0) == 0 && f.size() > 12 &&
          f.compare(f.size() - 12, 12, ".safetensors") == 0);
}

// What an export writes into a Hugging Face folder. The rest of a folder it
// replaces (README.md, .git, ...) is carried over into the new copy.
bool written_by_export(const std::string& f) {
  return f == "config.json" || is_weight_file(f) || f == "vocab.json" || f == "merges.txt" ||
         f == "tokenizer.model" || f == "tokenizer.json" || f == "tokenizer_config.json" ||
         f == kDirLockFile;
}

// Moves what the export does not write from `from` (the previous copy of the
// folder) into `to` (the new one), but for names `to` already has.
void carry_over_other_files(const std::string& from, const std::string& to) {
  std::error_code ec;
  std::vector<fs::path> other;
  for (const fs::directory_entry& e : fs::directory_iterator(from, ec))
    if (!written_by_export(e.path().filename().string())) other.push_back(e.path());
  for (const fs::path& p : other) {
    const fs::path dst = fs::path(to) / p.filename();
    if (fs::exists(fs::symlink_status(dst, ec))) continue;
    fs::rename(p, dst, ec);
    MT_CHECK(!ec, "cannot move ", p.string(), " into ", to, ": ", ec.message(), "; fix: move it by "
             "hand (", from, " is the previous copy of the folder)");
  }
}

// Under the lock of --save-dir: finishes or undoes what a killed export left
// (the previous copy beside a complete new one, an incomplete <save-dir>.tmp),
// then refuses a folder holding a model unless --overwrite-checkpoints.
void prepare_hf_dir(const ConvertOptions& o, const std::string& dir) {
  std::error_code ec;
  if (fs::is_directory(old_dir_of(dir), ec)) carry_over_other_files(old_dir_of(dir), dir);
  for (const std::string& line : repair_replaced_dir(dir, "conversion"))
    log_line(true, "convert: %s\n", line.c_str());
  std::vector<fs::path> held;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string f = e.path().filename().string();
    if (f == "config.json" || is_weight_file(f)) held.push_back(e.path());
  }
  MT_CHECK(held.empty() || o.overwrite, "--save-dir ", o.save_dir, " already holds a model (",
           held.empty() ? "" : held.front().filename().string(), (held.size() > 1 ? ", ..." : ""),
           "); fix: choose a new --save-dir, or pass --overwrite-checkpoints to replace it");
  fs::create_directories(tmp_dir_of(dir), ec);
  MT_CHECK(!ec, "cannot create ", tmp_dir_of(dir), " (the new folder is written there and renamed "
           "into place when complete): ", ec.message(), "; fix: check the permissions of ",
           fs::path(dir).parent_path().string());
}

// Rows of the exported vocabulary: config.json's vocab_size of the folder the
// checkpoint was converted from when recorded and still held (a GPT-2 padded
// to 50304 exports 50304 rows, its padding rows included), else the
// tokenizer's vocabulary (the padding is cut off).
int64_t export_vocab_rows(const nlohmann::json& args, const ModelConfig& cfg) {
  const nlohmann::json from = args.value("converted_from", nlohmann::json::object());
  if (!from.is_object() || !from.contains("vocab_size") ||
      !from.at("vocab_size").is_number_integer())
    return cfg.vocab_size;
  const int64_t v = from.at("vocab_size").get<int64_t>();
  return v >= cfg.vocab_size && v <= cfg.padded_vocab_size ? v : cfg.vocab_size;
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
                                   {"tokenizer_model", "tokenizer.model"},
                                   {"tokenizer_json", "tokenizer.json"},
                                   {"tokenizer_config", "tokenizer_config.json"}}) {
    if (!r.contains(role) || !r.at(role).is_object()) continue;
    // Small files: read and written whole, so that a full disk is named as such.
    atomic_write_text(out + "/" + name, read_text_file(r.at(role).at("path").get<std::string>()));
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
  ModelConfig cfg = model_config_from_json(args.at("model"));
  const std::vector<int> layer_stage = args.at("layer_stage").get<std::vector<int>>();
  const HfFamily fam = hf_family_of(cfg);
  // Only DeepSeek-V3 folders hold multi-token prediction depths; for the
  // others they stay behind.
  if (cfg.mtp() && fam != HfFamily::kDeepseekV3) {
    log_line(true, "convert: the %lld multi-token prediction depth(s) (mtp.layers.*) stay "
             "behind: %s folders have none\n", static_cast<long long>(cfg.mtp_num_layers),
             hf_family_name(fam));
    cfg.mtp_num_layers = 0;
  }
  MT_CHECK(cfg.padded_vocab_size >= cfg.vocab_size && cfg.vocab_size > 0, "checkpoint ", iter,
           ": padded vocabulary ", cfg.padded_vocab_size, " is smaller than the vocabulary ",
           cfg.vocab_size, "; the meta.json is damaged");

  const ParamRegistry full_reg(cfg, StageLayout{0, 1, 0, cfg.num_layers, true, true, {}});
  const int64_t vocab_rows = export_vocab_rows(args, cfg);
  const std::vector<HfParamMap> maps = hf_param_maps(fam, full_reg, "transformer.", vocab_rows);
  // DeepSeek-V3's MTP depths hold copies of the embedding and output layer,
  // each written after its original.
  const auto copies = deepseek_mtp_copies(cfg);
  std::vector<HfTensor> order;
  int64_t params = 0;
  for (const HfParamMap& m : maps)
    for (const HfTensor& t : m.hf) {
      order.push_back(t);
      params += t.numel();
      for (const auto& [copy, original] : copies)
        if (original == t.name) order.push_back({copy, t.shape});
    }
  // The folder is written into <save-dir>.tmp and renamed into place when
  // complete (checkpoint/atomic_dir.h); a failure leaves --save-dir as it was.
  const std::string dir = normalized_save_dir(o.save_dir), tmp = tmp_dir_of(dir);
  const std::string restored = restore_interrupted_replace(dir, "conversion");  // before creating dir
  if (!restored.empty()) log_line(true, "convert: %s\n", restored.c_str());
  ConvertOutput output(dir, tmp);  // locked until the folder is in place
  prepare_hf_dir(o, dir);
  log_line(true, "convert: %s (iteration %lld, TP%d PP%d) -> %s %s: %s\n", o.load_dir.c_str(),
           static_cast<long long>(it), tp, pp, hf_family_name(fam), o.save_dir.c_str(),
           cfg.summary().c_str());
  if (vocab_rows != cfg.vocab_size)
    log_line(true, "convert: vocab_size %lld as imported (the tokenizer's %lld + %lld padding "
             "rows)\n", static_cast<long long>(vocab_rows), static_cast<long long>(cfg.vocab_size),
             static_cast<long long>(vocab_rows - cfg.vocab_size));
  HfWeightsWriter out(tmp, order, o.bf16, uint64_t(o.max_shard_size_mb) * 1000000);

  const CheckpointVerifier verifier(meta, o.load_dir, iter, true);
  const std::string note = verification_note(verifier, iter, true);
  if (!note.empty()) log_line(true, "%s\n", note.c_str());
  std::map<std::string, SafetensorsReader> shards;  // by rank dir, opened when first read
  // A trained MoE model's experts are in their EP rank's directory, found by
  // name (checkpoint_shard.h); a converted one's in the mp_rank files.
  const int saved_ep = meta.value("expert_model_parallel_size", 0);
  std::unique_ptr<ExpertIndex> experts;
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
    if (saved_ep > 0 && p.grad_group == GradGroup::kExpertDataParallel) {  // whole on its rank
      if (!experts) experts = std::make_unique<ExpertIndex>(iter, pp, saved_ep, verifier);
      read(experts->dir_of(p.name), full.data(), p.numel());
    } else {
      read_full_tensor(iter, read, p, tp, saved_stage_of(p, pp, layer_stage), full.data());
    }
    std::vector<std::vector<float>> hf(m.hf.size());
    std::vector<float*> ptrs;
    for (size_t i = 0; i < m.hf.size(); ++i) {
      hf[i].resize(size_t(m.hf[i].numel()));
      ptrs.push_back(hf[i].data());
    }
    megatron_to_hf(m, cfg, full.data(), ptrs);
    for (size_t i = 0; i < m.hf.size(); ++i) {
      for (const auto& [copy, original] : copies)
        if (original == m.hf[i].name) out.put(copy, hf[i]);
      out.put(m.hf[i].name, std::move(hf[i]));
    }
  }
  out.finish();
  const std::string dtype = o.bf16 ? "bfloat16" : "float32";
  const nlohmann::json& record = args.at("tokenizer");
  atomic_write_text(tmp + "/config.json",
                    hf_config_from_model(cfg, fam, record, dtype, vocab_rows).dump(2) + "\n");
  const std::string tok = copy_tokenizer(record, iter, tmp);
  fsync_tree(tmp);
  const bool replaced = move_into_place(dir);  // <save-dir> aside to <save-dir>.old, tmp in
  if (replaced) {
    output.lock().moved_to(old_dir_of(dir));
    carry_over_other_files(old_dir_of(dir), dir);
    remove_dir_synced(old_dir_of(dir));
  }
  output.done();
  log_line(true, "convert: wrote %s (%s, %zu weight file%s, %lld parameters, %s, tokenizer %s) in "
           "%.1f s; peak RSS %.1f MB\n", o.save_dir.c_str(), hf_family_name(fam), out.files(),
           out.files() == 1 ? "" : "s", static_cast<long long>(params), dtype.c_str(), tok.c_str(),
           timer.seconds(), peak_rss_mb());
}

}  // namespace mt
