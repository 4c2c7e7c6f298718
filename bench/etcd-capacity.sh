#!/usr/bin/env bash
# bench/etcd-capacity.sh — how many commit records per second one etcd
# member carries on this machine (issue #28, target 5; docs/benchmarks.md,
# "Capacity model"). It starts a real etcd member (the etcd server of
# go.mod, built from internal/testservers/etcdmember) with fsync on, as a
# production member runs, and runs `lakegate bench etcd` against it for each
# writer count: writers are nodes' commit loops (one transaction at a time
# each), watchers the nodes' commit-log watches (as many as writers).
#
# Environment: WRITERS ("1 3 10 30"), RECORD_BYTES ("400,4000,25000"),
# DURATION (10s), LAKEGATE_BIN (default: builds .cache/bin/lakegate).
# Prints one Markdown table per writer count; the etcd member's CPU over
# each is printed beside it.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
WRITERS=${WRITERS:-"1 3 10 30"} RECORD_BYTES=${RECORD_BYTES:-"400,4000,25000"} DURATION=${DURATION:-10s}
mkdir -p .cache/bin
bin=${LAKEGATE_BIN:-}
if [[ -z $bin ]]; then
  go build -o .cache/bin/lakegate ./cmd/lakegate
  bin=.cache/bin/lakegate
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/lakegate-etcdcap.XXXXXX")
repo=$ROOT tmp=$dir
say() { echo "etcd-capacity: $*" >&2; }
source "$ROOT/e2e/interop/nodes.sh" # start_etcd_member
cleanup() {
  if [[ -n $etcd_pid ]]; then
    kill "$etcd_pid" 2>/dev/null || true
    wait "$etcd_pid" 2>/dev/null || true
  fi
  rm -rf "$dir"
}
trap cleanup EXIT
start_etcd_member "$dir" --quota-backend-bytes=8589934592 || exit 1
cpu() { awk '{print $14 + $15}' "/proc/$etcd_pid/stat"; }
for w in $WRITERS; do
  c0=$(cpu) s0=$(date +%s.%N)
  "$bin" bench etcd --etcd "$etcd_url" --writers "$w" --watchers "$w" \
    --record-bytes "$RECORD_BYTES" --duration "$DURATION"
  c1=$(cpu) s1=$(date +%s.%N)
  python3 -c "print('\netcd member CPU over these runs: %.0f%% of a core\n' % (100 * ($c1 - $c0) / $(getconf CLK_TCK) / ($s1 - $s0)))"
done
