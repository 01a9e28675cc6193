#include "train/checkpoint_io.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "checkpoint/atomic_file.h"
#include "checkpoint/safetensors.h"
#include "core/error.h"

namespace mt {

namespace fs = std::filesystem;

namespace {

constexpr int kFormatVersion = 1;
const char* kLatest = "latest_checkpointed_iteration.txt";

std::vector<int64_t> local_shape(const ParamSpec& p) {
  return p.ndim == 1 ? std::vector<int64_t>{p.rows} : std::vector<int64_t>{p.rows, p.cols};
}

nlohmann::json param_layout(const ParamRegistry& reg) {
  nlohmann::json j = nlohmann::json::object();
  for (const ParamSpec& p : reg.params()) {
    j[p.name] = {{"global_shape", p.ndim == 1 ? nlohmann::json{p.global_rows}
                                               : nlohmann::json{p.global_rows, p.global_cols}},
                 {"partition_dim", p.partition_dim}};
  }
  return j;
}

void make_dir(const std::string& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  MT_CHECK(!ec, "cannot create checkpoint directory ", path, ": ", ec.message(),
           "; fix: check --save and the permissions/free space there");
}

}  // namespace

std::string iteration_dir(const std::string& dir, int64_t iteration) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "iter_%07lld", static_cast<long long>(iteration));
  return dir + "/" + buf;
}

std::string rank_dir_name(int tp_rank, int pp_rank) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "mp_rank_%02d_%03d", tp_rank, pp_rank);
  return buf;
}

void save_checkpoint(const std::string& dir, const RunState& state, const ParamRegistry& reg,
                     const float* params, const AdamWOptimizer* opt, const ParallelState& ps) {
  const std::string final_dir = iteration_dir(dir, state.iteration);
  const std::string tmp_dir = final_dir + ".tmp";
  if (ps.world_rank == 0) {
    std::error_code ec;
    fs::remove_all(tmp_dir, ec);  // a stale, incomplete save of this iteration
    make_dir(tmp_dir);
  }
  ps.world_comm.barrier();
  if (ps.dp_rank == 0) {  // the plain optimizer's state is replicated over DP
    const std::string rank_dir = tmp_dir + "/" + rank_dir_name(ps.tp_rank, ps.pp_rank);
    make_dir(rank_dir);
    SafetensorsWriter model;
    for (const ParamSpec& p : reg.params())
      model.add(p.name, StDType::kF32, local_shape(p), params + p.offset);
    model.set_metadata("format", "megatron.cpp");
    model.set_metadata("params", param_layout(reg).dump());
    model.set_metadata("tp_rank", std::to_string(ps.tp_rank));
    model.set_metadata("tp_size", std::to_string(ps.tp_size));
    model.set_metadata("pp_rank", std::to_string(ps.pp_rank));
    model.set_metadata("pp_size", std::to_string(ps.pp_size));
    model.write(rank_dir + "/model.safetensors");
    if (opt != nullptr) {
      SafetensorsWriter os;
      for (const ParamSpec& p : reg.params()) {
        os.add("exp_avg." + p.name, StDType::kF32, local_shape(p), opt->exp_avg() + p.offset);
        os.add("exp_avg_sq." + p.name, StDType::kF32, local_shape(p),
               opt->exp_avg_sq() + p.offset);
      }
      os.set_metadata("steps", std::to_string(opt->steps()));
      char name[48];
      std::snprintf(name, sizeof name, "/optim_dp_%03d.safetensors", ps.dp_rank);
      os.write(rank_dir + name);
    }
  }
  if (ps.world_rank == 0) {
    nlohmann::json meta = {{"format", "megatron.cpp checkpoint"},
                           {"version", kFormatVersion},
                           {"iteration", state.iteration},
                           {"consumed_samples", state.consumed_samples},
                           {"tensor_model_parallel_size", ps.tp_size},
                           {"pipeline_model_parallel_size", ps.pp_size},
                           {"data_parallel_size", ps.dp_size},
                           {"args", state.args}};
    atomic_write_text(tmp_dir + "/meta.json", meta.dump(2) + "\n");
  }
  ps.world_comm.barrier();  // every shard is on disk before the checkpoint becomes visible
  if (ps.world_rank == 0) {
    std::error_code ec;
    fs::remove_all(final_dir, ec);
    fs::rename(tmp_dir, final_dir, ec);
    MT_CHECK(!ec, "cannot rename ", tmp_dir, " to ", final_dir, ": ", ec.message());
    fsync_dir(dir);
    atomic_write_text(dir + "/" + kLatest, std::to_string(state.iteration) + "\n");
  }
  ps.world_comm.barrier();
}

