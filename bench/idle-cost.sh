#!/usr/bin/env bash
# bench/idle-cost.sh — the idle cost of a standalone node (issue #28, target
# 4): CPU and etcd transactions per second of a node serving TOPICS topics,
# each with one durable subscription, and no traffic. See docs/benchmarks.md,
# "Idle cost".
#
# It starts a fresh `lakegate standalone` on free loopback ports, creates the
# topics and subscriptions through the admin REST (PUT …/{topic}, PUT
# …/{topic}/subscription/s), waits SETTLE seconds, then reads the process's
# CPU time (/proc/PID/stat, utime+stime: the embedded etcd included) and
# lakegate_etcd_txns_total over WINDOW seconds. With RESTART=1 the node is
# restarted after the creation and the topics are loaded again by reading
# their stats, so the creation's own work is not in the window.
#
# With NODES=N (N > 1) the same on a cluster as a user deploys it
# (e2e/interop/nodes.sh): one real etcd member and N `lakegate serve`
# processes on one file:// store; the topics spread over the nodes by
# placement, and the line says each node's CPU, the etcd member's, and the
# transactions of all nodes together.
#
# Environment: TOPICS (1000), SETTLE (40), WINDOW (60), RESTART (0),
# NODES (1), LAKEGATE_BIN (default: builds .cache/bin/lakegate), KEEP=1
# (keep the data directory), LAKEGATE_CPUPROFILE (a CPU profile of the
# measured window, written when it ends; on a cluster one per node,
# <file>.<pid>). Prints one line: cpu % of a core,
# etcd txns/s.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
TOPICS=${TOPICS:-1000} SETTLE=${SETTLE:-40} WINDOW=${WINDOW:-60} RESTART=${RESTART:-0} NODES=${NODES:-1}
if [[ $NODES -gt 1 && $RESTART == 1 ]]; then
  echo "RESTART=1 is for one node (NODES=1)" >&2
  exit 2
fi
bin=${LAKEGATE_BIN:-}
if [[ -z $bin ]]; then
  mkdir -p .cache/bin
  go build -o .cache/bin/lakegate ./cmd/lakegate
  bin=.cache/bin/lakegate
fi
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pulsar=$(free_port) http=$(free_port) etcd=$(free_port)
dir=$(mktemp -d "${TMPDIR:-/tmp}/lakegate-idle.XXXXXX")
pid=
cleanup() {
  [[ -n $pid ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  [[ $NODES -gt 1 ]] && { stop_lakegate || true; }
  if [[ ${KEEP:-0} == 1 ]]; then echo "kept $dir" >&2; else rm -rf "$dir"; fi
}
trap cleanup EXIT
base=http://127.0.0.1:$http
start() {
  "$bin" standalone --data-dir "$dir" --pulsar-addr 127.0.0.1:$pulsar --http-addr 127.0.0.1:$http --etcd-port $etcd >>"$dir/log" 2>&1 &
  pid=$!
  for _ in $(seq 200); do
    curl -sf "$base/metrics" >/dev/null && return
    kill -0 "$pid" 2>/dev/null || { echo "lakegate exited; log: $dir/log" >&2; exit 1; }
    sleep 0.1
  done
  echo "lakegate did not start" >&2
  exit 1
}
each() { # each METHOD SUFFIX: one admin request per topic, with progress
  local i
  for ((i = 0; i < TOPICS; i++)); do
    curl -sf -X "$1" "$base/admin/v2/persistent/public/default/idle-$i$2" >/dev/null ||
      { echo "$1 idle-$i$2 failed" >&2; exit 1; }
    ((i % 100 == 99)) && echo "  $1 …$2: $((i + 1))/$TOPICS" >&2
  done
  return 0
}
prof=${LAKEGATE_CPUPROFILE:-}
unset LAKEGATE_CPUPROFILE
# Profiles cover the measured window only: from one SIGUSR1 to the next.
export LAKEGATE_CPUPROFILE_ON=SIGUSR1
if [[ $NODES -gt 1 ]]; then
  repo=$ROOT tmp=$dir
  say() { echo "idle-cost: $*" >&2; }
  source "$ROOT/e2e/interop/nodes.sh"
  # One profile per node ("%p": its pid), of the measured window only.
  [[ -n $prof ]] && export LAKEGATE_CPUPROFILE="$prof.%p"
  LAKEGATE_NODES=$NODES start_lakegate "$bin"
  base=$lg_http_url
  node_http=()
  for log in "${lg_logs[@]}"; do
    node_http+=("http://$(attr "$(grep -m1 'lakegate node ready' "$log")" http)")
  done
else
  [[ $RESTART == 1 ]] || export LAKEGATE_CPUPROFILE=$prof
  start
  lg_pids=("$pid")
  node_http=("$base")
fi
echo "creating $TOPICS topics with a subscription each" >&2
each PUT ""
each PUT /subscription/s
if [[ $RESTART == 1 ]]; then
  kill "$pid"; wait "$pid" || true
  export LAKEGATE_CPUPROFILE=$prof
  start
  echo "restarted; loading the topics" >&2
  each GET /stats
fi
echo "settling ${SETTLE}s, then measuring ${WINDOW}s" >&2
sleep "$SETTLE"
[[ $RESTART == 1 ]] && lg_pids=("$pid")
txns() { for h in "${node_http[@]}"; do curl -sf "$h/metrics"; done | awk '/^lakegate_etcd_txns_total/ {s += $2} END {print s + 0}'; }
cpus() { # utime+stime ticks of every node, then of the etcd member (0 for standalone)
  local p
  for p in "${lg_pids[@]}"; do awk '{printf "%d ", $14 + $15}' "/proc/$p/stat"; done
  if [[ -n ${etcd_pid:-} ]]; then awk '{print $14 + $15}' "/proc/$etcd_pid/stat"; else echo 0; fi
}
t0=$(txns)
[[ -n $prof ]] && kill -USR1 "${lg_pids[@]}"
c0=$(cpus); s0=$(date +%s.%N)
sleep "$WINDOW"
c1=$(cpus); s1=$(date +%s.%N)
[[ -n $prof ]] && kill -USR1 "${lg_pids[@]}"
t1=$(txns)
python3 -c "
d = $s1 - $s0
c0, c1 = '$c0'.split(), '$c1'.split()
pct = [100 * (int(b) - int(a)) / $(getconf CLK_TCK) / d for a, b in zip(c0, c1)]
nodes, etcd = pct[:-1], pct[-1]
if len(nodes) == 1:
    print('idle, %d topics + subscriptions: cpu %.1f%% of a core, etcd txns %.2f/s over %.0f s' % ($TOPICS, nodes[0], ($t1 - $t0) / d, d))
else:
    print('idle, %d topics + subscriptions on %d nodes: cpu per node %s %% of a core, etcd member %.1f%%, etcd txns %.2f/s (all nodes) over %.0f s' % (
        $TOPICS, len(nodes), ' / '.join('%.1f' % p for p in nodes), etcd, ($t1 - $t0) / d, d))"
