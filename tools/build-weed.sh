#!/usr/bin/env bash
# Builds the SeaweedFS server (weed) that the S3 tests start, into
# .cache/bin/weed at the repository root. Idempotent: does nothing when the
# binary exists and is newer than tools/seaweedfs/go.sum (the pinned
# version). The first build takes about 7 minutes on 2 cores; the Go build
# cache makes later ones fast.
#
# Usage: tools/build-weed.sh [-f]     -f rebuilds even if up to date
# Env:   WEED_BIN   output path (default: <repo>/.cache/bin/weed)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mod="$root/tools/seaweedfs"
bin="${WEED_BIN:-$root/.cache/bin/weed}"
force=0
if [[ "${1:-}" == "-f" ]]; then force=1; fi

if [[ $force -eq 0 && -x "$bin" && "$bin" -nt "$mod/go.sum" ]]; then
	echo "build-weed: $bin is up to date"
	exit 0
fi

mkdir -p "$(dirname "$bin")"
echo "build-weed: building $bin (about 7 min the first time)"
start=$(date +%s)
# Build to a temporary name and move it into place, so that an interrupted
# build never leaves a truncated binary that looks up to date.
tmp="$bin.tmp.$$"
trap 'rm -f "$tmp"' EXIT
(cd "$mod" && go build -o "$tmp" github.com/seaweedfs/seaweedfs/weed)
mv -f "$tmp" "$bin"
echo "build-weed: done in $(( $(date +%s) - start ))s: $("$bin" version | head -n 1)"
