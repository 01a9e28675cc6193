// Flag values out of range, and sizes that overflow int64 or any machine's
// memory (issue 17): each is reported at start-up in one line naming the flag
// and the value, before any allocation or training.
#include "bad_input_util.h"

namespace mt::test {
namespace bad_args_test {

class BadArgs : public BadInputFixture {};

TEST_F(BadArgs, NegativeOrZeroValuesNameTheirFlag) {
  const BadInputCase cases[] = {
      {"negative ffn", train(" --ffn-hidden-size -8"), "--ffn-hidden-size -8"},
      {"negative global batch", train(" --global-batch-size -4"), "--global-batch-size -4"},
      {"negative decay iters", train(" --lr-decay-iters -3"), "--lr-decay-iters -3"},
      {"negative adam eps", train(" --adam-eps -1"), "--adam-eps -1"},
      {"zero adam eps", train(" --adam-eps 0"), "--adam-eps 0"},
      {"negative save interval", train(" --save-interval -2"), "--save-interval -2"},
      {"zero layers", train(" --num-layers 0"), "--num-layers 0"},
      {"negative hidden", train(" --hidden-size -32"), "--hidden-size -32"},
      {"negative head size", train(" --kv-channels -8"), "--kv-channels -8 must be > 0"},
      {"zero head size", train(" --kv-channels 0"), "--kv-channels 0 must be > 0"},
      {"odd head size for RoPE",
       train(" --kv-channels 7 --position-embedding-type rope"), "head dim 7"},
      {"zero heads", train(" --num-attention-heads 0"), "--num-attention-heads 0"},
      {"negative seq", train(" --seq-length -1"), "--seq-length -1"},
      {"negative positions", train(" --max-position-embeddings -64"),
       "--max-position-embeddings -64"},
      {"zero vocab multiple", train(" --make-vocab-size-divisible-by 0"),
       "--make-vocab-size-divisible-by 0"},
      {"zero init std", train(" --init-method-std 0"), "--init-method-std 0"},
      {"negative layernorm eps", train(" --layernorm-epsilon -1e-5"), "--layernorm-epsilon"},
      {"beta1 of 1", train(" --adam-beta1 1"), "--adam-beta1 1"},
      {"negative beta2", train(" --adam-beta2 -0.1"), "--adam-beta2 -0.1"},
      {"negative lr", train(" --lr -1 --min-lr 0"), "--lr -1"},
      {"NaN lr", train(" --lr nan"), "--lr nan"},
      {"negative min lr", train(" --min-lr -1"), "--min-lr -1"},
      {"negative warm-up", train(" --lr-warmup-iters -5"), "--lr-warmup-iters -5"},
      {"warm-up fraction above 1", train(" --lr-warmup-iters 0 --lr-warmup-fraction 1.5"),
       "--lr-warmup-fraction 1.5"},
      {"negative WSD decay", train(" --lr-wsd-decay-iters -1"), "--lr-wsd-decay-iters -1"},
      {"zero micro batch", train(" --micro-batch-size 0"), "--micro-batch-size 0"},
      {"negative eval iters", train(" --eval-iters -1"), "--eval-iters -1"},
      {"negative exit interval", train(" --exit-interval -1"), "--exit-interval -1"},
      {"negative exit duration", train(" --exit-duration-in-mins -1"),
       "--exit-duration-in-mins -1"},
      {"negative vocab size", train(" --vocab-size -3"), "--vocab-size -3"},
      {"negative bucket", train(" --ddp-bucket-size -1"), "--ddp-bucket-size -1"},
      {"negative peak", train(" --peak-tflops -1"), "--peak-tflops -1"},
      {"negative recompute layers", train(" --recompute-num-layers -1"),
       "--recompute-num-layers -1"},
      {"recompute module not built", train(" --recompute-granularity selective"
                                           " --recompute-modules core_attn gdn_norm_out"),
       "--recompute-modules gdn_norm_out (recompute GatedDeltaNet's output norm) is not "
       "supported"},
      {"moe_act without grouped GEMM", train(" --recompute-granularity selective"
                                             " --recompute-modules moe_act"),
       "--recompute-modules moe_act needs --moe-grouped-gemm"},
      {"mla_up_proj without MLA", train(" --recompute-granularity selective"
                                        " --recompute-modules mla_up_proj"),
       "--recompute-modules mla_up_proj needs --multi-latent-attention"},
      {"shared_experts with overlap",
       train(" --num-experts 4 --moe-shared-expert-intermediate-size 32"
             " --moe-token-dispatcher-type alltoall --moe-shared-expert-overlap"
             " --recompute-granularity selective --recompute-modules shared_experts"),
       "--recompute-modules shared_experts with --moe-shared-expert-overlap"},
      {"recompute module unknown", train(" --recompute-granularity selective"
                                         " --recompute-modules attention"),
       "--recompute-modules 'attention' is not one of Megatron-LM's modules"},
      {"MoE recompute with full", train(" --moe-layer-recompute --recompute-granularity full"
                                        " --recompute-method uniform --recompute-num-layers 1"),
       "--moe-layer-recompute with --recompute-granularity full"},
      {"negative virtual stage", train(" --num-layers-per-virtual-pipeline-stage -1"),
       "--num-layers-per-virtual-pipeline-stage -1"},
      {"negative weight decay", train(" --weight-decay -0.1"), "--weight-decay -0.1"},
      {"negative train iters", train(" --train-iters -1"), "--train-iters -1"},
      {"zero tensorboard interval", train(" --tensorboard-log-interval 0"),
       "--tensorboard-log-interval 0"},
      {"negative tensorboard queue", train(" --tensorboard-queue-size -1"),
       "--tensorboard-queue-size -1"},
  };
  for (const BadInputCase& c : cases) expect_fails(c);
}

// --device: a name that is no device, and cuda where it cannot run (this
// suite's binary: a CPU-only build, or no GPU; scripts/check_device_refusal.sh
// checks the CUDA build's own line) end at start-up with one line and the fix.
TEST_F(BadArgs, DeviceThatCannotRunIsRefused) {
  const BadInputCase cases[] = {
      {"unknown device", train(" --device tpu"), "--device tpu is not a device"},
      {"cuda without a GPU build or GPU", train(" --device cuda"), "--device cuda: "},
  };
  for (const BadInputCase& c : cases) expect_fails(c);
  const RunResult r = run(megatron() + substitute(train(" --device cuda"), data, dir.file("")));
  EXPECT_NE(r.output.find("fix: "), std::string::npos) << r.output;
}

TEST_F(BadArgs, IntegersAreDecimalAndInRange) {
  const BadInputCase cases[] = {
      {"1e20 for an integer", train(" --hidden-size 1e20"), "--hidden-size: '1e20'"},
      {"beyond int64", train(" --hidden-size 99999999999999999999"),
       "'99999999999999999999' is outside the range"},
      {"hex", train(" --num-layers 0x2"), "--num-layers: '0x2'"},
      {"negative seed", train(" --seed -1"), "--seed: '-1'"},
      {"hex in preprocess",
       " preprocess --input in.txt --output-prefix out --tokenizer-type NullTokenizer"
       " --vocab-size 0x10",
       "--vocab-size: '0x10'"},
  };
  for (const BadInputCase& c : cases) expect_fails(c);
  // "010" is ten (argparse's int()), not octal eight: the log names 10 layers.
  const RunResult r = run(megatron() + train(" --num-layers 010 --exit-interval 1"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("layers 10,"), std::string::npos) << r.output;
}

TEST_F(BadArgs, OverflowingAndAbsurdSizes) {
  const BadInputCase cases[] = {
      // 2^62 iterations x 8 sequences overflows int64 (UBSan found it in the data loader).
      {"samples overflow", train(" --train-iters 4611686018427387904"),
       "--train-iters x --global-batch-size"},
      // 4 x h overflows (UBSan found it in args.cc).
      {"head size overflows", train(" --kv-channels 4611686018427387904"),
       "(heads + 2 x groups) x --kv-channels"},
      {"default ffn overflows", train(" --hidden-size 4611686018427387904 --num-attention-heads 4"),
       "--hidden-size"},
      {"parameter count overflows", train(" --hidden-size 4294967296 --num-attention-heads 4"),
       "parameter count (--num-layers, --hidden-size"},
      {"vocab padding overflows", train(" --make-vocab-size-divisible-by 9223372036854775807"),
       "--make-vocab-size-divisible-by"},
      {"vocabulary beyond int32 ids",
       train(" --tokenizer-type NullTokenizer --vocab-size 9223372036854775807"),
       "--vocab-size 9223372036854775807"},
      {"TP x PP beyond int", train(" --tensor-model-parallel-size 2147483647"
                                   " --pipeline-model-parallel-size 2147483647"),
       "= 4611686014132420609"},
      // Representable but absurd: the memory prediction is checked against the
      // host's available memory before any allocation (memory/host_memory.h).
      {"model larger than memory", train(" --hidden-size 1000000 --num-attention-heads 4"),
       "are available"},
      {"sample index larger than memory", train(" --train-iters 1000000000000"),
       "fix: lower --train-iters"},
  };
  for (const BadInputCase& c : cases) expect_fails(c);
}

// `megatron serve`: a layout it does not serve, sizes that cannot work, and a
// cache budget below one request are refused at start-up, naming the flag.
TEST_F(BadArgs, ServeSizesAndLayoutsAreRefusedByName) {
  const RunResult t = run(megatron() + train(" --save " + dir.file("ckpt")));
  ASSERT_EQ(t.exit_code, 0) << t.output;
  const std::string serve = " serve --load " + dir.file("ckpt") + " --port 0";
  const BadInputCase cases[] = {
      {"pipeline parallel", serve + " --pipeline-model-parallel-size 2",
       "serve does not run pipeline parallelism yet (--pipeline-model-parallel-size 2)"},
      {"port out of range", " serve --load " + dir.file("ckpt") + " --port 70000",
       "--port 70000 must be in 0..65535"},
      {"step smaller than the batch",
       serve + " --inference-max-requests 8 --inference-dynamic-batching-max-tokens 4",
       "--inference-dynamic-batching-max-tokens 4 must be >= --inference-max-requests (8)"},
      {"TP without its ranks", serve + " --tensor-model-parallel-size 2",
       "serve with --tensor-model-parallel-size 2 needs exactly 2 ranks"},
      {"cache budget below one request", serve + " --inference-dynamic-batching-buffer-size-gb 1e-7",
       "less than one request of --inference-max-seq-length"},
  };
  for (const BadInputCase& c : cases) expect_fails(c);
}

}  // namespace bad_args_test
}  // namespace mt::test
