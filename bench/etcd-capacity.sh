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
go build -o .cache/bin/etcdmember ./internal/testservers/etcdmember
dir=$(mktemp -d "${TMPDIR:-/tmp}/lakegate-etcdcap.XXXXXX")
etcd_pid=
cleanup() {
  if [[ -n $etcd_pid ]]; then
    kill "$etcd_pid" 2>/dev/null || true
    wait "$etcd_pid" 2>/dev/null || true
  fi
  rm -rf "$dir"
}
trap cleanup EXIT
read -r cport pport < <(python3 -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1",0)) for x in s]
print(" ".join(str(x.getsockname()[1]) for x in s))')
.cache/bin/etcdmember --name=m0 --data-dir="$dir/etcd" \
  --listen-client-urls="http://127.0.0.1:$cport" --advertise-client-urls="http://127.0.0.1:$cport" \
  --listen-peer-urls="http://127.0.0.1:$pport" --initial-advertise-peer-urls="http://127.0.0.1:$pport" \
  --initial-cluster="m0=http://127.0.0.1:$pport" --quota-backend-bytes=8589934592 --log-level=warn \
  2>"$dir/etcd.log" &
etcd_pid=$!
for _ in $(seq 1 300); do
  curl -fsS "http://127.0.0.1:$cport/health" 2>/dev/null | grep -q '"health":"true"' && break
  sleep 0.1
done
curl -fsS "http://127.0.0.1:$cport/health" | grep -q '"health":"true"' || { cat "$dir/etcd.log" >&2; echo "etcd not healthy" >&2; exit 1; }
cpu() { awk '{print $14 + $15}' "/proc/$etcd_pid/stat"; }
for w in $WRITERS; do
  c0=$(cpu) s0=$(date +%s.%N)
  "$bin" bench etcd --etcd "http://127.0.0.1:$cport" --writers "$w" --watchers "$w" \
    --record-bytes "$RECORD_BYTES" --duration "$DURATION"
  c1=$(cpu) s1=$(date +%s.%N)
  python3 -c "print('\netcd member CPU over these runs: %.0f%% of a core\n' % (100 * ($c1 - $c0) / $(getconf CLK_TCK) / ($s1 - $s0)))"
done
