// megatron::Converter (include/megatron/convert.h): `megatron convert`'s
// flags (declared here: no other command has them) parsed from a flag list,
// or the caller's ConvertOptions, run as convert/convert.h's two directions.
// The binary's `convert` (cli/convert_cmd.cc) is a client of it.
#include "megatron/convert.h"

#include <stdexcept>
#include <utility>

#include <CLI/CLI.hpp>

#include "api/job_errors.h"
#include "comm/mpi_env.h"
#include "convert/convert.h"
#include "core/error.h"
#include "core/output_guard.h"
#include "flags/command_words.h"
#include "flags/strict_numbers.h"

namespace megatron {

namespace {

constexpr const char* kAbout =
    "convert Hugging Face gpt2/llama folders <-> megatron.cpp checkpoints";

constexpr const char* kFooter =
    "hf -> megatron: --load-dir holds config.json (model_type gpt2, llama or mixtral),\n"
    "  model.safetensors (or model.safetensors.index.json and its shards; F32/F16/BF16)\n"
    "  and the tokenizer files (gpt2: vocab.json + merges.txt; llama, mixtral:\n"
    "  tokenizer.model, else tokenizer.json). Mixtral's experts become Megatron's MoE\n"
    "  layers (every expert whole on each TP rank; EP 1). Writes the release checkpoint\n"
    "  <save-dir>/release\n"
    "  (tracker 'release'): `train --load` fine-tunes it from iteration 0 with a fresh\n"
    "  optimizer, `generate --load` decodes it. The vocabulary is padded to a multiple of\n"
    "  --make-vocab-size-divisible-by x TP with copies of the last row (rows of a\n"
    "  config.json vocab_size above the tokenizer's are kept as padding rows).\n"
    "  Dropout is recorded as 0.0 (converted models carry none): pass --hidden-dropout and\n"
    "  --attention-dropout to train to fine-tune with dropout.\n"
    "megatron -> hf: any checkpoint of --load-dir (its tracker's iteration, any TP/PP) whose\n"
    "  model is gpt2-like (LayerNorm, learned positions, GELU, biases, tied), llama-like\n"
    "  (RMSNorm, rope, SwiGLU, no linear biases) or mixtral-like (llama-like with every\n"
    "  MLP a mixture of experts, Megatron's default router) -> config.json,\n"
    "  model.safetensors (sharded with model.safetensors.index.json above\n"
    "  --max-shard-size-mb) and the checkpoint's tokenizer files under Hugging Face's\n"
    "  names; vocab_size as imported when recorded.\n"
    "Both write into a working folder (release.tmp; <save-dir>.tmp beside it) renamed into\n"
    "  place when complete: a failure or a kill never leaves a partial or missing model.";

mt::ConvertOptions internal(const ConvertOptions& o) {
  mt::ConvertOptions c;
  c.load_dir = o.input;
  c.save_dir = o.output;
  c.target_tp = o.target_tensor_parallel_size;
  c.target_pp = o.target_pipeline_parallel_size;
  c.target_ep = o.target_expert_parallel_size;
  c.make_vocab_size_divisible_by = o.make_vocab_size_divisible_by;
  c.overwrite = o.overwrite;
  c.bf16 = o.bf16;
  c.max_shard_size_mb = o.max_shard_size_mb;
  return c;
}

}  // namespace

struct Converter::Impl {
  ConvertOptions options;
  // Refused by run() before anything else, in this order (the words'
  // --model-type, then --loader / --saver): "" when none.
  std::string refusal;
  // Options given of the other direction: the import-only ones
  // (--target-*-size, --make-vocab-size-divisible-by) and the export-only
  // ones (--bf16, --max-shard-size-mb). From the words: given at all; from a
  // ConvertOptions: not the default.
  bool import_only_given = false, export_only_given = false;

