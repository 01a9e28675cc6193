#!/usr/bin/env bash
# Emulated nodes on one host: N network namespaces, each a "node" with its own
# IP address and hostname, joined by a bridge; Open MPI launched across them
# from a hostfile, with an rsh agent that enters the namespace instead of ssh.
# Ranks inside one node talk over shared memory, across nodes over TCP on the
# veths, so the inter-node link can be shaped (tc netem) or cut.
#
#   scripts/emulated_nodes.sh run N SLOTS [--rate 1gbit --delay 200us] -- mpirun-args...
#       bring N nodes up, run `mpirun --hostfile <N nodes x SLOTS> mpirun-args...`
#       across them, tear everything down (also on failure or Ctrl-C); exits
#       with mpirun's status.
#   scripts/emulated_nodes.sh up N [--rate R --delay D]   bring up and leave up
#   scripts/emulated_nodes.sh down                        remove what `up` made
#   scripts/emulated_nodes.sh probe        exit 0 if namespaces can be made here
#   scripts/emulated_nodes.sh link-down I | link-up I     cut / restore node I's link
#   scripts/emulated_nodes.sh mpirun-flags N SLOTS        the mpirun flags `run` uses
#
# Node i (1..N) is namespace mt<K>n<i> (also its hostname), address
# 10.77.<K>.<i>/24 on its eth0; its peer veth mt<K>v<i> is on the bridge
# mt<K>br. mpirun runs in a head node mt<K>n0 (10.77.<K>.254; no ranks) on
# the same bridge: `ip netns exec mt<K>n0 mpirun $(... mpirun-flags N S) ...`
# after `up`. K is MT_NODES_ID
# (0..250, default 0): sets with different ids can be up at the same time
# (tests that run in parallel each take their own). Shaping applies netem to both
# directions of every node's link, so a message between two nodes crosses
# two shaped hops (2 x delay, the rate once), as between two hosts behind one
# switch.
# Needs root and network namespaces (iproute2); refuses clearly otherwise.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
set_id() {
  id=$1
  bridge=mt${id}br
  subnet=10.77.$id
  state=/run/megatron-emulated-nodes-$id  # what `up` made, for `down`
}
node() { echo "mt${id}n$1"; }  # namespace and hostname of node $1
veth() { echo "mt${id}v$1"; }  # its link's end on the bridge

# MT_NODES_ID=auto (`run` only): the first free id of 100..250 (0..99 are
# for fixed use, e.g. one per test), claimed
# atomically (mkdir) and written to $MT_NODES_ID_FILE if set; a claim whose
# owner died is cleaned up and reused.
claim_free_id() {
  local k
  for ((k = 100; k <= 250; k++)); do
    set_id "$k"
    if [[ -f $state/owner ]] && ! kill -0 "$(cat "$state/owner")" 2>/dev/null; then down; fi
    if mkdir "$state" 2>/dev/null; then
      echo $$ >"$state/owner"
      [[ -n ${MT_NODES_ID_FILE:-} ]] && echo "$id" >"$MT_NODES_ID_FILE"
      return 0
    fi
  done
  die "no free emulated-node id in 100..250 (/run/megatron-emulated-nodes-*); fix: scripts/emulated_nodes.sh down with MT_NODES_ID=K"
}

die() { echo "emulated_nodes: error: $*" >&2; exit 1; }

require_namespaces() {
  [[ $(id -u) -eq 0 ]] || die "needs root (network namespaces, veth, bridge); fix: run as root"
  command -v ip >/dev/null || die "ip not found; fix: apt-get install iproute2"
  command -v unshare >/dev/null || die "unshare not found; fix: apt-get install util-linux"
  ip netns add "mtprobe$$" 2>/dev/null ||
    die "cannot create a network namespace here (a container without CAP_SYS_ADMIN?); fix: run on a host or VM as root"
  ip netns del "mtprobe$$"
}

down() {
  local n=0
  [[ -f $state/nodes ]] && n=$(cat "$state/nodes")
  for ((i = 0; i <= n && n > 0; i++)); do
    # Processes keep a deleted namespace alive: end them first (Open MPI's
    # daemons daemonize, so a killed mpirun leaves them behind).
    local pids
    pids=$(ip netns pids "$(node "$i")" 2>/dev/null || true)
    [[ -n $pids ]] && kill -9 $pids 2>/dev/null || true
    ip netns del "$(node "$i")" 2>/dev/null || true
    ip link del "$(veth "$i")" 2>/dev/null || true
  done
  ip link del "$bridge" 2>/dev/null || true
  rm -rf "$state"
}

# shape <node> <rate> <delay>: both ends of the node's link. Rate with a
# token bucket (tbf); delay needs netem (sch_netem), which some kernels lack
# (this project's VMs: then --delay is refused, --rate still works).
shape() {
  local i=$1 rate=$2 delay=$3
  [[ -z $rate && -z $delay ]] && return 0
  local where
  for where in host node; do
    local run=() dev
    if [[ $where == host ]]; then dev=$(veth "$i"); else run=(ip netns exec "$(node "$i")"); dev=eth0; fi
    if [[ -n $delay ]]; then
      "${run[@]}" tc qdisc replace dev "$dev" root handle 1: netem delay "$delay" limit 100000 ||
        die "cannot add a netem delay (this kernel lacks sch_netem?); fix: drop --delay, or use a kernel with CONFIG_NET_SCH_NETEM"
      [[ -n $rate ]] && "${run[@]}" tc qdisc replace dev "$dev" parent 1: handle 2: tbf rate "$rate" \
        burst 256kb latency 100ms
    else
      "${run[@]}" tc qdisc replace dev "$dev" root tbf rate "$rate" burst 256kb latency 100ms ||
        die "cannot shape $dev to '$rate' (tc tbf); fix: a rate as tc writes it, e.g. 1gbit"
    fi
  done
}

