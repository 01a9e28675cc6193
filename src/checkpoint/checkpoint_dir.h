// A checkpoint directory as a whole: which iterations it holds, which one the
// tracker names, the metadata of each, and the steps that keep a complete copy
// of every saved iteration on disk at every moment (DESIGN.md "Checkpoints").
//
//   <dir>/latest_checkpointed_iteration.txt  the iteration to resume from, written last
//   <dir>/iter_NNNNNNN/                      a complete checkpoint (renamed in only when
//                                            every rank has written its part)
//   <dir>/iter_NNNNNNN.tmp/                  a save in progress; incomplete until renamed
//   <dir>/iter_NNNNNNN.old/                  the previous copy of an iteration that is being
//                                            saved again, kept until the new copy is in place
//   <dir>/release/                           a release checkpoint (Megatron's name for converted
//                                            weights: tracker "release"): weights only, loaded
//                                            as iteration 0 with a fresh optimizer
//
// Re-saving an iteration (SIGTERM or --exit-interval on a save point, a run
// that re-trains over its own checkpoints) renames the complete iter_N aside
// to iter_N.old, renames iter_N.tmp in, writes the tracker and only then
// removes iter_N.old. A crash at any point leaves iter_N or iter_N.old
// complete; readers fall back to iter_N.old, and the next run that saves into
// the directory puts it back (recover_checkpoint_dir). The steps are
// checkpoint/atomic_dir.h's, which `convert` uses for its output too.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mt {

// Names inside an iteration's folder: one model-parallel rank's files, and a
// DP rank's optimizer state within it.
std::string rank_dir_name(int tp_rank, int pp_rank);  // "mp_rank_TT_PPP"
std::string optim_file_name(int dp_rank);             // "/optim_dp_DDD.safetensors"
// An MoE model's experts of expert-parallel rank `ep_rank` on pipeline stage
// `pp_rank` (Megatron's legacy EP suffix; TT is the expert tensor-parallel
// rank, 00: experts are whole), and an expert-DP rank's optimizer state of them.
std::string expert_dir_name(int ep_rank, int pp_rank);  // "mp_rank_00_PPP_EEE"
std::string expert_optim_file_name(int edp_rank);       // "/optim_edp_DDD.safetensors"

inline constexpr const char* kTrackerFile = "latest_checkpointed_iteration.txt";
inline constexpr int kCheckpointFormatVersion = 1;  // meta.json "version"

// A run never saves iteration 0 (it saves after a step), so iteration 0 is the
// release checkpoint, as in Megatron-LM.
inline constexpr int64_t kReleaseIteration = 0;
inline constexpr const char* kReleaseTracker = "release";
// <dir>/iter_NNNNNNN, or <dir>/release for kReleaseIteration.
std::string iteration_dir(const std::string& dir, int64_t iteration);

// The iteration named by <dir>/latest_checkpointed_iteration.txt (0 for
// "release"), or -1 if the file does not exist. Anything but a non-negative
// decimal number or "release" (surrounding whitespace allowed) is an error
// naming the file and its content.
int64_t latest_iteration(const std::string& dir);

// The complete iterations in `dir` (iter_N directories; an iter_N.old whose
// iter_N is missing counts as N), ascending. Empty if `dir` does not exist.
std::vector<int64_t> saved_iterations(const std::string& dir);

// The directory holding iteration `it` of `dir`: iter_N, or iter_N.old when a
// re-save of N was interrupted. Throws naming both when neither exists.
std::string checkpoint_iteration_dir(const std::string& dir, int64_t it);

// Validates the text of a meta.json (its path for messages) that must describe
// iteration `dir_iteration`: format and version, iteration, consumed samples,
// parallel sizes, the model configuration, tokenizer and layer_stage. Every
// problem is an mt::Error naming the file and the field.
nlohmann::json parse_checkpoint_meta(const std::string& text, const std::string& path,
                                     int64_t dir_iteration);

// meta.json of the latest checkpoint of `dir` (throws if there is none).
nlohmann::json read_checkpoint_meta(const std::string& dir);

// Refuses (mt::Error naming the checkpoints and the flags) to let a run save
// into `save` when that directory holds checkpoints the run did not load:
// a typo in --load, a lost tracker, or another run's --save would otherwise
// start from scratch and overwrite them. `loaded_iteration` is the iteration
// this run resumes from `load` (-1: none). Saving over the run's own newer
// iterations is refused too. `overwrite` (--overwrite-checkpoints) allows it.
void check_save_target(const std::string& save, const std::string& load,
                       int64_t loaded_iteration, bool overwrite);

// Start-up repair of the --save directory (rank 0, before anyone reads it):
// puts an interrupted re-save's iter_N.old back as iter_N, removes an
// iter_N.old whose iter_N is complete, and removes iter_N.tmp (saves that a
// crash interrupted). Returns one line per action, for the log.
std::vector<std::string> recover_checkpoint_dir(const std::string& dir);

// Creates `dir` if needed and writes and removes a probe file in it, so that an
// unwritable --save fails at start-up instead of at the first save. `tag`
// keeps the probe files of concurrent ranks apart.
void check_writable_dir(const std::string& dir, const std::string& tag);

// Rank 0, after every rank's part of iter_N.tmp is on disk: makes it iter_N
// (rename-aside of an existing iter_N, see above), then writes the tracker
// (kReleaseIteration: release.tmp → release, tracker "release").
void commit_iteration(const std::string& dir, int64_t iteration);

}  // namespace mt
