#!/usr/bin/env bash
# A real single-node Slurm on this host (Debian's slurm-wlm + munge), to try
# examples/slurm/train.sbatch and to test time limits and requeues
# (bench/slurm_requeue.sh). Not for production: one node, root, no cgroups,
# no accounting.
#
#   scripts/slurm_local.sh start    install (apt-get, once), write the config,
#                                   start munged, slurmctld, slurmd; wait until
#                                   the node is idle
#   scripts/slurm_local.sh stop     stop the daemons, cancel jobs, remove state
#   scripts/slurm_local.sh status   daemons and `sinfo`; exit 1 if not up
#
# The node is this host (`hostname -s`) with its CPUs and memory, in
# partition `debug`. KillWait (seconds between the SIGTERM at a job's time
# limit and the SIGKILL) is MT_SLURM_KILLWAIT, default 30 as Slurm's.
# Daemons run as root and are started directly (no systemd needed); their logs
# and state are in /var/lib/megatron-slurm. Needs root and apt-get on Debian.
set -euo pipefail

state=/var/lib/megatron-slurm   # logs, spool, pid files: removed by stop
conf=/etc/slurm/slurm.conf
killwait=${MT_SLURM_KILLWAIT:-30}

die() { echo "slurm_local: error: $*" >&2; exit 1; }
say() { echo "slurm_local: $*"; }

require_root() {
  [[ $(id -u) == 0 ]] || die "needs root (it installs packages and starts daemons); fix: run with sudo"
}

install_packages() {
  if command -v slurmctld >/dev/null && command -v slurmd >/dev/null &&
     command -v munged >/dev/null && command -v srun >/dev/null; then
    return 0
  fi
  command -v apt-get >/dev/null || die "slurmctld/slurmd/munged not installed and no apt-get here; fix: install Slurm and munge by hand"
  say "installing slurm-wlm and munge (apt-get)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null
}

# Whether a daemon runs (a dead one may linger as a zombie: not counted).
alive() {
  local pid
  for pid in $(pgrep -x "$1"); do
    [[ $(ps -o stat= -p "$pid" 2>/dev/null) == [^Z]* ]] && return 0
  done
  return 1
}

# Whether systemd manages this host: then its units would fight our daemons.
systemd_running() { [[ -d /run/systemd/system ]]; }

write_config() {
  local host cpus mem_mb
  host=$(hostname -s)
  cpus=$(nproc --all)
  mem_mb=$(awk '/MemTotal/ {print int($2 / 1024 * 0.9)}' /proc/meminfo)
  mkdir -p /etc/slurm "$state"/{ctld,d,log}
  cat >"$conf" <<EOF
# Written by scripts/slurm_local.sh: one node, this host.
ClusterName=megatron-local
SlurmctldHost=$host
AuthType=auth/munge
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/d
SlurmctldPidFile=$state/slurmctld.pid
SlurmdPidFile=$state/slurmd.pid
SlurmctldLogFile=$state/log/slurmctld.log
SlurmdLogFile=$state/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups here: track processes by parent pid, bind nothing.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
# SIGTERM at the time limit, SIGKILL KillWait seconds later.
KillWait=$killwait
OverTimeLimit=0
MinJobAge=300
JobRequeue=1
NodeName=$host CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
  # Slurm 22.05 wants cgroup.conf to exist only with cgroup plugins; none here.
}

start_munge() {
  if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then return 0; fi
  if [[ ! -s /etc/munge/munge.key ]]; then
    say "creating /etc/munge/munge.key"
    dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
  fi
  chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge
  runuser -u munge -- /usr/sbin/munged
  for _ in $(seq 50); do
    munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  die "munged did not start (see /var/log/munge/munged.log)"
}

start() {
  require_root
  install_packages
  if systemd_running; then
    die "systemd runs on this host: use its units (systemctl start munge slurmctld slurmd) with $conf instead of this script"
  fi
  if status >/dev/null 2>&1; then say "already up"; sinfo; return 0; fi
  write_config
  start_munge
  alive slurmctld || slurmctld -i   # -i: ignore old state
  alive slurmd || slurmd
  local node_state=""
  for _ in $(seq 60); do
    node_state=$(sinfo -h -N -o %T 2>/dev/null | head -1)
    [[ $node_state == idle ]] && { say "up: node $(hostname -s) idle, KillWait=${killwait}s"; sinfo; return 0; }
    sleep 0.5
  done
  die "node not idle after 30 s (state '${node_state}'); see $state/log/slurmctld.log and slurmd.log"
}

stop() {
  require_root
  if alive slurmctld; then scancel --full --quiet --user=root 2>/dev/null || true; fi
  local pidfile pid
  for pidfile in "$state/slurmd.pid" "$state/slurmctld.pid"; do
    [[ -s $pidfile ]] && kill "$(cat "$pidfile")" 2>/dev/null || true
  done
  for _ in $(seq 50); do
    alive slurmd || alive slurmctld || break
    sleep 0.2
  done
  # A step daemon may outlive slurmd (a job cancelled by stop): end it too.
  for _ in $(seq 25); do alive slurmstepd || break; sleep 0.2; done
  for pid in $(pgrep -x slurmstepd); do kill -9 "$pid" 2>/dev/null || true; done
  if [[ -s /run/munge/munged.pid ]]; then kill "$(cat /run/munge/munged.pid)" 2>/dev/null || true; fi
  rm -rf "$state" "$conf"
  say "stopped"
}

status() {
  local ok=0 d
  for d in munged slurmctld slurmd; do
    if alive "$d"; then echo "$d: running"; else echo "$d: not running"; ok=1; fi
  done
  [[ $ok == 0 ]] && sinfo
  return $ok
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) die "usage: scripts/slurm_local.sh start|stop|status (got '${1:-}')" ;;
esac
