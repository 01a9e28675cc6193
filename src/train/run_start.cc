#include "train/run_start.h"

#include <functional>
#include <string>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/checkpoint_io.h"
#include "core/error.h"
#include "core/log.h"
#include "train/data_fingerprint.h"
#include "train/run_paths.h"

namespace mt {

namespace {

// Runs `decide` on world rank 0; its mt::Error reaches every rank, and every
// rank throws it.
void decide_on_rank0(const ParallelState& ps, const std::function<void()>& decide) {
  std::string refusal;
  if (ps.world_rank == 0) {
    try {
      decide();
    } catch (const Error& e) {
      refusal = e.what();
    }
  }
  uint64_t n = refusal.size();
  ps.world_comm.broadcast(&n, sizeof n, 0);
  if (n == 0) return;
  refusal.resize(size_t(n));
  ps.world_comm.broadcast(refusal.data(), size_t(n), 0);
  throw Error(refusal);
}

}  // namespace

void check_outputs_against_inputs(const TrainArgs& args, const ParallelState& ps) {
  decide_on_rank0(ps, [&] { train_output_guard(args).check(); });
}

DirLock lock_save_dir(const TrainArgs& args, const ParallelState& ps) {
  if (args.save.empty()) return {};
  DirLock lock;
  decide_on_rank0(ps, [&] {
    check_writable_dir(args.save, "0");  // creates it; names it if it cannot be
    lock = lock_dir_or_fail(args.save, "--save");
  });
  return lock;
}

void prepare_save_dir(const TrainArgs& args, int64_t loaded_iteration, const ParallelState& ps) {
  if (args.save.empty()) return;
  if (ps.world_rank == 0) {
    check_save_target(args.save, args.load, loaded_iteration, args.overwrite_checkpoints);
    for (const std::string& line : recover_checkpoint_dir(args.save))
      log_line(true, "checkpoint directory: %s\n", line.c_str());
  }
  ps.world_comm.barrier();  // the directory exists and is repaired before anyone reads it
  if (ps.world_rank != 0) check_writable_dir(args.save, std::to_string(ps.world_rank));
}

void record_and_check_datasets(const TrainArgs& args, int64_t loaded_iteration,
                               nlohmann::json& run_args, const ParallelState& ps) {
  decide_on_rank0(ps, [&] {
    run_args["datasets"] = dataset_fingerprints(args.dataset_prefixes());
    if (args.mock_data)
      run_args["datasets"].push_back(mock_data_record(args.model.vocab_size, args.tokenizer_eod));
    if (loaded_iteration < 0 || args.finetune || args.skip_train) return;
    const nlohmann::json saved = read_checkpoint_meta(args.load).at("args");
    const std::string source =
        changed_data_source(saved.value("datasets", nlohmann::json()), run_args["datasets"],
                            args.load);
    if (!source.empty()) log_line(true, "warning: %s\n", source.c_str());
    const std::string change =
        changed_dataset(saved.value("datasets", nlohmann::json()), run_args["datasets"], args.load);
    if (change.empty()) return;
    MT_CHECK(args.allow_changed_data, change);
    log_line(true, "warning: %s; going on (--allow-changed-data)\n",
             change.substr(0, change.find("; resuming")).c_str());
  });
}

}  // namespace mt