int64_t latest_iteration(const std::string& dir) {
  const std::string path = dir + "/" + kLatest;
  if (!fs::exists(path)) return -1;
  const std::string text = read_text_file(path);
  try {
    size_t used = 0;
    const long long it = std::stoll(text, &used);
    MT_CHECK(it >= 0, "negative iteration");
    return it;
  } catch (const std::exception&) {
    MT_FAIL(path, " holds '", text, "', not an iteration number; fix: write the number of a ",
            "complete iter_NNNNNNN directory into it");
  }
}

nlohmann::json read_checkpoint_meta(const std::string& dir) {
  const int64_t it = latest_iteration(dir);
  MT_CHECK(it >= 0, "no checkpoint in ", dir, " (", kLatest,
           " is missing); fix: pass the --save directory of a run that saved");
  const std::string path = iteration_dir(dir, it) + "/meta.json";
  nlohmann::json meta;
  try {
    meta = nlohmann::json::parse(read_text_file(path));
  } catch (const nlohmann::json::exception& e) {
    MT_FAIL("corrupt checkpoint metadata ", path, ": ", e.what());
  }
  MT_CHECK(meta.value("format", "") == "megatron.cpp checkpoint" &&
               meta.value("version", 0) == kFormatVersion,
           path, " is not a megatron.cpp checkpoint of format version ", kFormatVersion);
  return meta;
}

namespace {

// Reads tensor `tensor` of parameter `p` from file `file` of every saved TP
// shard (saved_tp of them) of pipeline stage saved_pp_rank, assembles the full
// tensor and writes this rank's slice of it (p's rows/cols at p's offsets)
// into dst: re-sharding on load.
void read_resharded(const std::string& iter_dir, const std::string& file, const std::string& tensor,
                    const ParamSpec& p, int saved_tp, int saved_pp_rank, float* dst) {
  const int64_t R = p.global_rows, C = p.global_cols;
  std::vector<float> full(static_cast<size_t>(R * C));
  const int64_t sr = p.partition_dim == 0 ? R / saved_tp : R;
  const int64_t sc = p.partition_dim == 1 ? C / saved_tp : C;
  const int shards = p.partition_dim < 0 ? 1 : saved_tp;  // replicated: rank 0's copy
  std::vector<float> shard(static_cast<size_t>(sr * sc));
  for (int t = 0; t < shards; ++t) {
    SafetensorsReader r(iter_dir + "/" + rank_dir_name(t, saved_pp_rank) + "/" + file);
    MT_CHECK(r.has(tensor), r.path(), " has no tensor '", tensor,
             "'; fix: load a checkpoint of the same model configuration");
    r.read_f32(tensor, shard.data(), sr * sc);
    const int64_t r0 = p.partition_dim == 0 ? t * sr : 0, c0 = p.partition_dim == 1 ? t * sc : 0;
    for (int64_t i = 0; i < sr; ++i)
      std::copy(shard.begin() + i * sc, shard.begin() + (i + 1) * sc,
                full.begin() + (r0 + i) * C + c0);
  }
  for (int64_t i = 0; i < p.rows; ++i)
    std::copy(full.begin() + (p.row_offset + i) * C + p.col_offset,
              full.begin() + (p.row_offset + i) * C + p.col_offset + p.cols, dst + i * p.cols);
}

// The saved pipeline stage that holds parameter `name`: layer names are
// global and `layer_stage` maps each layer to its stage; embeddings live on
// the first stage, the final norm on the last.
int saved_stage_of(const std::string& name, int saved_pp, const std::vector<int>& layer_stage) {
  if (name.rfind("decoder.layers.", 0) == 0) return layer_stage.at(size_t(std::stoll(name.substr(15))));
  if (name.rfind("decoder.final_layernorm", 0) == 0) return saved_pp - 1;
  return 0;
}

}  // namespace

