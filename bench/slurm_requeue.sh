#!/usr/bin/env bash
# The Slurm time limit and requeue, end to end, on a real single-node Slurm
# (scripts/slurm_local.sh): submits examples/slurm/train.sbatch with a tiny
# GPT on 2 tasks (TP2) and --time=3, so the job's near-limit signal
# (--signal=B:USR1@60: Slurm checks every 30 s, so it comes 60-90 s before
# the limit, 90-120 s into the run) makes every rank save
# and exit; the job requeues itself and the rerun resumes from that checkpoint
# and finishes. Checks the save (log lines, latest_checkpointed_iteration.txt),
# the resume, and that the losses after the resume equal those of the same run
# launched directly (mpirun, never interrupted, run first). Then the same job with
# --time=1 and no early signal: the limit's own SIGTERM must save too, and
# `scontrol requeue` of the TIMEOUT job must resume. Prints one JSON line.
# Takes about 10 minutes (Slurm holds a requeued job 120 s before it may start
# again), so it is not in CI. Needs root; starts Slurm if it is not up and
# stops it again at the end.
#
#   bench/slurm_requeue.sh [path/to/megatron]      (default build/megatron)
# MT_BENCH_ITERS=N sets --train-iters instead of the ~150 s estimate.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
megatron="$(realpath "${1:-$repo/build/megatron}")"
work=${MT_BENCH_DIR:-/tmp/megatron-slurm-requeue}
die() { echo "slurm_requeue: error: $*" >&2; exit 1; }
[[ -x $megatron ]] || die "$megatron is not built; fix: MT_BUILD_TARGET=megatron scripts/build.sh"

rm -rf "$work" && mkdir -p "$work"
bash "$repo/scripts/prepare_fortunes.sh" "$work/fortunes.txt" >/dev/null
"$megatron" preprocess --input "$work/fortunes.txt" --output-prefix "$work/fortunes" >/dev/null

started_slurm=0
if ! bash "$repo/scripts/slurm_local.sh" status >/dev/null 2>&1; then
  # niced daemons: the ranks they start inherit it (2 shared cores)
  MT_SLURM_KILLWAIT=10 nice -n 19 bash "$repo/scripts/slurm_local.sh" start >/dev/null
  started_slurm=1
fi
job=""
cleanup() {
  [[ -n $job ]] && scancel "$job" 2>/dev/null || true
  if (( started_slurm )); then bash "$repo/scripts/slurm_local.sh" stop >/dev/null; fi
}
trap cleanup EXIT

model_args=(--num-layers 4 --hidden-size 128 --num-attention-heads 4 --seq-length 64
            --micro-batch-size 8 --global-batch-size 16
            --lr 2e-3 --min-lr 2e-4 --lr-decay-style cosine --lr-warmup-iters 20
            --weight-decay 0.1 --clip-grad 1.0 --split 98,2,0 --eval-interval 0 --seed 1234
            --data-path "$work/fortunes_text_document" --vocab-file "$work/fortunes_vocab.json")
direct() {  # the same job launched directly: 2 ranks, TP2, one thread each
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    nice -n 19 mpirun -n 2 --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 \
    "$megatron" train "${model_args[@]}" --tensor-model-parallel-size 2 "$@"
}
# Iterations for ~150 s uninterrupted at this machine's current speed: more
# than the 90-120 s until the signal, so the first run cannot finish, and the
# requeued run finishes before its own signal.
direct --train-iters 30 --log-interval 10 --log-json "$work/calibrate.jsonl" >/dev/null 2>&1 ||
  die "a direct 30-iteration run failed; try: bash $0 with a working $megatron"
iters=$(python3 -c "import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; \
ms=r[-1]['ms_per_iter']; print(max(100, min(5000, int(150000 / ms))))" "$work/calibrate.jsonl")
[[ -n ${MT_BENCH_ITERS:-} ]] && iters=$MT_BENCH_ITERS
train_args=("${model_args[@]}" --train-iters "$iters" --log-interval 1)

# The uninterrupted reference first, alone (run beside the job it would slow both).
echo "slurm_requeue: $iters iterations; the uninterrupted reference run" >&2
direct --train-iters "$iters" --log-interval 1 --log-json "$work/reference.jsonl" \
  >"$work/reference.out" 2>&1 ||
  die "the reference run failed; see $work/reference.out"

# --- the Slurm job: signalled near its time limit, requeued, resumed ---------
job=$(cd "$repo" && TP=2 PP=1 CKPT="$work/ckpt" MEGATRON="$megatron" \
  sbatch --parsable --job-name=mt-requeue --nodes=1 --ntasks-per-node=2 --cpus-per-task=1 \
    --time=3 --signal=B:USR1@60 --output="$work/job.out" examples/slurm/train.sbatch \
    "${train_args[@]}" --log-json "$work/slurm.jsonl")
echo "slurm_requeue: submitted job $job; waiting for the time limit's signal" >&2
job_field() { scontrol show job "$job" 2>/dev/null | grep -o "$1=[^ ]*" | head -1 | cut -d= -f2; }
deadline=$((SECONDS + 2400))
until grep -q "requeueing" "$work/job.out" 2>/dev/null; do
  state=$(job_field JobState)
  [[ $state == COMPLETED || $state == FAILED || $state == TIMEOUT || $state == CANCELLED ]] &&
    die "job $job ended ($state) before being stopped near its limit; see $work/job.out"
  (( SECONDS < deadline )) || die "no requeue after 2400 s; see $work/job.out"
  sleep 2
