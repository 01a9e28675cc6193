#include "checkpoint/checkpoint_io.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <type_traits>
#include <vector>

#include "backend/device.h"
#include "checkpoint/atomic_file.h"
#include "checkpoint/safetensors.h"
#include "core/error.h"
#include "core/log.h"
#include "kernels/reduce.h"
#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/checkpoint_shard.h"
#include "checkpoint/checkpoint_tokenizer.h"
#include "checkpoint/checkpoint_verify.h"
#include "checkpoint/optim_state_dir.h"

namespace mt {

namespace fs = std::filesystem;

namespace {

void make_dir(const std::string& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  MT_CHECK(!ec, "cannot create checkpoint directory ", path, ": ", ec.message(),
           "; fix: check --save and the permissions/free space there");
}

}  // namespace

namespace {

// The tmp directory of the iteration and this rank's directories in it
// (collective; rank 0 removes a stale, incomplete save of the iteration first).
void make_save_dirs(const std::string& dir, int64_t iteration, const ParamRegistry& reg,
                    const ParallelState& ps) {
  const std::string tmp_dir = iteration_dir(dir, iteration) + ".tmp";
  if (ps.world_rank == 0) {
    std::error_code ec;
    fs::remove_all(tmp_dir, ec);
    make_dir(tmp_dir);
  }
  ps.world_comm.barrier();
  const bool has_experts = reg.group_begin(GradGroup::kExpertDataParallel) < reg.total_floats();
  if (ps.dp_cp_rank == 0) make_dir(tmp_dir + "/" + rank_dir_name(ps.tp_rank, ps.pp_rank));
  if (has_experts && ps.edp_rank == 0)
    make_dir(tmp_dir + "/" + expert_dir_name(ps.ep_rank, ps.pp_rank));
  ps.world_comm.barrier();
}

// Every rank's files and their checksums to rank 0, which writes meta.json
// (collective): a slot of (tp, pp, dp, ep, edp, then bytes and crc of the
// model, optimizer, expert and expert optimizer files) per rank, summed over
// the world (the other ranks' slots are zeros).
void write_meta(const std::string& dir, const RunState& state, const ParamRegistry& reg,
                const RankFiles& f, const ParallelState& ps) {
  const std::string tmp_dir = iteration_dir(dir, state.iteration) + ".tmp";
  constexpr size_t kSlot = 13;
  std::vector<int64_t> slots(size_t(ps.world_size) * kSlot, 0);
  const int64_t mine[kSlot] = {ps.tp_rank,
                               ps.pp_rank,
                               ps.dp_cp_rank,
                               ps.ep_rank,
                               ps.edp_rank,
                               int64_t(f.model.bytes),
                               f.model.crc32c,
                               int64_t(f.optim.bytes),
                               f.optim.crc32c,
                               int64_t(f.expert.bytes),
                               f.expert.crc32c,
                               int64_t(f.expert_optim.bytes),
                               f.expert_optim.crc32c};
  std::copy(mine, mine + kSlot, slots.begin() + ptrdiff_t(size_t(ps.world_rank) * kSlot));
  ps.world_comm.all_reduce_sum(slots.data(), int64_t(slots.size()));
  std::vector<std::pair<std::string, FileChecksum>> files;
  for (size_t r = 0; r < size_t(ps.world_size); ++r) {
    const int64_t* s = slots.data() + r * kSlot;
    const std::string rd = rank_dir_name(int(s[0]), int(s[1]));
    const std::string ed = expert_dir_name(int(s[3]), int(s[1]));
    auto record = [&](const std::string& path, const int64_t* sum) {
      if (sum[0] > 0) files.push_back({path, {uint64_t(sum[0]), uint32_t(sum[1])}});
    };
    record(rd + "/model.safetensors", s + 5);
    record(rd + optim_file_name(int(s[2])), s + 7);
    record(ed + "/model.safetensors", s + 9);
    record(ed + expert_optim_file_name(int(s[4])), s + 11);
  }
  if (ps.world_rank == 0) {
    nlohmann::json meta = {{"format", "megatron.cpp checkpoint"},
                           {"version", kCheckpointFormatVersion},
                           {"iteration", state.iteration},
                           {"consumed_samples", state.consumed_samples},
                           {"tensor_model_parallel_size", ps.tp_size},
                           {"pipeline_model_parallel_size", ps.pp_size},
                           {"data_parallel_size", ps.dp_size},
                           {"args", state.args}};
    // MoE: the experts are in the expert directories of this EP size.
    if (reg.config().moe()) meta["expert_model_parallel_size"] = ps.ep_size;
    if (!state.grad_scaler.is_null()) meta["grad_scaler"] = state.grad_scaler;
    meta["skipped_iterations"] = state.skipped_iterations;
    if (state.skipped_samples > 0) meta["skipped_samples"] = state.skipped_samples;
    meta["files"] = files_record(files);
    save_tokenizer_files(state.args.at("tokenizer"), tmp_dir);  // self-contained checkpoint
    atomic_write_text(tmp_dir + "/meta.json", meta.dump(2) + "\n");
  }
}

}  // namespace

SaveSource save_source(const ParamRegistry& reg, const SavedWeights& params,
                       const AdamWOptimizer* opt) {
  SaveSource src;
  src.params = params.values;
  src.fp32 = host_fp32_copies(reg, params);
  src.opt = opt;
  if (opt != nullptr) {
    src.exp_avg = opt->exp_avg();
    src.exp_avg_sq = opt->exp_avg_sq();
    src.main_params = opt->main_params();
    src.steps = opt->steps();
  }
  return src;
}

RankFiles write_rank_files(const std::string& dir, int64_t iteration, const ParamRegistry& reg,
                           const SaveSource& src, const ParallelState& ps) {
  const AdamWOptimizer* opt = src.opt;
  // A GPU run's weights and optimizer state are copied to the host first (the
  // writers read host memory); the copies live until the files are written.
  std::vector<char> host_params, host_state;
  ReadView params = src.params;
  const bool params_on_gpu = on_device(src.params.raw());
  if (params_on_gpu) {
    const size_t bytes = size_t(reg.total_floats()) * (src.params.bf16 ? 2 : 4);
    host_params.resize(bytes);
    copy_bytes(host_params.data(), src.params.raw(), bytes);
    params = src.params.bf16 ? ReadView(reinterpret_cast<const uint16_t*>(host_params.data()))
                             : ReadView(reinterpret_cast<const float*>(host_params.data()));
  }
  const bool state_on_gpu = opt != nullptr && on_device(src.exp_avg);
  if (state_on_gpu) {
    host_state.resize(opt->state_bytes());
    copy_bytes(host_state.data(), src.exp_avg, opt->state_bytes());
  }
  // The optimizer's arrays as the writer reads them (offsets within the state).
  const auto state_ptr = [&](const float* p) -> const float* {
    if (!state_on_gpu || p == nullptr) return p;
    return reinterpret_cast<const float*>(host_state.data()) + (p - src.exp_avg);
  };
  const std::string tmp_dir = iteration_dir(dir, iteration) + ".tmp";
  const std::string rank_dir = tmp_dir + "/" + rank_dir_name(ps.tp_rank, ps.pp_rank);
  const std::string expert_dir = tmp_dir + "/" + expert_dir_name(ps.ep_rank, ps.pp_rank);
  // Dense parameters are replicated over DP and CP; the optimizer is sharded
  // (ZeRO) or replicated over DP x CP, whose rank names its file. An MoE
  // model's experts are replicated over expert-DP: the stage's expert-DP rank
  // 0 of each EP rank writes them (each expert once), and their optimizer
  // state is sharded or replicated over expert-DP.
  const bool has_experts = reg.group_begin(GradGroup::kExpertDataParallel) < reg.total_floats();
  const bool writes_model = ps.dp_cp_rank == 0;
  const bool writes_experts = has_experts && ps.edp_rank == 0;
  RankFiles f;  // bytes 0: no such file
  if (writes_model)
    f.model = write_model_shard(rank_dir + "/model.safetensors", reg, params, ps.pp_rank,
                                ps.pp_size, ShardParams::kDense, &src.fp32);
  if (writes_experts)
    f.expert = write_expert_shard(expert_dir + "/model.safetensors", reg, params, ps.pp_rank,
                                  ps.pp_size, &src.fp32);
  // The optimizer state of one group's parameters, into `path`: whole tensors
  // (plain) or this rank's slices of them with the group's rank and size
  // under the metadata keys `rank_key`, `size_key` (distributed).
  auto write_optim = [&](const std::string& path, GradGroup group, int rank, int size,
                         const char* rank_key, const char* size_key) {
    SafetensorsWriter os;
    const float* m = state_ptr(src.exp_avg);
    const float* v = state_ptr(src.exp_avg_sq);
    const float* main = state_ptr(src.main_params);
    if (!opt->sharded()) {  // replicated: whole tensors from the group's rank 0
      for (const ParamSpec& p : reg.params()) {
        if (p.grad_group != group) continue;
        os.add("exp_avg." + p.name, StDType::kF32, local_shape(p), m + p.offset);
        os.add("exp_avg_sq." + p.name, StDType::kF32, local_shape(p), v + p.offset);
        if (main != nullptr)
          os.add("main_param." + p.name, StDType::kF32, local_shape(p), main + p.offset);
      }
    } else {  // this rank's slices
      nlohmann::json slices = nlohmann::json::object();
      for (const OptimSegment& sg : opt->segments()) {
        const ParamSpec& p = reg.params()[sg.param];
        if (p.grad_group != group) continue;
        MT_CHECK(!slices.contains(p.name), "optimizer owns two slices of '", p.name,
                 "'; fix: plan one range per DP bucket (owned_ranges)");
        slices[p.name] = {sg.begin - p.offset, sg.end - p.offset};
        os.add("exp_avg." + p.name, StDType::kF32, {sg.size()}, m + sg.state);
        os.add("exp_avg_sq." + p.name, StDType::kF32, {sg.size()}, v + sg.state);
        if (main != nullptr)
          os.add("main_param." + p.name, StDType::kF32, {sg.size()}, main + sg.state);
      }
      os.set_metadata("slices", slices.dump());
      os.set_metadata(rank_key, std::to_string(rank));
      os.set_metadata(size_key, std::to_string(size));
    }
    os.set_metadata("steps", std::to_string(src.steps));
    FileChecksum sum;
    sum.bytes = os.write(path, &sum.crc32c);
    return sum;
  };
  if (opt != nullptr && (opt->sharded() || writes_model))
    f.optim = write_optim(rank_dir + optim_file_name(ps.dp_cp_rank), GradGroup::kDataParallel,
                          ps.dp_cp_rank, ps.dp_cp_size, "dp_rank", "dp_size");
  if (opt != nullptr && has_experts && (opt->sharded() || writes_experts))
    f.expert_optim = write_optim(expert_dir + expert_optim_file_name(ps.edp_rank),
                                 GradGroup::kExpertDataParallel, ps.edp_rank, ps.edp_size,
                                 "edp_rank", "edp_size");
  return f;
}

// The one-line error of a save that failed before the checkpoint became
// visible (disk full, quota, permissions): what failed, that the iteration
// was not saved, which iteration `dir` still resumes from, and the fix.
std::string save_failure_message(const std::string& dir, int64_t iteration,
                                 std::string what) {
  const size_t fix = what.find("; fix:");
  if (fix != std::string::npos) what.resize(fix);
  int64_t previous = -1;
  try {
    previous = latest_iteration(dir);
  } catch (const Error&) {  // a damaged tracker: say only what is known
  }
  const std::string it = std::to_string(iteration);
  const bool space = what.find("No space left") != std::string::npos ||
                     what.find("quota") != std::string::npos;
  return "saving the checkpoint of iteration " + it + " failed: " + what +
         "; the checkpoint of iteration " + it + " was not saved and " + dir +
         (previous >= 0 ? " still resumes from iteration " + std::to_string(previous)
                        : " holds no complete checkpoint") +
         (space ? "; fix: free space in " + dir + " (df -h " + dir + ") or --save to a disk "
                  "with room"
                : "; fix: check " + dir + " (permissions, the file system) or --save elsewhere") +
         (previous >= 0 ? ", then resume with --load " + dir : std::string()) +
         " (the incomplete " + fs::path(iteration_dir(dir, iteration)).filename().string() +
         ".tmp is removed when a run next saves there)";
}

void begin_save(const std::string& dir, int64_t iteration, const ParamRegistry& reg,
                const ParallelState& ps) {
  try {
    make_save_dirs(dir, iteration, reg, ps);
  } catch (const Error& e) {
    throw Error(save_failure_message(dir, iteration, e.what()));
  }
}

void finish_save(const std::string& dir, const RunState& state, const ParamRegistry& reg,
                 const RankFiles& files, const ParallelState& ps) {
  try {
    write_meta(dir, state, reg, files, ps);
  } catch (const Error& e) {
    throw Error(save_failure_message(dir, state.iteration, e.what()));
  }
  ps.world_comm.barrier();  // every shard is on disk before the checkpoint becomes visible
  if (ps.world_rank == 0) commit_iteration(dir, state.iteration);  // never without a complete copy
  ps.world_comm.barrier();
}

void save_checkpoint(const std::string& dir, const RunState& state, const ParamRegistry& reg,
                     const SavedWeights& params, const AdamWOptimizer* opt,
                     const ParallelState& ps) {
  begin_save(dir, state.iteration, reg, ps);
  RankFiles files;
  try {
    files = write_rank_files(dir, state.iteration, reg, save_source(reg, params, opt), ps);
  } catch (const Error& e) {
    throw Error(save_failure_message(dir, state.iteration, e.what()));
  }
  finish_save(dir, state, reg, files, ps);
}

namespace {

// Reads parameter p's tensor from every saved TP shard (saved_tp of them) of
// pipeline stage saved_pp_rank, assembles the full tensor and writes this
// rank's slice of it (p's rows/cols at p's offsets) into dst: re-sharding.
void read_resharded(const std::string& iter_dir, const ShardSource& read, const ParamSpec& p,
                    int saved_tp, int saved_pp_rank, const StageLayout& st, float* dst) {
  const int64_t C = p.global_cols;
  std::vector<float> full(static_cast<size_t>(p.global_rows * C));
  read_full_tensor(iter_dir, read, p, saved_tp, saved_pp_rank, full.data());
  for (int64_t i = 0; i < p.rows; ++i) {
    const int64_t g = p.global_row(i, st.tp_rank, st.tp_size);
    std::copy(full.begin() + g * C + p.col_offset, full.begin() + g * C + p.col_offset + p.cols,
              dst + i * p.cols);
  }
}

// A loaded tensor with NaN or Inf would train (or generate) garbage that is
// reported far from its cause; name it instead.
void check_finite(const float* x, int64_t n, const std::string& what, const std::string& iter) {
  int64_t first = -1;
  const int64_t bad = count_nonfinite(x, n, &first);
  if (bad == 0) return;
  MT_FAIL("checkpoint ", iter, ": ", what, " holds ", bad, " non-finite values of ", n,
          " (first at element ", first, ": ", x[first], "); fix: load an earlier iteration (write "
          "its number into ", kTrackerFile, "), or this one with --no-load-optim if only the "
          "optimizer state is affected");
}

}  // namespace

RunState load_checkpoint(const std::string& dir, const ParamRegistry& reg,
                         const ParamSink& set_param, AdamWOptimizer* opt, const ParallelState& ps,
                         bool verify_checksums) {
  const nlohmann::json meta = read_checkpoint_meta(dir);
  const int64_t it = meta.at("iteration").get<int64_t>();
  const int tp = meta.at("tensor_model_parallel_size").get<int>();
  const int pp = meta.at("pipeline_model_parallel_size").get<int>();
  const std::string iter = checkpoint_iteration_dir(dir, it);
  const CheckpointVerifier verifier(meta, dir, iter, verify_checksums);
  const std::string note = verification_note(verifier, iter, verify_checksums);
  if (!note.empty()) log_line(ps.world_rank == 0, "%s\n", note.c_str());
  const int64_t saved_vocab = meta.at("args").at("model").at("padded_vocab_size").get<int64_t>();
  MT_CHECK(saved_vocab == reg.config().padded_vocab_size, "checkpoint ", iter,
           " has a padded vocabulary of ", saved_vocab, " rows but this run pads to ",
           reg.config().padded_vocab_size, "; fix: use a TP size that divides ", saved_vocab);
  const std::vector<int> saved_layer_stage =
      meta.at("args").at("layer_stage").get<std::vector<int>>();
  bool same_layers = pp == ps.pp_size;  // does this rank hold exactly the saved stage's layers?
  for (size_t l = 0; l < saved_layer_stage.size(); ++l) {
    bool mine = false;
    for (const auto& [b, e] : reg.stage().chunk_ranges()) mine = mine || (int64_t(l) >= b && int64_t(l) < e);
    same_layers = same_layers && (mine == (saved_layer_stage[l] == ps.pp_rank));
  }
  // Same TP and layers: every rank reads its own shard; else assemble and slice.
  const bool own_shard = tp == ps.tp_size && same_layers;
  const std::string own_dir = iter + "/" + rank_dir_name(ps.tp_rank, ps.pp_rank);
  // MoE checkpoints keep the experts (whole tensors, no TP split) in expert
  // directories, meta.json naming the EP size; a checkpoint without that
  // field (dense, or an EP 1 MoE run saved before expert directories) has
  // them in the mp_rank directories like any TP-replicated tensor.
  const int saved_ep = meta.value("expert_model_parallel_size", 0);
  std::unique_ptr<ExpertIndex> experts;  // built when the first expert is read
  auto is_expert = [&](const ParamSpec& p) {
    return saved_ep > 0 && p.grad_group == GradGroup::kExpertDataParallel;
  };
  auto expert_dir = [&](const ParamSpec& p) -> const std::string& {
    if (!experts) experts = std::make_unique<ExpertIndex>(iter, pp, saved_ep, verifier);
    return experts->dir_of(p.name);
  };
  auto load_param = [&](const ParamSpec& p, const ShardSource& read, float* dst) {
    if (is_expert(p))
      read(expert_dir(p), dst, p.numel());
    else if (own_shard)
      read(own_dir, dst, p.numel());
    else
      read_resharded(iter, read, p, tp, saved_stage_of(p, pp, saved_layer_stage), reg.stage(),
                     dst);
  };
  // A release checkpoint (converted weights) has no optimizer state: the run
  // fine-tunes from iteration 0 with a fresh optimizer, as Megatron does.
  const bool load_optim = opt != nullptr && it != kReleaseIteration;
  std::map<std::string, std::unique_ptr<OptimStateDir>> dirs;  // by rank dir
  auto state_dir = [&](const std::string& rank_dir, bool expert) -> const OptimStateDir& {
    std::unique_ptr<OptimStateDir>& d = dirs[rank_dir];
    if (!d)
      d = std::make_unique<OptimStateDir>(rank_dir, expert ? "optim_edp_" : "optim_dp_", verifier);
    return *d;
  };
  const bool saved_main =
      load_optim && state_dir(iter + "/" + rank_dir_name(0, 0), false).has_main_params();
  auto read_state = [&](const ParamSpec& p, const std::string& prefix, float* dst) {
    load_param(p, [&](const std::string& rank_dir, float* d, int64_t n) {
      state_dir(rank_dir, is_expert(p)).read(prefix, p.name, d, n);
    }, dst);
    check_finite(dst, p.numel(), "optimizer state " + prefix + p.name, iter);
  };
  std::vector<char> owned(reg.params().size(), 0);  // parameters with optimizer state here
  if (load_optim)
    for (const OptimSegment& sg : opt->segments()) owned[sg.param] = 1;
  {
    std::map<std::string, SafetensorsReader> models;  // by rank dir
    std::vector<float> values, main;
    for (size_t i = 0; i < reg.params().size(); ++i) {
      const ParamSpec& p = reg.params()[i];
      values.assign(size_t(p.numel()), 0.f);
      if (saved_main && !opt->has_main_params()) {
        // An fp32 run from a bf16 run's checkpoint: its weights are the
        // exact fp32 main weights, not the saved bf16 rounding.
        read_state(p, "main_param.", values.data());
      } else if (own_shard || is_expert(p)) {  // the shape is checked too
        const std::string& d = is_expert(p) ? expert_dir(p) : own_dir;
        SafetensorsReader& r = models[d];
        if (r.path().empty()) verifier.open(r, d + "/model.safetensors");
        MT_CHECK(r.has(p.name), r.path(), " has no tensor '", p.name,
                 "'; fix: load a checkpoint of the same model configuration");
        r.read_f32(p.name, values.data(), local_shape(p));
      } else {
        load_param(p, [&](const std::string& rank_dir, float* dst, int64_t n) {
          SafetensorsReader& r = models[rank_dir];
          if (r.path().empty()) verifier.open(r, rank_dir + "/model.safetensors");
          MT_CHECK(r.has(p.name), r.path(), " has no tensor '", p.name,
                   "'; fix: load a checkpoint of the same model configuration");
          r.read_f32(p.name, dst, n);
        }, values.data());
      }
      check_finite(values.data(), p.numel(), "tensor '" + p.name + "'", iter);
      set_param(i, values.data());
      if (saved_main && owned[i] && opt->has_main_params()) {
        main.assign(size_t(p.numel()), 0.f);
        read_state(p, "main_param.", main.data());
        opt->set_main_params(i, main.data());
      }
    }
  }
  if (load_optim) {
    opt->set_steps(state_dir(iter + "/" + rank_dir_name(0, 0), false).steps());
    std::vector<float> m, v;
    for (size_t i = 0; i < reg.params().size(); ++i) {
      if (!owned[i]) continue;
      const ParamSpec& p = reg.params()[i];
      m.assign(size_t(p.numel()), 0.f);
      v.assign(size_t(p.numel()), 0.f);
      read_state(p, "exp_avg.", m.data());
      read_state(p, "exp_avg_sq.", v.data());
      opt->set_param_state(i, m.data(), v.data());
    }
  }
  RunState st;
  st.iteration = it;
  st.consumed_samples = meta.at("consumed_samples").get<int64_t>();
  st.args = meta.at("args");
  if (meta.contains("grad_scaler")) st.grad_scaler = meta.at("grad_scaler");
  st.skipped_iterations = meta.value("skipped_iterations", int64_t(0));
  st.skipped_samples = meta.value("skipped_samples", int64_t(0));
  return st;
}

RunState load_checkpoint(const std::string& dir, const ParamRegistry& reg, float* params,
                         AdamWOptimizer* opt, const ParallelState& ps, bool verify_checksums) {
  return load_checkpoint(dir, reg, [&](size_t i, const float* values) {
    const ParamSpec& p = reg.params()[i];
    std::copy(values, values + p.numel(), params + p.offset);
  }, opt, ps, verify_checksums);
}

}  // namespace mt

