#include "flags/profile_flags.h"

namespace mt {

void add_profile_flags(CLI::App& app, ProfileArgs* p) {
  CLI::Option_group* g = app.add_option_group("profiling");
  g->add_flag("--profile", p->enabled,
              "record a timeline of the iterations logged as --profile-step-start + 1 .. "
              "--profile-step-end on --profile-ranks, written as one Trace Event Format JSON "
              "(Perfetto, chrome://tracing) with a track per rank");
  g->add_option("--profile-step-start", p->step_start,
                "iterations done when the timeline starts (default 10)");
  g->add_option("--profile-step-end", p->step_end,
                "iterations done when it stops, after that iteration's save (default 12)");
  g->add_option("--profile-ranks", p->ranks, "world ranks to profile (default 0)")
      ->expected(1, -1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  g->add_option("--profile-dir", p->dir,
                "folder of the trace file (default: --tensorboard-dir, else --save, else the "
                "working directory)");
  g->add_flag("--use-pytorch-profiler", p->use_pytorch_profiler,
              "accepted for Megatron-LM compatibility; changes nothing (no PyTorch here: "
              "--profile already writes a Chrome trace)");
}

}  // namespace mt
