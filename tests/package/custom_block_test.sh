#!/usr/bin/env bash
# megatron.cpp as an installed package (CTest: custom_block_package, label
# library): install the build into a temporary prefix, configure and build
# examples/custom_block against that prefix alone (a project outside the
# tree), train its gated-GELU MLP on 1 rank and at TP2 x DP2 with sequence
# parallelism and ZeRO (--use-distributed-optimizer) on 4, and require the
# same loss at every iteration to 1e-6.
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

# Both runs logged every iteration; the largest difference of their losses.
awk 'NR == FNR { one[$1] = $2; next }
     { if (!($1 in one)) { print "iteration " $1 " missing from the 1-rank run"; exit 1 }
       d = $2 - one[$1]; if (d < 0) d = -d; if (d > worst) worst = d; n++ }
     END { if (n != 8) { print "expected 8 iterations, got " n; exit 1 }
           if (!(one[8] < one[1] - 0.3)) { print "the loss did not fall: " one[1] " -> " one[8]; exit 1 }
           printf "custom block, TP2 x DP2 + ZeRO vs 1 rank: %d iterations, first loss %.9f, " \
                  "max loss difference %.3g\n", n, one[1], worst
           if (worst > 1e-6) exit 1 }' one.txt four.txt
