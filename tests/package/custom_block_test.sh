#!/usr/bin/env bash
# megatron.cpp as an installed package (CTest: custom_block_package, label
# library): install the build into a temporary prefix, configure and build
# examples/custom_block against that prefix alone (a project outside the
# tree), train its gated-GELU MLP on 1 rank and at TP2 x DP2 with sequence
# parallelism and ZeRO (--use-distributed-optimizer) on 4, and require the
# same loss at every iteration to 1e-6; and a TP2 checkpoint of it resumed on
# one rank to give the one-rank run's last losses; the same run step by step
# (setup(), step(), save()) to give run()'s losses; and the program's own
# samples (a megatron::DataSource) on 1 rank and at TP2 x DP2 to agree.
# Usage: custom_block_test.sh SOURCE_DIR BUILD_DIR MPIEXEC
set -euo pipefail
src=$1 build=$2 mpiexec=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
test -f "$tmp/prefix/include/megatron/block.h"
test ! -e "$tmp/prefix/include/model"  # the private headers stay private
cmake -S "$src/examples/custom_block" -B "$tmp/example" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
      -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$tmp/example" -j2 >/dev/null

# (the vocabulary padded to 128 rows on both layouts: Megatron pads to a
# multiple of --make-vocab-size-divisible-by x TP)
# A flag `megatron train` does not know: megatron::FlagError, naming it.
set +e
"$tmp/example/custom_block" --no-such-flag 1 >"$tmp/bad.log" 2>&1
rc=$?
set -e
[ "$rc" = 2 ] && grep -q -- "--no-such-flag" "$tmp/bad.log" || { echo "rc $rc"; cat "$tmp/bad.log"; exit 1; }

flags=(--mock-data --tokenizer-type NullTokenizer --vocab-size 127 --make-vocab-size-divisible-by 64
       --num-layers 2 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4
       --seq-length 32 --micro-batch-size 2 --global-batch-size 8 --train-iters 8
       --lr 1e-2 --min-lr 1e-3 --lr-decay-style cosine --lr-warmup-iters 2
       --weight-decay 0.1 --clip-grad 1.0 --hidden-dropout 0.1 --attention-dropout 0.1
       --peak-tflops 1 --log-interval 1)
cd "$tmp"
OMP_NUM_THREADS=1 "$tmp/example/custom_block" "${flags[@]}" --losses-out one.txt >one.log 2>&1 ||
  { cat one.log; exit 1; }
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  "$mpiexec" --oversubscribe --bind-to none -n 4 -x OMP_NUM_THREADS=1 \
  "$tmp/example/custom_block" "${flags[@]}" --tensor-model-parallel-size 2 --sequence-parallel \
  --use-distributed-optimizer --losses-out four.txt >four.log 2>&1 || { cat four.log; exit 1; }
# The runs took the registered block, and it learned.
grep -q "registered MLP 'gated_gelu'" one.log || { cat one.log; exit 1; }
grep -q "registered MLP 'gated_gelu'" four.log || { cat four.log; exit 1; }

# A checkpoint of the block saved at TP2 after 4 iterations, resumed on one
# rank (re-sharded on load) for the last 4.
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  "$mpiexec" --oversubscribe --bind-to none -n 2 -x OMP_NUM_THREADS=1 \
  "$tmp/example/custom_block" "${flags[@]}" --tensor-model-parallel-size 2 --exit-interval 4 \
  --save ckpt >half.log 2>&1 || { cat half.log; exit 1; }
OMP_NUM_THREADS=1 "$tmp/example/custom_block" "${flags[@]}" --load ckpt \
  --losses-out resumed.txt >resumed.log 2>&1 || { cat resumed.log; exit 1; }

# compare REFERENCE RUN ITERATIONS WHAT: RUN logged ITERATIONS iterations, each
# within 1e-6 of REFERENCE's loss there; prints the largest difference.
compare() {
  awk -v want="$3" -v what="$4" \
    'NR == FNR { ref[$1] = $2; next }
     { if (!($1 in ref)) { print "iteration " $1 " missing from the 1-rank run"; exit 1 }
       d = $2 - ref[$1]; if (d < 0) d = -d; if (d > worst) worst = d; n++ }
     END { if (n != want) { print what ": expected " want " iterations, got " n; exit 1 }
           printf "custom block, %s: %d iterations, max loss difference %.3g\n", what, n, worst
           if (worst > 1e-6) exit 1 }' "$1" "$2"
}
# The one-rank run learned (8 iterations logged, the loss well down).
awk 'END { if (NR != 8 || !($2 < first - 0.3)) { print "the 1-rank run did not learn"; exit 1 }
           printf "custom block, 1 rank: loss %.6f -> %.6f\n", first, $2 }
     NR == 1 { first = $2 }' one.txt
compare one.txt four.txt 8 "TP2 x DP2 + SP + ZeRO vs 1 rank"
compare one.txt resumed.txt 4 "saved at TP2, resumed on 1 rank, vs 1 rank"

# The same run driven step by step (setup(), step() x 8, save()): run()'s
# losses, and a checkpoint of iteration 8.
OMP_NUM_THREADS=1 "$tmp/example/custom_block" "${flags[@]}" --step-by-step --save steps_ckpt \
  --losses-out steps.txt >steps.log 2>&1 || { cat steps.log; exit 1; }
compare one.txt steps.txt 8 "step by step vs run()"
[ "$(cat steps_ckpt/latest_checkpointed_iteration.txt)" = 8 ] || { echo "no save() at 8"; exit 1; }

# The program's own samples (a megatron::DataSource, no data flag) on 1 rank
# step by step and at TP2 x DP2 + SP + ZeRO through run(): the same losses.
pflags=("${flags[@]:1}")  # without --mock-data
OMP_NUM_THREADS=1 "$tmp/example/custom_block" "${pflags[@]}" --pattern-data --step-by-step \
  --losses-out pattern_one.txt >pattern_one.log 2>&1 || { cat pattern_one.log; exit 1; }
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  "$mpiexec" --oversubscribe --bind-to none -n 4 -x OMP_NUM_THREADS=1 \
  "$tmp/example/custom_block" "${pflags[@]}" --pattern-data --tensor-model-parallel-size 2 \
  --sequence-parallel --use-distributed-optimizer --losses-out pattern_four.txt \
  >pattern_four.log 2>&1 || { cat pattern_four.log; exit 1; }
awk 'END { if (NR != 8 || !($2 < first - 0.3)) { print "the DataSource run did not learn"; exit 1 }
           printf "custom block, DataSource: loss %.6f -> %.6f\n", first, $2 }
     NR == 1 { first = $2 }' pattern_one.txt
compare pattern_one.txt pattern_four.txt 8 "DataSource, TP2 x DP2 + SP + ZeRO vs 1 rank"
