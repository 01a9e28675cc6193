// hf -> megatron: a Hugging Face folder becomes a release checkpoint.
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "checkpoint/atomic_dir.h"
#include "checkpoint/atomic_file.h"
#include "convert/convert.h"
#include "convert/convert_output.h"
#include "convert/hf_config.h"
#include "convert/hf_deepseek.h"
#include "convert/hf_folder.h"
#include "convert/hf_weights.h"
#include "core/error.h"
#include "core/log.h"
#include "data/tokenizer.h"
#include "kernels/reduce.h"
#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/checkpoint_io.h"
#include "checkpoint/checkpoint_shard.h"
#include "checkpoint/checkpoint_tokenizer.h"

namespace mt {

namespace fs = std::filesystem;

double peak_rss_mb() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) / 1024.0;  // kB on Linux
}

namespace {

bool is_file(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

// The tokenizer of the folder: GPT-2's vocab.json + merges.txt, or a Llama
// SentencePiece tokenizer.model, else its tokenizer.json (HuggingFaceTokenizer).
TokenizerOptions hf_tokenizer_options(const std::string& dir, HfFamily f) {
  TokenizerOptions o;
  if (f == HfFamily::kGpt2) {
    o.type = "GPT2BPETokenizer";
    o.vocab_file = dir + "/vocab.json";
    o.merge_file = dir + "/merges.txt";
    std::string missing;
    for (const std::string& p : {o.vocab_file, o.merge_file})
      if (!is_file(p)) missing += (missing.empty() ? "" : " and ") + fs::path(p).filename().string();
    MT_CHECK(missing.empty(), "--load-dir ", dir, " has no ", missing,
             " (GPT-2's byte-level BPE tokenizer files, which the checkpoint records and "
             "carries); fix: copy them into the folder (e.g. from scripts/fetch_gpt2_tokenizer.sh's "
             "data/gpt2/gpt2-vocab.json and gpt2-merges.txt, renamed)");
  } else if (!is_file(dir + "/tokenizer.model") && is_file(dir + "/tokenizer.json")) {
    // A tokenizer.json-only tokenizer (Llama 3, Qwen, Mistral's newer ones).
    o.type = "HuggingFaceTokenizer";
    o.tokenizer_model = dir;
  } else {
    o.type = "Llama2Tokenizer";
    o.tokenizer_model = dir + "/tokenizer.model";
    MT_CHECK(is_file(o.tokenizer_model), "--load-dir ", dir, " has neither tokenizer.model (the "
             "SentencePiece model of a Llama tokenizer) nor tokenizer.json (a Hugging Face "
             "tokenizer), which the checkpoint records and carries; fix: copy one into the folder");
  }
  return o;
}

bool ignorable(const std::string& name, HfFamily f) {
  auto ends = [&](const char* s) {
    const size_t n = std::strlen(s);
    return name.size() >= n && name.compare(name.size() - n, n, s) == 0;
  };
  return f == HfFamily::kGpt2 ? ends(".attn.bias") || ends(".attn.masked_bias")  // causal masks
                              : ends(".self_attn.rotary_emb.inv_freq");          // RoPE cache
}

// A tensor a folder may hold as a copy of another (a tied lm_head of the
// embedding, DeepSeek's MTP depths' embedding and output layer): equal to it,
// byte for byte, or the import is refused with `why`.
struct HfCopy {
  std::string copy, original, why;
};

// Every tensor the config implies is there with its shape and a float dtype;
// nothing else is, but buffers and `copies` equal to their originals.
void check_hf_tensors(const HfWeightsReader& src, const std::vector<HfParamMap>& maps,
                      HfFamily f, const std::vector<HfCopy>& copies, const std::string& dir) {
  std::map<std::string, std::vector<int64_t>> expected;
  for (const HfParamMap& m : maps)
    for (const HfTensor& t : m.hf) expected[t.name] = t.shape;
  for (const auto& [name, shape] : expected) {
    MT_CHECK(src.has(name), "--load-dir ", dir, ": tensor '", name, "' (shape ",
             shape_to_string(shape), " for its config.json) is missing; fix: a complete ",
             hf_family_name(f), " checkpoint of this config.json");
    const StTensorInfo& i = src.info(name);
    MT_CHECK(i.shape == shape, "--load-dir ", dir, ": tensor '", name, "' has shape ",
             i.shape_str(), " but its config.json implies ", shape_to_string(shape),
             "; fix: the config.json of these weights");
    MT_CHECK(i.dtype == StDType::kF32 || i.dtype == StDType::kF16 || i.dtype == StDType::kBF16 ||
                 i.dtype == StDType::kF64,
             "--load-dir ", dir, ": tensor '", name, "' has dtype ", st_dtype_name(i.dtype),
             "; only F32, F16, BF16 and F64 weights convert (quantized checkpoints do not)");
  }
  std::map<std::string, const HfCopy*> copy_of;
  for (const HfCopy& c : copies)
    if (expected.count(c.original)) copy_of[c.copy] = &c;
  for (const std::string& name : src.names()) {
    if (expected.count(name) || ignorable(name, f)) continue;
    const auto c = copy_of.find(name);
    if (c != copy_of.end()) {  // must equal its original
      const std::string& original = c->second->original;
      const StTensorInfo& i = src.info(name);
      MT_CHECK(i.shape == expected.at(original), "--load-dir ", dir, ": ", name, " has shape ",
               i.shape_str(), " but ", original, " has ", shape_to_string(expected.at(original)));
      std::vector<float> a(size_t(i.numel())), b(a.size());
      src.read_f32(name, a.data(), i.shape);
      src.read_f32(original, b.data(), i.shape);
      MT_CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0, "--load-dir ", dir,
               ": ", name, " differs from ", original, " but ", c->second->why);
      continue;
    }
    MT_FAIL("--load-dir ", dir, ": unexpected tensor '", name, "' (shape ",
            src.info(name).shape_str(), ", in ", src.file_of(name), ") has no place in a ",
            hf_family_name(f), " model of its config.json (another architecture, more layers, or "
            "an option megatron.cpp does not compute); fix: convert a folder whose config.json "
            "describes all its weights");
  }
}

// Under the lock of --save-dir (convert_output.h): repairs what a killed
// conversion left (release.old, release.tmp: checkpoint/atomic_dir.h), refuses
// a folder holding checkpoints (unless --overwrite-checkpoints) and creates
// the working directory release.tmp.
void prepare_save_dir(const ConvertOptions& o, const std::string& tmp) {
  std::error_code ec;
  check_writable_dir(o.save_dir, "convert");
  for (const std::string& line :
       repair_replaced_dir(iteration_dir(o.save_dir, kReleaseIteration), "conversion"))
    log_line(true, "convert: %s\n", line.c_str());
  const std::vector<int64_t> held = saved_iterations(o.save_dir);
  const bool tracker = fs::exists(o.save_dir + "/" + kTrackerFile, ec);
  const bool release = fs::exists(iteration_dir(o.save_dir, kReleaseIteration), ec);
  if (!o.overwrite && (tracker || release || !held.empty())) {
    std::string what = release ? "release" : "";
    for (int64_t it : held)
      what += (what.empty() ? "" : ", ") + fs::path(iteration_dir(o.save_dir, it)).filename().string();
    if (what.empty()) what = kTrackerFile;
    MT_FAIL("--save-dir ", o.save_dir, " already holds checkpoints (", what, "); the converted "
            "release checkpoint would replace what its tracker names; fix: choose a new "
            "--save-dir, or pass --overwrite-checkpoints to write it there anyway");
  }
  fs::create_directories(tmp, ec);
  MT_CHECK(!ec, "cannot create ", tmp, ": ", ec.message());
}

// Refuses a tensor holding NaN or Inf (a diverged run's weights compute NaN
// whatever they are fed), naming it, its file and the first such element.
void check_finite(const HfWeightsReader& src, const std::string& name,
                  const std::vector<float>& x) {
  if (all_finite(x.data(), int64_t(x.size()))) return;
  size_t i = 0;
  while (i < x.size() && std::isfinite(x[i])) ++i;
  MT_FAIL("tensor '", name, "' in ", src.file_of(name), " holds ",
          std::isnan(x[i]) ? "NaN" : "Inf", " (element ", i, " of ", x.size(),
          "); a model with non-finite weights computes NaN; fix: convert a checkpoint saved "
          "before its training diverged");
}

// The smallest --make-vocab-size-divisible-by (doubling the given one) whose
// padded vocabulary holds `rows`.
int64_t divisible_by_holding(int64_t vocab, int64_t divisible_by, int64_t tp, int64_t rows) {
  while (padded_vocab_size(vocab, divisible_by, tp) < rows) divisible_by *= 2;
  return divisible_by;
}

}  // namespace

