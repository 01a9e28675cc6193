#include "checkpoint/checkpoint_dir.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string_view>
#include <type_traits>

#include "checkpoint/atomic_dir.h"
#include "checkpoint/atomic_file.h"
#include "core/error.h"
#include "model/config.h"

namespace mt {

std::string optim_file_name(int dp_rank) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "/optim_dp_%03d.safetensors", dp_rank);
  return buf;
}

std::string rank_dir_name(int tp_rank, int pp_rank) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "mp_rank_%02d_%03d", tp_rank, pp_rank);
  return buf;
}

std::string expert_dir_name(int ep_rank, int pp_rank) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "mp_rank_00_%03d_%03d", pp_rank, ep_rank);
  return buf;
}

std::string expert_optim_file_name(int edp_rank) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "/optim_edp_%03d.safetensors", edp_rank);
  return buf;
}

namespace fs = std::filesystem;

namespace {

// "iter_NNNNNNN" + suffix → N, or -1 when `name` is not of that form.
int64_t parse_iter_name(const std::string& name, const std::string& suffix) {
  if (name.rfind("iter_", 0) != 0 || name.size() <= 5 + suffix.size()) return -1;
  if (name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) return -1;
  const std::string digits = name.substr(5, name.size() - 5 - suffix.size());
  if (digits.empty() || digits.size() > 18) return -1;
  for (char c : digits)
    if (!std::isdigit(static_cast<unsigned char>(c))) return -1;
  return std::stoll(digits);
}

// Entries of `dir` named iter_N<suffix> that are directories, as N.
std::set<int64_t> iter_entries(const std::string& dir, const std::string& suffix) {
  std::set<int64_t> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const int64_t it = parse_iter_name(e.path().filename().string(), suffix);
    if (it >= 0 && e.is_directory(ec)) out.insert(it);
  }
  return out;
}

// "iter_0000010, iter_0000020" or "iter_0000005, ..., iter_0000020 (4 in all)" for messages.
std::string describe_iterations(const std::string& dir, const std::vector<int64_t>& its) {
  auto name = [&](int64_t it) { return fs::path(iteration_dir(dir, it)).filename().string(); };
  if (its.empty()) return "none";
  if (its.size() <= 3) {
    std::string s;
    for (size_t i = 0; i < its.size(); ++i) s += (i ? ", " : "") + name(its[i]);
    return s;
  }
  return name(its.front()) + ", ..., " + name(its[its.size() - 2]) + ", " + name(its.back()) +
         " (" + std::to_string(its.size()) + " in all)";
}

// A short, flat description of a JSON value for messages (dump() recurses once
// per nesting level: a deeply nested damaged file would overflow the stack).
std::string brief(const nlohmann::json& v) {
  if (v.is_array()) return "a list";
  if (v.is_object()) return "an object";
  if (v.is_string()) return "a string";
  return v.dump();  // a scalar
}

// The model fields every checkpoint of format 1 has; the Llama-era ones
// (normalization, ...) default to GPT-2's block when absent.
bool is_gpt2_era_field(std::string_view key) {
  for (std::string_view k :
       {"num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "seq_length",
        "max_position_embeddings", "vocab_size", "make_vocab_size_divisible_by",
        "padded_vocab_size", "init_method_std", "hidden_dropout", "attention_dropout",
        "layernorm_epsilon"})
    if (k == key) return true;
  return false;
}