done

until [[ $(job_field JobState) == COMPLETED ]]; do
  state=$(job_field JobState)
  [[ $state == FAILED || $state == TIMEOUT || $state == CANCELLED ]] &&
    die "requeued job $job ended $state; see $work/job.out"
  (( SECONDS < deadline )) || die "requeued job not done after 2400 s; see $work/job.out"
  sleep 2
done
restarts=$(job_field Restarts)

# --- the time limit's own SIGTERM (no early signal: a harmless B:URG) --------
# Every rank gets SIGTERM at the limit and SIGKILL KillWait (10 s here) later;
# the batch shell dies too, so the job ends TIMEOUT and is requeued from here.
echo "slurm_requeue: again with the time limit's own SIGTERM (--time=1)" >&2
job=$(cd "$repo" && TP=2 PP=1 CKPT="$work/ckpt_limit" MEGATRON="$megatron" \
  sbatch --parsable --job-name=mt-limit --nodes=1 --ntasks-per-node=2 --cpus-per-task=1 \
    --time=1 --signal=B:URG@10 --output="$work/limit.out" examples/slurm/train.sbatch \
    "${train_args[@]}")
until [[ $(job_field JobState) == TIMEOUT ]]; do
  state=$(job_field JobState)
  [[ $state == COMPLETED || $state == FAILED || $state == CANCELLED ]] &&
    die "job $job ended $state, not at its time limit; see $work/limit.out"
  (( SECONDS < deadline )) || die "job $job did not reach its time limit; see $work/limit.out"
  sleep 2
done
cp "$work/ckpt_limit/latest_checkpointed_iteration.txt" "$work/limit_tracker.txt" 2>/dev/null || true
scontrol requeue "$job"
until grep -q "loaded checkpoint" "$work/limit.out"; do
  (( SECONDS < deadline )) || die "requeued job $job did not resume; see $work/limit.out"
  sleep 2
done
scancel "$job"
job=""

python3 - "$work" "$restarts" "$iters" <<'EOF'
import json, re, sys, datetime
work, restarts, iters = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
out = open(f"{work}/job.out").read()
def hms(t): return datetime.datetime.strptime(t, "%H:%M:%S.%f")
signalled = re.findall(r"slurm: (\S+) time limit near", out)
exited = re.findall(r"slurm: (\S+) ranks exited with status (\d+)", out)
saved_as_asked = [int(x) for x in re.findall(r"exiting at iteration (\d+) as asked", out)]
saved_log = [int(x) for x in re.findall(r"saved checkpoint at iteration (\d+)", out)]
requeued_at = [int(x) for x in re.findall(r"saved at iteration (\d+); requeueing", out)]
resumed = [int(x) for x in re.findall(r"loaded checkpoint from \S+ at iteration (\d+)", out)]
def losses(path):
    d = {}
    for line in open(path):
        r = json.loads(line)
        if "loss" in r: d[r["iteration"]] = r["loss"]
    return d
slurm, ref = losses(f"{work}/slurm.jsonl"), losses(f"{work}/reference.jsonl")
first = requeued_at[0]
after = sorted(i for i in slurm if i > first)
equal = bool(after) and all(slurm[i] == ref.get(i) for i in after) and max(ref) == max(slurm)
tracker_ok = bool(saved_as_asked) and saved_as_asked[0] == first and first in saved_log
lim = open(f"{work}/limit.out").read()
lim_saved = [int(x) for x in re.findall(r"saved checkpoint at iteration (\d+)", lim)]
lim_resumed = [int(x) for x in re.findall(r"loaded checkpoint from \S+ at iteration (\d+)", lim)]
try: lim_tracker = int(open(f"{work}/limit_tracker.txt").read())
except OSError: lim_tracker = None
lim_ok = bool(lim_saved) and lim_tracker == lim_saved[0] and lim_resumed == [lim_tracker]
ok = equal and tracker_ok and bool(resumed) and resumed[0] == first and lim_ok
print(json.dumps({
    "launcher": "srun --mpi=pmix",
    "train_iters": iters,
    "runs": restarts + 1,
    "saved_iteration_at_time_limit": first,
    "saved_log_lines_ok": tracker_ok,
    "sigterm_to_exit_s": round((hms(exited[0][0]) - hms(signalled[0])).total_seconds(), 2),
    "exit_status_after_signal": int(exited[0][1]),
    "resumed_iteration": resumed[0] if resumed else None,
    "final_iteration": max(slurm),
    "losses_compared": len(after),
    "losses_equal": equal,
    "max_abs_loss_diff": max((abs(slurm[i] - ref[i]) for i in after if i in ref), default=None),
    "time_limit_sigterm_saved_iteration": lim_saved[0] if lim_saved else None,
    "time_limit_tracker": lim_tracker,
    "time_limit_requeued_resumed_iteration": lim_resumed[0] if lim_resumed else None,
}))
sys.exit(0 if ok else 1)
EOF