RunState load_checkpoint(const std::string& dir, const ParamRegistry& reg, float* params,
                         AdamWOptimizer* opt, const ParallelState& ps) {
  const nlohmann::json meta = read_checkpoint_meta(dir);
  const int64_t it = meta.at("iteration").get<int64_t>();
  const int tp = meta.at("tensor_model_parallel_size").get<int>();
  const int pp = meta.at("pipeline_model_parallel_size").get<int>();
  const std::string iter = iteration_dir(dir, it);
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
  auto load = [&](const std::string& file, const std::string& prefix, float* base) {
    if (tp == ps.tp_size && same_layers) {
      SafetensorsReader r(iter + "/" + rank_dir_name(ps.tp_rank, ps.pp_rank) + "/" + file);
      for (const ParamSpec& p : reg.params()) {
        MT_CHECK(r.has(prefix + p.name), r.path(), " has no tensor '", prefix + p.name,
                 "'; fix: load a checkpoint of the same model configuration");
        r.read_f32(prefix + p.name, base + p.offset, local_shape(p));
      }
    } else {
      for (const ParamSpec& p : reg.params())
        read_resharded(iter, file, prefix + p.name, p, tp,
                       saved_stage_of(p.name, pp, saved_layer_stage), base + p.offset);
    }
  };
  load("model.safetensors", "", params);
  if (opt != nullptr) {
    const std::string path = iter + "/" + rank_dir_name(0, 0) + "/optim_dp_000.safetensors";
    MT_CHECK(fs::exists(path), "checkpoint has no optimizer state (", path,
             "); fix: pass --no-load-optim to start the optimizer afresh");
    load("optim_dp_000.safetensors", "exp_avg.", opt->exp_avg());
    load("optim_dp_000.safetensors", "exp_avg_sq.", opt->exp_avg_sq());
    opt->set_steps(std::stoll(SafetensorsReader(path).metadata_or("steps", "0")));
  }
  RunState st;
  st.iteration = it;
  st.consumed_samples = meta.at("consumed_samples").get<int64_t>();
  st.args = meta.at("args");
  return st;
}

}  // namespace mt

namespace mt {

nlohmann::json model_config_to_json(const ModelConfig& c) {
  return {{"num_layers", c.num_layers},
          {"hidden_size", c.hidden_size},
          {"ffn_hidden_size", c.ffn_hidden_size},
          {"num_attention_heads", c.num_attention_heads},
          {"seq_length", c.seq_length},
          {"max_position_embeddings", c.max_position_embeddings},
          {"vocab_size", c.vocab_size},
          {"make_vocab_size_divisible_by", c.make_vocab_size_divisible_by},
          {"padded_vocab_size", c.padded_vocab_size},
          {"init_method_std", c.init_method_std},
          {"hidden_dropout", c.hidden_dropout},
          {"attention_dropout", c.attention_dropout},
          {"layernorm_epsilon", c.layernorm_epsilon}};
}

ModelConfig model_config_from_json(const nlohmann::json& j) {
  ModelConfig c;
  try {
    c.num_layers = j.at("num_layers");
    c.hidden_size = j.at("hidden_size");
    c.ffn_hidden_size = j.at("ffn_hidden_size");
    c.num_attention_heads = j.at("num_attention_heads");
    c.seq_length = j.at("seq_length");
    c.max_position_embeddings = j.at("max_position_embeddings");
    c.vocab_size = j.at("vocab_size");
    c.make_vocab_size_divisible_by = j.at("make_vocab_size_divisible_by");
    c.init_method_std = j.at("init_method_std");
    c.hidden_dropout = j.at("hidden_dropout");
    c.attention_dropout = j.at("attention_dropout");
    c.layernorm_epsilon = j.at("layernorm_epsilon");
  } catch (const nlohmann::json::exception& e) {
    MT_FAIL("checkpoint model configuration is incomplete: ", e.what());
  }
  return c;
}

}  // namespace mt