// The first `max` bytes of `bytes` for a one-line message: printable ASCII as
// is, every other byte as \xNN (a NUL would end the printed message early,
// a control byte could hide the rest), "..." when cut.
std::string escaped(std::string_view bytes, size_t max = 40) {
  std::string out;
  for (size_t i = 0; i < bytes.size() && i < max; ++i) {
    const unsigned char c = static_cast<unsigned char>(bytes[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += char(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02X", unsigned(c));
      out += hex;
    }
  }
  if (bytes.size() > max) out += "...";
  return out;
}

// What to write into a damaged tracker: the newest complete iteration,
// 'release' for a release checkpoint, or (neither) nothing: remove it.
std::string tracker_fix(const std::string& dir, const std::string& path) {
  const std::vector<int64_t> its = saved_iterations(dir);
  std::error_code ec;
  const bool release = fs::is_directory(iteration_dir(dir, kReleaseIteration), ec);
  if (!its.empty())
    return "fix: write the iteration to resume from into it, e.g. `echo " +
           std::to_string(its.back()) + " > " + path + "` (complete ones: " +
           describe_iterations(dir, its) + ")" + (release ? ", or 'release'" : "");
  if (release) return "fix: write 'release' into it (`echo release > " + path + "`)";
  return "fix: remove it (" + dir + " holds no iter_NNNNNNN or release directory for it to "
         "name), or pass the --load of a run that saved";
}

int64_t meta_int(const nlohmann::json& j, const char* key, const std::string& path,
                 int64_t min_value, int64_t max_value = INT64_MAX) {
  MT_CHECK(j.contains(key), "checkpoint metadata ", path, " has no '", key,
           "'; the file is damaged; fix: load an earlier iteration (write its number into ",
           kTrackerFile, ")");
  const nlohmann::json& v = j.at(key);
  MT_CHECK(v.is_number_integer() && v.get<int64_t>() >= min_value && v.get<int64_t>() <= max_value,
           "checkpoint metadata ", path, ": '", key, "' is ", brief(v), ", not an integer in [",
           min_value, ", ", max_value, "]",
           "; the file is damaged; fix: load an earlier iteration (write its number into ",
           kTrackerFile, ")");
  return v.get<int64_t>();
}

}  // namespace

std::string iteration_dir(const std::string& dir, int64_t iteration) {
  if (iteration == kReleaseIteration) return dir + "/" + kReleaseTracker;
  char buf[32];
  std::snprintf(buf, sizeof buf, "iter_%07lld", static_cast<long long>(iteration));
  return dir + "/" + buf;
}

int64_t latest_iteration(const std::string& dir) {
  const std::string path = dir + "/" + kTrackerFile;
  std::error_code ec;
  if (!fs::exists(path, ec)) return -1;
  MT_CHECK(fs::is_regular_file(path, ec), path, " is not a regular file; fix: remove it, or ",
           "write the number of a complete iter_NNNNNNN directory into a file of that name");
  const std::string text = read_text_file(path);
  size_t b = 0, e = text.size();
  while (b < e && std::isspace(static_cast<unsigned char>(text[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(text[e - 1]))) --e;
  const std::string body = text.substr(b, e - b);
  if (body == kReleaseTracker) return kReleaseIteration;
  bool digits = !body.empty() && body.size() <= 18;
  for (char c : body) digits = digits && std::isdigit(static_cast<unsigned char>(c));
  MT_CHECK(digits, path, " holds '", escaped(body), "', not an iteration number or '",
           kReleaseTracker, "'; ", tracker_fix(dir, path));
  return std::stoll(body);
}

std::vector<int64_t> saved_iterations(const std::string& dir) {
  std::set<int64_t> its = iter_entries(dir, "");
  for (int64_t it : iter_entries(dir, ".old")) its.insert(it);
  return {its.begin(), its.end()};
}

std::string checkpoint_iteration_dir(const std::string& dir, int64_t it) {
  const std::string d = iteration_dir(dir, it);
  std::error_code ec;
  if (fs::is_directory(d, ec)) return d;
  if (fs::is_directory(d + ".old", ec)) return d + ".old";
  MT_FAIL(dir, "/", kTrackerFile, " names iteration ", it, " but ", d,
          " does not exist; fix: write the number of a complete iter_NNNNNNN directory of ", dir,
          " into ", kTrackerFile, " (complete ones: ", describe_iterations(dir, saved_iterations(dir)),
          ")");
}

nlohmann::json parse_checkpoint_meta(const std::string& text, const std::string& path,
                                     int64_t dir_iteration) {
  nlohmann::json meta;
  try {
    meta = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    MT_FAIL("corrupt checkpoint metadata ", path, ": ", e.what(),
            "; fix: load an earlier iteration (write its number into ", kTrackerFile, ")");
  }
  MT_CHECK(meta.is_object() && meta.value("format", nlohmann::json()) == "megatron.cpp checkpoint" &&
               meta.value("version", nlohmann::json()) == kCheckpointFormatVersion,
           path, " is not a megatron.cpp checkpoint of format version ", kCheckpointFormatVersion);
  const int64_t it = meta_int(meta, "iteration", path, 0);
  MT_CHECK(it == dir_iteration, "checkpoint metadata ", path, " says iteration ", it,
           " but lies in the directory of iteration ", dir_iteration,
           "; the checkpoint is damaged or was moved; fix: load another iteration");
  meta_int(meta, "consumed_samples", path, 0);
  meta_int(meta, "tensor_model_parallel_size", path, 1, INT32_MAX);
  const int64_t pp = meta_int(meta, "pipeline_model_parallel_size", path, 1, INT32_MAX);
  meta_int(meta, "data_parallel_size", path, 1, INT32_MAX);
  // MoE checkpoints: the EP size whose expert directories hold the experts.
  if (meta.contains("expert_model_parallel_size"))
    meta_int(meta, "expert_model_parallel_size", path, 1, INT32_MAX);
  if (meta.contains("skipped_iterations")) meta_int(meta, "skipped_iterations", path, 0);
  if (meta.contains("skipped_samples")) meta_int(meta, "skipped_samples", path, 0);
  MT_CHECK(!meta.contains("grad_scaler") || meta.at("grad_scaler").is_object(),
           "checkpoint metadata ", path, ": 'grad_scaler' is not an object; the file is damaged");
  MT_CHECK(meta.contains("args") && meta.at("args").is_object(), "checkpoint metadata ", path,
           " has no 'args' object; the file is damaged");
  const nlohmann::json& args = meta.at("args");
  MT_CHECK(args.contains("model") && args.at("model").is_object(), "checkpoint metadata ", path,
           " has no 'args.model' object; the file is damaged");
  const nlohmann::json& model = args.at("model");
  const int64_t layers = meta_int(model, "num_layers", path, 1, INT32_MAX);
  // Every field of the model configuration: of its type, and present unless
  // it is newer than format 1's GPT-2 fields (older checkpoints lack those).
  ModelConfig types;
  for_each_model_field(types, [&](const char* key, const char*, const char*, const auto& field) {
    using T = std::decay_t<decltype(field)>;
    const bool required = is_gpt2_era_field(key);
    if (!model.contains(key)) {
      MT_CHECK(!required, "checkpoint metadata ", path, ": 'args.model.", key,
               "' is missing; the file is damaged");
      return;
    }
    if constexpr (std::is_same_v<T, int64_t>) {
      meta_int(model, key, path, field == 0 ? 0 : 1);  // a field whose default is 0 (none) may be 0
    } else {
      const nlohmann::json& x = model.at(key);
      const bool ok = std::is_same_v<T, float> ? x.is_number()
                      : std::is_same_v<T, bool> ? x.is_boolean()
                                                 : x.is_string();
      MT_CHECK(ok, "checkpoint metadata ", path, ": 'args.model.", key, "' is ", brief(x),
               ", not a ", std::is_same_v<T, float> ? "number" : std::is_same_v<T, bool> ? "boolean" : "string",
               "; the file is damaged");
    }
  });
  MT_CHECK(args.contains("tokenizer") && args.at("tokenizer").is_object() &&
               args.at("tokenizer").contains("type") && args.at("tokenizer").at("type").is_string(),
           "checkpoint metadata ", path, " has no 'args.tokenizer' with a 'type'; the file is damaged");
  MT_CHECK(args.contains("layer_stage") && args.at("layer_stage").is_array() &&
               int64_t(args.at("layer_stage").size()) == layers,
           "checkpoint metadata ", path, ": 'args.layer_stage' is not a list of ", layers,
           " pipeline ranks; the file is damaged");
  for (const nlohmann::json& s : args.at("layer_stage"))
    MT_CHECK(s.is_number_integer() && s.get<int64_t>() >= 0 && s.get<int64_t>() < pp,
             "checkpoint metadata ", path, ": 'args.layer_stage' holds ", brief(s),
             ", not a pipeline rank below ", pp, "; the file is damaged");
  return meta;
}

nlohmann::json read_checkpoint_meta(const std::string& dir) {
  const int64_t it = latest_iteration(dir);
  MT_CHECK(it >= 0, "no checkpoint in ", dir, " (", kTrackerFile,
           " is missing); fix: pass the --save directory of a run that saved");
  const std::string path = checkpoint_iteration_dir(dir, it) + "/meta.json";
  return parse_checkpoint_meta(read_text_file(path), path, it);
}

void check_save_target(const std::string& save, const std::string& load,
                       int64_t loaded_iteration, bool overwrite) {
  if (save.empty() || overwrite) return;
  const std::vector<int64_t> held = saved_iterations(save);
  std::error_code ec;
  const bool tracker = fs::exists(save + "/" + kTrackerFile, ec);
  if (held.empty() && !tracker) return;
  const std::string what =
      held.empty() ? std::string(kTrackerFile) : describe_iterations(save, held);
  const char* flag = "; or pass --overwrite-checkpoints to save over them";
  MT_CHECK(!load.empty(), "--save ", save, " holds checkpoints (", what,
           ") and this run loads none, so it would start from scratch and overwrite them; fix: "
           "--load ", save, " to resume, or another --save directory", flag);
  MT_CHECK(fs::exists(load, ec), "--load ", load, " does not exist, and --save ", save,
           " holds checkpoints (", what, ") that this run would overwrite from scratch; fix: "
           "correct --load (to resume: --load ", save, ")", flag);
  const bool same_dir = fs::equivalent(load, save, ec);
  if (loaded_iteration < 0) {
    MT_CHECK(!same_dir, "--load ", load, " has no ", kTrackerFile, " but holds checkpoints (",
             what, "), so this run would start from scratch and overwrite them; fix: write the "
             "iteration to resume from into ", load, "/", kTrackerFile, flag);
    MT_FAIL("--load ", load, " holds no checkpoint (no ", kTrackerFile, "), and --save ", save,
            " holds checkpoints (", what, ") that this run would overwrite from scratch; fix: "
            "correct --load, or another --save directory", flag);
  }
  MT_CHECK(same_dir, "--save ", save, " holds checkpoints (", what, ") of another run than --load ",
           load, "; fix: save into a new directory, or resume with --load ", save, flag);
  std::vector<int64_t> newer;
  for (int64_t it : held)
    if (it > loaded_iteration) newer.push_back(it);
  MT_CHECK(newer.empty(), "--save ", save, " holds ", describe_iterations(save, newer),
           ", newer than the iteration ", loaded_iteration, " named by ", kTrackerFile,
           " (a rolled-back tracker, or a crash between a save and the tracker update); this "
           "run would overwrite them; fix: write ", newer.back(), " into ", save, "/",
           kTrackerFile, " to resume from it", flag);
}

std::vector<std::string> recover_checkpoint_dir(const std::string& dir) {
  std::set<int64_t> its = iter_entries(dir, ".old");
  for (int64_t it : iter_entries(dir, ".tmp")) its.insert(it);
  std::vector<std::string> done;
  for (int64_t it : its)
    for (std::string& line : repair_replaced_dir(iteration_dir(dir, it), "save"))
      done.push_back(std::move(line));
  return done;
}

void check_writable_dir(const std::string& dir, const std::string& tag) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  MT_CHECK(!ec && fs::is_directory(dir, ec), "cannot create the --save directory ", dir, ": ",
           ec ? ec.message() : "exists and is not a directory",
           "; fix: check the path and its permissions");
  const std::string probe = dir + "/.write_probe_" + tag + "_" + std::to_string(::getpid());
  FILE* f = std::fopen(probe.c_str(), "wb");
  const bool ok = f != nullptr && std::fputs("probe\n", f) >= 0;
  const bool closed = f != nullptr && std::fclose(f) == 0;
  std::remove(probe.c_str());
  MT_CHECK(ok && closed, "the --save directory ", dir,
           " is not writable; fix: check its permissions and free space, or choose another --save");
}

void commit_iteration(const std::string& dir, int64_t iteration) {
  const std::string final_dir = iteration_dir(dir, iteration);
  const bool replaced = move_into_place(final_dir);  // iter_N.tmp -> iter_N, the old copy aside
  atomic_write_text(dir + "/" + kTrackerFile, (iteration == kReleaseIteration
                                                    ? std::string(kReleaseTracker)
                                                    : std::to_string(iteration)) + "\n");
  if (replaced) remove_dir_synced(old_dir_of(final_dir));
}

}  // namespace mt
