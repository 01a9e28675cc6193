#include "cli/optimizer_flags.h"

namespace mt {

void add_optimizer_flags(CLI::Option_group* g, OptimizerArgs* o, OptimizerConfig* cfg) {
  g->add_option("--optimizer", o->optimizer,
                "adam (AdamW, default) or sgd (torch's SGD: momentum --sgd-momentum, weight "
                "decay added to the gradient)");
  g->add_option("--sgd-momentum", cfg->sgd_momentum, "SGD momentum factor (default 0.9)");
  g->add_option("--decoupled-lr", o->decoupled_lr,
                "the input embedding's and output layer's own peak learning rate (same schedule; "
                "default: --lr)");
  g->add_option("--decoupled-min-lr", o->decoupled_min_lr,
                "with --decoupled-lr: their learning rate at the end of decay (default: --min-lr)");
  g->add_option("--start-weight-decay", o->start_weight_decay,
                "weight decay at the start (with --weight-decay-incr-style linear|cosine)");
  g->add_option("--end-weight-decay", o->end_weight_decay,
                "weight decay at the end of training (>= the start)");
  g->add_option("--weight-decay-incr-style", o->weight_decay_incr_style,
                "constant (--weight-decay, default), linear or cosine from --start-weight-decay "
                "to --end-weight-decay over the training iterations");
  g->add_flag("--use-checkpoint-opt-param-scheduler,--use-checkpoint-opt_param-scheduler",
              o->use_checkpoint_opt_param_scheduler,
              "on resume, take the LR and weight-decay schedule (--lr, --min-lr, warm-up, decay "
              "length and style, weight-decay ends and style) from the checkpoint");
  g->add_flag("--override-opt-param-scheduler,--override-opt_param-scheduler",
              o->override_opt_param_scheduler,
              "on resume, take that schedule from this command line (without either flag the "
              "two must agree, as in Megatron-LM)");
}

}  // namespace mt