up() {
  local n=$1 rate=$2 delay=$3
  [[ $n =~ ^[1-9][0-9]?$ && $n -le 32 ]] || die "node count '$n' must be 1..32"
  require_namespaces
  if [[ ${MT_NODES_ID:-0} == auto ]]; then
    claim_free_id
  else
    down  # a previous run that was killed leaves nothing behind
    mkdir -p "$state"
  fi
  echo "$n" >"$state/nodes"
  ip link add "$bridge" type bridge
  ip link set "$bridge" up
  for ((i = 0; i <= n; i++)); do  # node 0: the head, where mpirun runs
    ip netns add "$(node "$i")"
    ip link add "$(veth "$i")" type veth peer name eth0 netns "$(node "$i")"
    ip link set "$(veth "$i")" master "$bridge" up
    ip netns exec "$(node "$i")" ip addr add "$subnet.$((i == 0 ? 254 : i))/24" dev eth0
    ip netns exec "$(node "$i")" ip link set eth0 up
    ip netns exec "$(node "$i")" ip link set lo up
    # A cut link fails a TCP connection with data in flight after ~6 s of
    # retransmissions (Linux default ~15 min), so that mpirun, which waits
    # for a lost node's daemon, ends too. Only inside these namespaces.
    ip netns exec "$(node "$i")" sh -c 'echo 4 > /proc/sys/net/ipv4/tcp_retries2'
    ((i > 0)) && shape "$i" "$rate" "$delay"
  done
}

mpirun_flags() {  # mpirun-flags N SLOTS: hostfile, agent and TCP on the emulated subnet
  local n=$1 slots=$2 hostfile
  hostfile="$state/hostfile"
  mkdir -p "$state"
  : >"$hostfile"
  for ((i = 1; i <= n; i++)); do echo "$(node "$i") slots=$slots" >>"$hostfile"; done
  # Tree spawn off: every daemon is started by mpirun through the agent.
  # TCP keepalive on Open MPI's control connections (default: 300 s idle +
  # 9 x 20 s) so that a node cut off is declared lost in ~8 s and mpirun ends
  # the job instead of waiting for ever for that node's daemon (the ranks'
  # watchdog, --distributed-timeout-minutes, ends the ranks themselves).
  echo "--hostfile $hostfile --mca plm_rsh_agent $here/netns_rsh.sh --mca plm_rsh_no_tree_spawn 1" \
       "--mca oob_tcp_keepalive_time 5 --mca oob_tcp_keepalive_intvl 1 --mca oob_tcp_keepalive_probes 3" \
       "--mca oob_tcp_if_include $subnet.0/24 --mca btl_tcp_if_include $subnet.0/24" \
       "--mca btl self,vader,tcp"
}

if [[ ${MT_NODES_ID:-0} != auto ]]; then
  [[ ${MT_NODES_ID:-0} =~ ^[0-9]+$ && ${MT_NODES_ID:-0} -le 250 ]] ||
    die "MT_NODES_ID '${MT_NODES_ID}' must be 0..250 or auto"
  set_id "${MT_NODES_ID:-0}"
fi
cmd=${1:-}
shift || true
rate="" delay=""
parse_shaping() {
  while [[ $# -gt 0 && $1 != -- ]]; do
    case $1 in
      --rate) rate=$2; shift 2 ;;
      --delay) delay=$2; shift 2 ;;
      *) die "unknown option '$1'; fix: --rate R (e.g. 1gbit) and --delay D (e.g. 200us)" ;;
    esac
  done
}
case $cmd in
  up)
    n=${1:?node count}; shift
    parse_shaping "$@"
    up "$n" "$rate" "$delay"
    ;;
  probe) require_namespaces ;;
  down) down ;;
  link-down) ip link set "$(veth "${1:?node}")" down ;;
  link-up) ip link set "$(veth "${1:?node}")" up ;;
  mpirun-flags) mpirun_flags "${1:?node count}" "${2:?slots}" ;;
  run)
    n=${1:?node count}; slots=${2:?slots per node}; shift 2
    args=()
    while [[ $# -gt 0 && $1 != -- ]]; do args+=("$1"); shift; done
    [[ ${1:-} == -- ]] || die "run N SLOTS [--rate R --delay D] -- <mpirun arguments>"
    shift
    parse_shaping "${args[@]}"
    trap 'down 2>/dev/null || true' EXIT
    trap 'exit 130' INT TERM
    up "$n" "$rate" "$delay"
    # shellcheck disable=SC2046
    ip netns exec "$(node 0)" mpirun $(mpirun_flags "$n" "$slots") "$@"
    ;;
  *) sed -n '2,24p' "$0" >&2; exit 2 ;;
esac
