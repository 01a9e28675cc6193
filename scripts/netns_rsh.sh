#!/usr/bin/env bash
# Open MPI's rsh agent for emulated nodes (scripts/emulated_nodes.sh): where
# mpirun would run `ssh HOST COMMAND`, this runs COMMAND inside the network
# namespace named HOST, with its own hostname (a UTS namespace) so that Open
# MPI's shared-memory files of different nodes never collide.
set -euo pipefail
while [[ ${1:-} == -* ]]; do shift; done  # options meant for ssh
host=${1:?usage: netns_rsh.sh HOST COMMAND...}
shift
ip netns list | grep -qw "^$host" ||
  { echo "netns_rsh: no emulated node '$host'; fix: scripts/emulated_nodes.sh up N" >&2; exit 255; }
exec ip netns exec "$host" unshare --uts sh -c "hostname $host && $*"
