#include "train/run_paths.h"


#include "checkpoint/checkpoint_tokenizer.h"
#include "observe/profiler.h"

namespace mt {

OutputGuard train_output_guard(const TrainArgs& args) {
  OutputGuard g;
  g.reads_dir("--load", args.load, OutputGuard::checkpoint_names());
  for (const std::string& prefix : args.dataset_prefixes()) {
    g.reads_file("--data-path", prefix + ".bin");
    g.reads_file("--data-path", prefix + ".idx");
    g.reads_file("--data-path", dataset_record_path(prefix));
  }
  g.reads_file("--vocab-file", args.vocab_file);
  g.reads_file("--merge-file", args.merge_file);
  g.reads_file_or_dir("--tokenizer-model", args.tokenizer_model);
  for (const std::string& c : args.config_files) g.reads_file("--config", c);
  g.reads_dir("--data-cache-path", args.data_cache_path, {"blend_index_*"});

  g.writes_dir("--save", args.save, OutputGuard::checkpoint_names());
  g.may_share("--save", "--load");
  g.writes_file("--log-json", args.log_json, /*appends=*/true);
  g.writes_dir("--tensorboard-dir", args.tensorboard_dir, {"events.out.tfevents.*"});
  if (args.profile.enabled) {
    const std::string dir = profile_output_dir(args.profile, args.tensorboard_dir, args.save);
    g.writes_dir(args.profile.dir.empty() ? "the profile directory (--tensorboard-dir, --save or .)" : "--profile-dir",
                 dir, {"timeline_iters_*"});
  }
  g.writes_dir("--data-cache-path", args.data_cache_path, {"blend_index_*"});
  return g;
}

}  // namespace mt
