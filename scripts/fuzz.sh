#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang + ASan + UBSan into
# build-fuzz/ (only the libraries they need) and runs them side by side for a
# bounded time.
# Usage: scripts/fuzz.sh [seconds of a core per target, default 60] [target ...]
# Fails on a crash, sanitizer report, hang (> 10 s on one input),
# allocation over 2 GB, or wrong answer; the input is saved as
# build-fuzz/artifacts/<target>-crash-* — reproduce with
#   build-fuzz/tests/fuzz/fuzz_<target> build-fuzz/artifacts/<target>-crash-...
# The corpus grows in build-fuzz/corpus/<target>/ across runs.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(indexed_dataset safetensors checkpoint_meta)

cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug \
      -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" -DMT_FUZZ=ON -DMT_BUILD_TESTS=OFF >/dev/null
build_targets=(make_corpus)
for t in "${targets[@]}"; do build_targets+=("fuzz_$t"); done
cmake --build build-fuzz -j"$(nproc)" --target "${build_targets[@]}"

source scripts/sanitizer_env.sh
# No MPI in the fuzz targets: leaks are findings here (libFuzzer checks per input).
export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=1"
# One OpenMP thread: the readers' parallel loops only add thread start-up per input.
export OMP_NUM_THREADS=1
work="$(mktemp -d "${TMPDIR:-/tmp}/mt_fuzz_run.XXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir -p build-fuzz/artifacts
TMPDIR="$work" build-fuzz/tests/fuzz/make_corpus build-fuzz/corpus

# The targets run side by side, one per core: each gets about SECONDS of one
# core, in SECONDS x targets / cores of wall time (3 targets on 2 cores: 1.5x).
cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)  # nproc alone obeys OMP_NUM_THREADS
wall=$(( (secs * ${#targets[@]} + cores - 1) / cores ))
[ "$wall" -ge "$secs" ] || wall=$secs
echo "fuzz: ${targets[*]} side by side for ${wall}s (~${secs}s of a core each)"
pids=()
for t in "${targets[@]}"; do
  TMPDIR="$work" "build-fuzz/tests/fuzz/fuzz_$t" "build-fuzz/corpus/$t" \
      -max_total_time="$wall" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
      -print_final_stats=1 -artifact_prefix="build-fuzz/artifacts/$t-" \
      >"build-fuzz/artifacts/$t.log" 2>&1 &
  pids+=($!)
done
failed=()
for i in "${!targets[@]}"; do
  t=${targets[$i]}
  log="build-fuzz/artifacts/$t.log"
  if ! wait "${pids[$i]}"; then
    tail -n 60 "$log"
    echo "fuzz: $t FAILED (log: $log; the input is the artifact named above)" >&2
    failed+=("$t")
    continue
  fi
  echo -n "fuzz: $t "
  grep -E "^(stat::number_of_executed_units|stat::average_exec_per_sec|stat::new_units_added)" "$log" \
    | tr '\n' ' '
  echo
done
[ ${#failed[@]} -eq 0 ] || exit 1
echo "fuzz: ok (${targets[*]}, ~${secs}s of a core each)"
