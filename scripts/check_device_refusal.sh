#!/usr/bin/env bash
# `megatron train --device cuda` where it cannot run (no GPU here, or a
# CPU-only build) must end at once: non-zero exit, one line on stderr naming
# --device cuda, the cause and the fix. Usage: check_device_refusal.sh BINARY
set -uo pipefail
bin=${1:?usage: check_device_refusal.sh path/to/megatron}
out=$(timeout 60 "$bin" train --device cuda --train-iters 1 --data-path /nonexistent/corpus 2>&1 >/dev/null)
rc=$?
lines=$(printf '%s\n' "$out" | grep -c .)
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$lines" -eq 1 ] &&
   printf '%s' "$out" | grep -q -- '--device cuda' && printf '%s' "$out" | grep -q 'fix:'; then
  echo "check_device_refusal: ok (exit $rc): $out"
else
  echo "check_device_refusal: FAILED (exit $rc, $lines lines): $out" >&2
  exit 1
fi