void convert_hf_to_megatron(const ConvertOptions& o) {
  const Timer timer;
  const int TP = o.target_tp, PP = o.target_pp;
  std::error_code ec;
  MT_CHECK(fs::is_directory(o.load_dir, ec), "--load-dir ", o.load_dir,
           " is not a directory; fix: give a Hugging Face model folder (config.json, "
           "model.safetensors, tokenizer files)");
  const std::string cfg_path = o.load_dir + "/config.json";
  nlohmann::json hf_cfg;
  try {
    hf_cfg = nlohmann::json::parse(read_text_file(cfg_path));
  } catch (const nlohmann::json::exception& e) {
    MT_FAIL(cfg_path, " is not valid JSON: ", e.what());
  }
  HfFamily fam = HfFamily::kGpt2;
  ModelConfig cfg = model_config_from_hf(hf_cfg, cfg_path, &fam);

  const TokenizerOptions tok_opts = hf_tokenizer_options(o.load_dir, fam);
  const std::unique_ptr<Tokenizer> tok = make_tokenizer(tok_opts);
  MT_CHECK(tok->vocab_size() <= cfg.vocab_size, "--load-dir ", o.load_dir, ": the tokenizer (",
           tok->type(), ") has ", tok->vocab_size(), " entries but config.json's vocab_size is ",
           cfg.vocab_size, "; the ids would mean other text; fix: the tokenizer files these "
           "weights were trained with");
  // config.json's vocab_size above the tokenizer's (GPT-2 trained with 50304
  // rows for 50257 tokens): the extra rows are padding, as Megatron's.
  const int64_t hf_vocab = cfg.vocab_size;
  cfg.vocab_size = tok->vocab_size();

  cfg.make_vocab_size_divisible_by = o.make_vocab_size_divisible_by;
  cfg.finalize(TP);
  MT_CHECK(cfg.padded_vocab_size >= hf_vocab, cfg_path, ": 'vocab_size' ", hf_vocab, " is the "
           "tokenizer's ", cfg.vocab_size, " + ", hf_vocab - cfg.vocab_size, " padding rows, more "
           "than the padded vocabulary of ", cfg.padded_vocab_size, " (--make-vocab-size-divisible-by ",
           o.make_vocab_size_divisible_by, " x TP ", TP, ") keeps; fix: --make-vocab-size-divisible-by ",
           divisible_by_holding(cfg.vocab_size, o.make_vocab_size_divisible_by, TP, hf_vocab));
  const char* fix = "; fix: choose a --target-tensor-parallel-size that divides it";
  MT_CHECK(cfg.num_attention_heads % TP == 0, "--target-tensor-parallel-size ", TP,
           " does not divide the ", cfg.num_attention_heads, " attention heads", fix);
  MT_CHECK(cfg.query_groups() % TP == 0, "--target-tensor-parallel-size ", TP,
           " does not divide the ", cfg.query_groups(),
           " query groups (num_key_value_heads; TP splits them)", fix);
  bool dense = false;  // a dense MLP somewhere (TP splits it; experts are whole on each rank)
  for (int64_t l = 0; l < cfg.num_layers; ++l) dense = dense || !cfg.is_moe_layer(l);
  MT_CHECK(!dense || cfg.ffn_hidden_size % TP == 0, "--target-tensor-parallel-size ", TP,
           " does not divide the MLP's ", cfg.ffn_hidden_size, " hidden units", fix);
  MT_CHECK(o.target_ep == 1 || cfg.moe(), "--target-expert-parallel-size ", o.target_ep,
           ": the ", hf_family_name(fam), " model of ", cfg_path, " has no experts; fix: drop "
           "the flag");
  const int EP = o.target_ep;
  MT_CHECK(cfg.num_experts % EP == 0, "--target-expert-parallel-size ", EP, " does not divide the ",
           cfg.num_experts, " experts of ", cfg_path, "; fix: choose one that divides them");
  MT_CHECK(cfg.padded_vocab_size % TP == 0, "--target-tensor-parallel-size ", TP,
           " does not divide the padded vocabulary of ", cfg.padded_vocab_size, fix);
  MT_CHECK(cfg.num_layers % PP == 0, "--target-pipeline-parallel-size ", PP,
           " does not divide the ", cfg.num_layers, " layers; fix: choose one that does");

  // The whole model's parameters (TP 1, one stage): names, global shapes, parts.
  const HfWeightsReader src(o.load_dir);
  // DeepSeek-V3's multi-token prediction depths come when the folder holds
  // them: copies trimmed of model.layers.<L>.* keep num_nextn_predict_layers.
  const std::string mtp_first = "model.layers." + std::to_string(cfg.num_layers) + ".";
  if (cfg.mtp() && !src.has(mtp_first + "eh_proj.weight")) {
    log_line(true, "convert: config.json's num_nextn_predict_layers %lld but no %s* tensors: "
             "imported without multi-token prediction\n",
             static_cast<long long>(cfg.mtp_num_layers), mtp_first.c_str());
    cfg.mtp_num_layers = 0;
  }
  const ParamRegistry full_reg(cfg, StageLayout{0, 1, 0, cfg.num_layers, true, true, {}});
  const std::string prefix = fam == HfFamily::kGpt2 && src.has("transformer.wte.weight")
                                 ? "transformer."
                                 : "";
  std::vector<HfParamMap> maps = hf_param_maps(fam, full_reg, prefix, hf_vocab);
  if (is_deepseek(fam)) deepseek_rope_layouts(hf_cfg, fam, maps);
  std::vector<HfCopy> copies;
  if (!cfg.untie_embeddings_and_output_weights)
    copies.push_back({"lm_head.weight", maps.front().hf.front().name,
                      "config.json ties them (tie_word_embeddings); an untied output layer of "
                      "this model has no megatron.cpp equivalent here; fix: set "
                      "tie_word_embeddings false (llama) or convert a tied model"});
  for (const auto& [copy, original] : deepseek_mtp_copies(cfg))
    copies.push_back({copy, original, "a multi-token prediction depth shares the model's "
                      "embedding and output layer (Megatron's MTP); fix: a folder whose depths "
                      "hold copies of model.embed_tokens and lm_head"});
  check_hf_tensors(src, maps, fam, copies, o.load_dir);
  std::map<std::string, const HfParamMap*> by_name;
  for (const HfParamMap& m : maps) by_name[m.param->name] = &m;
  std::vector<int> layer_stage(size_t(cfg.num_layers));
  for (int pp = 0; pp < PP; ++pp) {
    const auto [b, e] = stage_layer_range(cfg.num_layers, PP, pp);
    for (int64_t l = b; l < e; ++l) layer_stage[size_t(l)] = pp;
    for (int tp = 0; tp < TP; ++tp)
      ParamRegistry(cfg, StageLayout{tp, TP, b, e, pp == 0, pp == PP - 1, {}});  // sizes divide
  }

  // Written into release.tmp and renamed into place when complete; a failure
  // removes release.tmp (and --save-dir if this run created it).
  const std::string tmp = tmp_dir_of(iteration_dir(o.save_dir, kReleaseIteration));
  ConvertOutput output(o.save_dir, tmp);  // locked until the tracker is written
  prepare_save_dir(o, tmp);
  log_line(true, "convert: %s %s -> megatron.cpp TP%d PP%d%s: %s\n", hf_family_name(fam),
           o.load_dir.c_str(), TP, PP, EP > 1 ? (" EP" + std::to_string(EP)).c_str() : "",
           cfg.summary().c_str());
  if (cfg.moe())
    log_line(true, "convert: %s a mixture of %lld experts (ffn %lld, top %lld, whole on "
             "each %s), router aux loss coefficient %g\n",
             dense ? ("the MLPs of --moe-layer-freq " + cfg.moe_layer_freq + " (0: dense)").c_str()
                   : "every MLP",
             static_cast<long long>(cfg.num_experts), static_cast<long long>(cfg.moe_ffn()),
             static_cast<long long>(cfg.moe_router_topk),
             EP > 1 ? ("of " + std::to_string(EP) + " expert-parallel ranks").c_str() : "TP rank",
             double(cfg.moe_aux_loss_coeff));
  if (cfg.mtp())
    log_line(true, "convert: %lld multi-token prediction depth(s), model.layers.%lld.* on -> "
             "mtp.layers.*, their loss scaled by %g (--mtp-loss-scaling-factor, Megatron's "
             "default)\n",
             static_cast<long long>(cfg.mtp_num_layers), static_cast<long long>(cfg.num_layers),
             double(cfg.mtp_loss_scaling_factor));
  if (hf_vocab != cfg.vocab_size)
    log_line(true, "convert: config.json's vocab_size %lld = the tokenizer's %lld + %lld padding "
             "rows, kept as padding rows (padded vocabulary %lld)\n",
             static_cast<long long>(hf_vocab), static_cast<long long>(cfg.vocab_size),
             static_cast<long long>(hf_vocab - cfg.vocab_size),
             static_cast<long long>(cfg.padded_vocab_size));

  // Each file of the checkpoint: an mp_rank_TT_PPP shard (TP rank tp; all
  // parameters, or at EP > 1 the dense ones) or, at EP > 1, the experts of EP
  // rank ep of the stage in mp_rank_00_PPP_EEE (whole, as a training run saves).
  struct OutFile {
    int tp, ep;
    bool experts;
  };
  std::vector<OutFile> out_files;
  for (int tp = 0; tp < TP; ++tp) out_files.push_back({tp, 0, false});
  if (EP > 1)
    for (int ep = 0; ep < EP; ++ep) out_files.push_back({0, ep, true});
  std::vector<float> full;  // the current parameter's full tensor
  std::vector<std::vector<float>> parts;  // and the HF tensors it is made of
  std::vector<std::pair<std::string, FileChecksum>> files;  // for meta.json's "files"
  int64_t params = 0;
  for (int pp = 0; pp < PP; ++pp) {
    const auto [b, e] = stage_layer_range(cfg.num_layers, PP, pp);
    for (const OutFile& f : out_files) {
      const ParamRegistry reg(cfg, StageLayout{f.tp, TP, b, e, pp == 0, pp == PP - 1, {}, f.ep, EP});
      const size_t experts_from = size_t(reg.group_begin(GradGroup::kExpertDataParallel));
      if (f.experts && experts_from == size_t(reg.total_floats())) continue;  // no MoE layer here
      std::vector<float> shard(size_t(reg.total_floats()));  // freed before the next one
      for (const ParamSpec& p : reg.params()) {
        const bool expert = p.grad_group == GradGroup::kExpertDataParallel;
        if (EP > 1 && expert != f.experts) continue;  // in the other kind of file
        const HfParamMap& m = *by_name.at(p.name);
        const int64_t C = p.global_cols;
        full.resize(size_t(p.global_rows * C));
        parts.resize(m.hf.size());
        std::vector<const float*> ptrs;
        for (size_t i = 0; i < m.hf.size(); ++i) {
          parts[i].resize(size_t(m.hf[i].numel()));
          src.read_f32(m.hf[i].name, parts[i].data(), m.hf[i].shape);
          check_finite(src, m.hf[i].name, parts[i]);
          ptrs.push_back(parts[i].data());
        }
        hf_to_megatron(m, cfg, ptrs, full.data());
        for (int64_t r = 0; r < p.rows; ++r) {  // this shard's rows / columns
          const float* row = full.data() + p.global_row(r, f.tp, TP) * C + p.col_offset;
          std::copy(row, row + p.cols, shard.data() + p.offset + r * p.cols);
        }
        if ((!p.tied || pp == 0) && (f.tp == 0 || !p.tp_replicated())) params += p.numel();
      }
      const std::string name = f.experts ? expert_dir_name(f.ep, pp) : rank_dir_name(f.tp, pp);
      const std::string rank_dir = tmp + "/" + name;
      fs::create_directories(rank_dir, ec);
      MT_CHECK(!ec, "cannot create ", rank_dir, ": ", ec.message());
      const std::string path = rank_dir + "/model.safetensors";
      files.push_back({name + "/model.safetensors",
                       f.experts ? write_expert_shard(path, reg, shard.data(), pp, PP)
                                 : write_model_shard(path, reg, shard.data(), pp, PP,
                                                     EP > 1 ? ShardParams::kDense
                                                            : ShardParams::kAll)});
    }
  }
  full = {};
  parts = {};

  const nlohmann::json record = tokenizer_record(*tok, tok_opts);
  nlohmann::json meta = {
      {"format", "megatron.cpp checkpoint"},
      {"version", kCheckpointFormatVersion},
      {"iteration", kReleaseIteration},
      {"consumed_samples", 0},
      {"tensor_model_parallel_size", TP},
      {"pipeline_model_parallel_size", PP},
      {"data_parallel_size", 1},
      {"release", true},
      {"files", files_record(files)},
      {"args",
       {{"model", model_config_to_json(cfg)},
        {"tokenizer", record},
        {"layer_stage", layer_stage},
        {"converted_from",
         {{"loader", "hf"},
          {"load_dir", o.load_dir},
          {"model_type", hf_family_name(fam)},
          {"vocab_size", hf_vocab}}}}}};  // config.json's: the export writes it back
  if (EP > 1) meta["expert_model_parallel_size"] = EP;  // the experts are in expert directories
  const std::string text = meta.dump(2) + "\n";
  parse_checkpoint_meta(text, tmp + "/meta.json", kReleaseIteration);  // what loaders will check
  save_tokenizer_files(record, tmp);
  atomic_write_text(tmp + "/meta.json", text);
  fsync_tree(tmp);  // the tokenizer copies and the rank directories too
  commit_iteration(o.save_dir, kReleaseIteration);  // tracker "release", last
  output.done();
  log_line(true, "convert: wrote %s (%d x %d shards, %lld parameters with the padded "
           "vocabulary, tokenizer %s) in %.1f s; peak RSS %.1f MB\n",
           iteration_dir(o.save_dir, kReleaseIteration).c_str(), TP, PP,
           static_cast<long long>(params), tok->type().c_str(), timer.seconds(), peak_rss_mb());
}

}  // namespace mt
