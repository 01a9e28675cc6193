#!/usr/bin/env bash
# Builds the default corpus from Debian's `fortunes` package (about 2.5 MB of
# English): every fortune file concatenated, the "%" separators turned into
# blank lines so each fortune is one document, backspace overstrikes removed.
# Usage: scripts/prepare_fortunes.sh OUT.txt
set -euo pipefail
out=${1:?usage: prepare_fortunes.sh OUT.txt}
src=/usr/share/games/fortunes
[ -d "$src" ] || { echo "error: $src is missing; fix: apt-get install fortunes" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
find "$src" -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' -print0 | sort -z |
  xargs -0 cat | tr -d '\010\r' | sed 's/^%$//' > "$out.tmp"
mv "$out.tmp" "$out"
echo "prepare_fortunes: $(wc -c < "$out") bytes in $out"
