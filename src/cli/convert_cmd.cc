// `megatron convert`: Megatron-LM's tools/checkpoint/convert.py flags, for
// Hugging Face gpt2 / llama / mixtral folders <-> megatron.cpp checkpoints.
#include <cstdio>

#include "cli/commands.h"
#include "flags/strict_numbers.h"
#include "convert/convert.h"
#include "core/error.h"
#include "core/output_guard.h"

namespace mt {

namespace {

struct ConvertArgs {
  std::string model_type, loader, saver;
  ConvertOptions o;
};

}  // namespace

Command add_convert_command(CLI::App& app) {
  auto a = std::make_shared<ConvertArgs>();
  ConvertOptions& o = a->o;
  app.footer(
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
      "  place when complete: a failure or a kill never leaves a partial or missing model.");
  app.add_option("--model-type", a->model_type, "GPT (the only model type)")->required();
  app.add_option("--loader", a->loader,
                 "hf (also llama_hf, gpt2_hf, mixtral_hf): a Hugging Face folder; megatron: a "
                 "checkpoint")
      ->required();
  app.add_option("--saver", a->saver, "megatron (with --loader hf) or hf (with --loader megatron)")
      ->required();
  app.add_option("--load-dir", o.load_dir, "folder to read")->required();
  app.add_option("--save-dir", o.save_dir, "folder to write (created if missing)")->required();
  CLI::Option* tp = app.add_option("--target-tensor-parallel-size", o.target_tp,
                                   "saver megatron: TP size of the checkpoint (default 1)");
  CLI::Option* pp = app.add_option("--target-pipeline-parallel-size", o.target_pp,
                                   "saver megatron: PP size of the checkpoint (default 1; an even "
                                   "split of the layers)");
  CLI::Option* ep = app.add_option("--target-expert-parallel-size", o.target_ep,
                                   "saver megatron: EP size of an MoE checkpoint (default 1: "
                                   "every expert in each shard; N: the experts in N expert "
                                   "directories per stage, as an EP N run saves them)");
  CLI::Option* div = app.add_option("--make-vocab-size-divisible-by",
                                    o.make_vocab_size_divisible_by,
                                    "saver megatron: pad the vocabulary to a multiple of this x "
                                    "TP (default 128, as Megatron-LM)");
  app.add_flag("--overwrite-checkpoints", o.overwrite,
               "write into a --save-dir that already holds checkpoints (megatron) or a model (hf)");
  CLI::Option* bf16 = app.add_flag("--bf16", o.bf16,
                                   "saver hf: bf16 weights (rounded to nearest even) instead of "
                                   "fp32");
  CLI::Option* shard = app.add_option("--max-shard-size-mb", o.max_shard_size_mb,
                                      "saver hf: largest weight file in MB (10^6 bytes; default "
                                      "5000); above it model-0000i-of-0000N.safetensors");
  make_integer_options_strict(app);
  return [a, tp, pp, ep, div, bf16, shard]() {
    MT_CHECK(a->model_type == "GPT", "--model-type ", a->model_type,
             " is not supported; megatron.cpp converts GPT models (gpt2, llama and mixtral "
             "families)");
    std::string loader = a->loader;
    if (loader == "llama_hf" || loader == "gpt2_hf" || loader == "mixtral_hf")
      loader = "hf";  // Megatron-LM's names
    const bool import = loader == "hf" && a->saver == "megatron";
    const bool exporting = loader == "megatron" && a->saver == "hf";
    MT_CHECK(import || exporting, "--loader ", a->loader, " --saver ", a->saver,
             " is not a supported conversion; fix: --loader hf --saver megatron, or --loader "
             "megatron --saver hf");
    const ConvertOptions& o = a->o;
    // Before anything is created: --save-dir must not replace or write into
    // what --load-dir holds (core/output_guard.h). A Hugging Face folder is
    // read whole; an export replaces its --save-dir whole.
    OutputGuard paths;
    if (import) {
      paths.reads_dir("--load-dir", o.load_dir);
      paths.writes_dir("--save-dir", o.save_dir, OutputGuard::checkpoint_names());
    } else {
      paths.reads_dir("--load-dir", o.load_dir, OutputGuard::checkpoint_names());
      paths.writes_dir("--save-dir", o.save_dir);
    }
    paths.check();
    MT_CHECK(o.target_tp >= 1 && o.target_pp >= 1 && o.target_ep >= 1,
             "--target-tensor-parallel-size ", o.target_tp, ", --target-pipeline-parallel-size ",
             o.target_pp, " and --target-expert-parallel-size ", o.target_ep, " must be >= 1");
    if (import) {
      MT_CHECK(bf16->count() == 0 && shard->count() == 0, "--bf16 and --max-shard-size-mb apply "
               "to --saver hf; a megatron.cpp checkpoint holds fp32 weights");
      convert_hf_to_megatron(o);
    } else {
      MT_CHECK(tp->count() == 0 && pp->count() == 0 && ep->count() == 0 && div->count() == 0,
               "--target-tensor-parallel-size, --target-pipeline-parallel-size, "
               "--target-expert-parallel-size and --make-vocab-size-divisible-by apply to "
               "--saver megatron; a Hugging Face folder holds whole tensors");
      convert_megatron_to_hf(o);
    }
    return 0;
  };
}

}  // namespace mt