  void convert() {
    const bool import = options.direction == ConvertDirection::kHfToMegatron;
    const mt::ConvertOptions o = internal(options);
    // Before anything is created: --save-dir must not replace or write into
    // what --load-dir holds (core/output_guard.h). A Hugging Face folder is
    // read whole; an export replaces its --save-dir whole.
    mt::OutputGuard paths;
    if (import) {
      paths.reads_dir("--load-dir", o.load_dir);
      paths.writes_dir("--save-dir", o.save_dir, mt::OutputGuard::checkpoint_names());
    } else {
      paths.reads_dir("--load-dir", o.load_dir, mt::OutputGuard::checkpoint_names());
      paths.writes_dir("--save-dir", o.save_dir);
    }
    paths.check();
    MT_CHECK(o.target_tp >= 1 && o.target_pp >= 1 && o.target_ep >= 1,
             "--target-tensor-parallel-size ", o.target_tp, ", --target-pipeline-parallel-size ",
             o.target_pp, " and --target-expert-parallel-size ", o.target_ep, " must be >= 1");
    if (import) {
      MT_CHECK(!export_only_given, "--bf16 and --max-shard-size-mb apply "
               "to --saver hf; a megatron.cpp checkpoint holds fp32 weights");
      mt::convert_hf_to_megatron(o);
    } else {
      MT_CHECK(!import_only_given,
               "--target-tensor-parallel-size, --target-pipeline-parallel-size, "
               "--target-expert-parallel-size and --make-vocab-size-divisible-by apply to "
               "--saver megatron; a Hugging Face folder holds whole tensors");
      mt::convert_megatron_to_hf(o);
    }
  }
};

Converter::Converter(ConvertOptions options) : impl_(std::make_unique<Impl>()) {
  if (options.input.empty()) throw std::invalid_argument("megatron::Converter: no input folder");
  if (options.output.empty()) throw std::invalid_argument("megatron::Converter: no output folder");
  const ConvertOptions defaults;
  impl_->import_only_given =
      options.target_tensor_parallel_size != defaults.target_tensor_parallel_size ||
      options.target_pipeline_parallel_size != defaults.target_pipeline_parallel_size ||
      options.target_expert_parallel_size != defaults.target_expert_parallel_size ||
      options.make_vocab_size_divisible_by != defaults.make_vocab_size_divisible_by;
  impl_->export_only_given =
      options.bf16 != defaults.bf16 || options.max_shard_size_mb != defaults.max_shard_size_mb;
  impl_->options = std::move(options);
}

Converter::Converter(const std::vector<std::string>& flags) : impl_(std::make_unique<Impl>()) {
  ConvertOptions& o = impl_->options;
  std::string model_type, loader, saver;
  CLI::App app{"megatron.cpp as a library: megatron convert"};
  app.require_subcommand(1);
  CLI::App& cmd = *app.add_subcommand("convert", kAbout);
  cmd.footer(kFooter);
  cmd.add_option("--model-type", model_type, "GPT (the only model type)")->required();
  cmd.add_option("--loader", loader,
                 "hf (also llama_hf, gpt2_hf, mixtral_hf): a Hugging Face folder; megatron: a "
                 "checkpoint")
      ->required();
  cmd.add_option("--saver", saver, "megatron (with --loader hf) or hf (with --loader megatron)")
      ->required();
  cmd.add_option("--load-dir", o.input, "folder to read")->required();
  cmd.add_option("--save-dir", o.output, "folder to write (created if missing)")->required();
  CLI::Option* tp = cmd.add_option("--target-tensor-parallel-size", o.target_tensor_parallel_size,
                                   "saver megatron: TP size of the checkpoint (default 1)");
  CLI::Option* pp = cmd.add_option("--target-pipeline-parallel-size",
                                   o.target_pipeline_parallel_size,
                                   "saver megatron: PP size of the checkpoint (default 1; an even "
                                   "split of the layers)");
  CLI::Option* ep = cmd.add_option("--target-expert-parallel-size", o.target_expert_parallel_size,
                                   "saver megatron: EP size of an MoE checkpoint (default 1: "
                                   "every expert in each shard; N: the experts in N expert "
                                   "directories per stage, as an EP N run saves them)");
  CLI::Option* div = cmd.add_option("--make-vocab-size-divisible-by",
                                    o.make_vocab_size_divisible_by,
                                    "saver megatron: pad the vocabulary to a multiple of this x "
                                    "TP (default 128, as Megatron-LM)");
  cmd.add_flag("--overwrite-checkpoints", o.overwrite,
               "write into a --save-dir that already holds checkpoints (megatron) or a model (hf)");
  CLI::Option* bf16 = cmd.add_flag("--bf16", o.bf16,
                                   "saver hf: bf16 weights (rounded to nearest even) instead of "
                                   "fp32");
  CLI::Option* shard = cmd.add_option("--max-shard-size-mb", o.max_shard_size_mb,
                                      "saver hf: largest weight file in MB (10^6 bytes; default "
                                      "5000); above it model-0000i-of-0000N.safetensors");
  mt::make_integer_options_strict(cmd);
  mt::parse_command_words(app, cmd, flags);
  impl_->import_only_given =
      tp->count() > 0 || pp->count() > 0 || ep->count() > 0 || div->count() > 0;
  impl_->export_only_given = bf16->count() > 0 || shard->count() > 0;
  // What run() refuses first, as the command did after its parse.
  std::string l = loader;
  if (l == "llama_hf" || l == "gpt2_hf" || l == "mixtral_hf") l = "hf";  // Megatron-LM's names
  const bool import = l == "hf" && saver == "megatron";
  const bool exporting = l == "megatron" && saver == "hf";
  o.direction = exporting ? ConvertDirection::kMegatronToHf : ConvertDirection::kHfToMegatron;
  if (model_type != "GPT")
    impl_->refusal = "--model-type " + model_type +
                     " is not supported; megatron.cpp converts GPT models (gpt2, llama and "
                     "mixtral families)";
  else if (!import && !exporting)
    impl_->refusal = "--loader " + loader + " --saver " + saver +
                     " is not a supported conversion; fix: --loader hf --saver megatron, or "
                     "--loader megatron --saver hf";
}

Converter::~Converter() = default;

const ConvertOptions& Converter::options() const { return impl_->options; }

int Converter::run() {
  mt::ending_job_on_error([&] {
    MT_CHECK(impl_->refusal.empty(), impl_->refusal);
    impl_->convert();
  });
  return 0;
}

}  // namespace megatron