namespace mt {

double float_as_written(float f) {
  // The shortest decimal that reads back as f (0.1f -> "0.1"), read as a
  // double: JSON then shows 0.1, not 0.10000000149011612, and float(0.1) is f.
  char buf[32];
  const auto w = std::to_chars(buf, buf + sizeof buf, f);
  double d = 0;
  std::from_chars(buf, w.ptr, d);
  return d;
}

nlohmann::json model_config_to_json(const ModelConfig& c) {
  nlohmann::json j = nlohmann::json::object();
  for_each_model_field(c, [&](const char* key, const char*, const char*, const auto& field) {
    if constexpr (std::is_same_v<std::decay_t<decltype(field)>, float>)
      j[key] = float_as_written(field);
    else
      j[key] = field;
  });
  return j;
}

void check_same_architecture(const nlohmann::json& saved, const nlohmann::json& run,
                             const std::string& load) {
  // Compared as meanings, not spellings (--moe-layer-freq 1 is [1,1] on two
  // layers): both resolved. A checkpoint older than a field was trained with
  // the field's default (model_config_from_json).
  const ModelConfig saved_model = resolved_architecture(model_config_from_json(saved));
  const nlohmann::json a_all = model_config_to_json(saved_model);
  const nlohmann::json b_all =
      model_config_to_json(resolved_architecture(model_config_from_json(run)));
  ModelConfig fields;
  for_each_model_field(fields, [&](const char* key, const char* flag, const char*,
                                   const auto& field) {
    using T = std::decay_t<decltype(field)>;
    const std::string k = key;
    // Not architecture (as in Megatron): dropout, init, the sequence length
    // (positions are max_position_embeddings), the padding (checked at load),
    // the MoE training knobs.
    if (is_training_knob(k)) return;
    const nlohmann::json &a = a_all.at(key), &b = b_all.at(key);
    if (a == b) return;
    // A float field compares as the float it is (older checkpoints wrote
    // 1e-5f as 9.999999747378752e-06).
    if constexpr (std::is_same_v<T, float>)
      if (a.is_number() && b.is_number() && a.get<float>() == b.get<float>()) return;
    auto shown = [](const nlohmann::json& v) {
      return v.is_string() ? v.get<std::string>() : v.dump();
    };
    if (*flag == '\0')  // derived (the vocabulary: from the tokenizer)
      MT_FAIL("--load ", load, ": the checkpoint's model has ", k, " ", shown(a),
              " but this run has ", shown(b), "; fix: leave out the tokenizer flags (the "
              "checkpoint's tokenizer is then used), or --load a checkpoint of this model");
    // The flag that sets it (its first name) and how to give the checkpoint's value.
    const std::string f = std::string(flag).substr(0, std::string(flag).find(','));
    std::string give;
    if constexpr (std::is_same_v<T, bool>) {  // a switch: set or not, never "true"
      const bool on = a.get<bool>();
      MT_FAIL("--load ", load, ": the checkpoint's model was trained ", on ? "with " : "without ",
              f, " but this run is ", on ? "without" : "with", " it; fix: ",
              on ? "add " : "leave out ", f,
              " (the checkpoint's model), or --load a checkpoint of this model");
    } else if (k == "num_query_groups") {  // resolved: heads when there is no grouping
      give = a.get<int64_t>() == saved_model.num_attention_heads
                 ? std::string("leave out --group-query-attention and --num-query-groups")
                 : "pass --group-query-attention " + f + " " + shown(a);
    } else if (a.is_string() && a.get<std::string>().empty()) {  // unset: the default
      give = "leave out " + f;
    } else {
      std::string value = shown(a);
      if (value.find_first_of("[]* ") != std::string::npos) value = "'" + value + "'";
      give = "pass " + f + " " + value;
    }
    auto named = [&](const nlohmann::json& v) {  // an unset string flag
      return v.is_string() && v.get<std::string>().empty() ? std::string("(unset)") : shown(v);
    };
    MT_FAIL("--load ", load, ": the checkpoint's model has ", f, " ", named(a),
            " but this run has ", named(b), "; fix: ", give,
            " (the checkpoint's model), or --load a checkpoint of this model");
  });
}

ModelConfig model_config_from_json(const nlohmann::json& j) {
  ModelConfig c;
  MT_CHECK(j.is_object(), "checkpoint model configuration is not an object");
  // Checkpoints from before a field existed lack it: it keeps its default,
  // which is what those checkpoints were trained with (GPT-2's block).
  for_each_model_field(c, [&](const char* key, const char*, const char*, auto& field) {
    if (!j.contains(key)) return;
    try {
      j.at(key).get_to(field);
    } catch (const nlohmann::json::exception& e) {
      MT_FAIL("checkpoint model configuration: '", key, "' has the wrong type: ", e.what());
    }
  });
  return c;
}

}  // namespace mt
