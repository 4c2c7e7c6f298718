#!/usr/bin/env bash
# bench/remote.sh — `make bench-remote`: lakegate on S3 (SeaweedFS `weed
# mini`, pinned and built by tools/build-weed.sh) behind the fault proxy
# (bench/faultproxy: internal/faultproxy adding a fixed latency to every
# PUT, and less to GETs), with lakegate's remote-store defaults (linger
# 250 ms, 4 MiB objects). See docs/benchmarks.md, "Remote store".
#
#   1. the engine driver: `lakegate bench engine --objects s3://…` on
#      1, 100 and 1000 logs (embedded etcd, closed-loop producers);
#   2. `lakegate standalone --objects s3://…` under pulsar-perf: a fixed-rate
#      produce with a consumer (publish and end-to-end latency).
#
# Environment:
#   REMOTE_PUT_LATENCY   latency added to every PUT (default 30ms)
#   REMOTE_GET_LATENCY   latency added to GET/HEAD/DELETE/POST (default 10ms)
#   REMOTE_LOGS          log counts of the engine driver (default 1,100,1000)
#   REMOTE_PRODUCERS     its closed-loop producers (default 1024)
#   REMOTE_RATE          pulsar-perf produce rate (default 10000)
#   REMOTE_DURATION      seconds of each measured run (default 15)
#   LAKEGATE_M2          Maven repository (default .cache/m2)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
PUTLAT=${REMOTE_PUT_LATENCY:-30ms}
GETLAT=${REMOTE_GET_LATENCY:-10ms}
LOGS=${REMOTE_LOGS:-1,100,1000}
PRODUCERS=${REMOTE_PRODUCERS:-1024}
RATE=${REMOTE_RATE:-10000}
DURATION=${REMOTE_DURATION:-15}
M2=${LAKEGATE_M2:-$ROOT/.cache/m2}

say() { echo "bench-remote [$(date -u +%H:%M:%S)]: $*" >&2; }
die() { say "FAIL: $*"; exit 1; }
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

# --- tools -----------------------------------------------------------------------
./tools/build-weed.sh >&2
WEED=${LAKEGATE_WEED:-$ROOT/.cache/bin/weed}
mkdir -p .cache/bin
go build -o .cache/bin/lakegate ./cmd/lakegate
go build -o .cache/bin/faultproxy ./bench/faultproxy
if [[ ! -s .cache/pulsar-perf-java/classpath.txt ]]; then
  say "resolving pulsar-perf (bench/java) with Maven"
  mkdir -p "$M2" .cache/pulsar-perf-java
  mvn -q -B -Dstyle.color=never -s bench/pulsar/settings.xml -Dmaven.repo.local="$M2" -f bench/java/pom.xml compile >&2
fi
PERF_CP=.cache/pulsar-perf-java/target/classes:$(cat .cache/pulsar-perf-java/classpath.txt)

TMP=$(mktemp -d "${TMPDIR:-/tmp}/lakegate-remote.XXXXXX")
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  sleep 1
  for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  if [[ ${KEEP:-0} == 1 ]]; then say "kept $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT

# --- SeaweedFS (every port explicit, as internal/testservers does) -----------------
args=()
for f in master.port master.port.grpc volume.port volume.port.grpc filer.port filer.port.grpc s3.port s3.port.grpc admin.port admin.port.grpc; do
  p=$(freeport)
  args+=("-$f=$p")
  [[ $f == s3.port ]] && S3PORT=$p
done
mkdir -p "$TMP/weed/data" "$TMP/weed/log"
"$WEED" -logdir="$TMP/weed/log" mini -dir="$TMP/weed/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 -webdav=false \
  -admin.ui=false -s3.port.iceberg=0 -s3.port.lance=0 -admin.port.legacy=0 -master.telemetry=false "${args[@]}" \
  >"$TMP/weed.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 600); do grep -q 'S3.*ready' "$TMP/weed.log" && break; sleep 0.1; done
grep -q 'S3.*ready' "$TMP/weed.log" || { tail -20 "$TMP/weed.log" >&2; die "weed not ready"; }
for _ in $(seq 1 300); do curl -fsS -X PUT "http://127.0.0.1:$S3PORT/lakegate-bench" >/dev/null 2>&1 && break; sleep 0.1; done
say "SeaweedFS S3 on :$S3PORT"

# --- the fault proxy --------------------------------------------------------------
.cache/bin/faultproxy -upstream "http://127.0.0.1:$S3PORT" -put-latency "$PUTLAT" -get-latency "$GETLAT" >"$TMP/proxy.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 100); do grep -q faultproxy_url= "$TMP/proxy.log" && break; sleep 0.1; done
PROXY=$(sed -n 's/^faultproxy_url=//p' "$TMP/proxy.log")
[[ -n $PROXY ]] || die "fault proxy did not start"
s3url() { echo "s3://lakegate-bench?endpoint=$PROXY&use_path_style=true&region=us-east-1&anonymous=true&prefix=$1/"; }
say "fault proxy $PROXY: PUT +$PUTLAT, other requests +$GETLAT"

# --- 1. the engine driver ------------------------------------------------------------
say "engine driver: logs $LOGS, $PRODUCERS producers, remote defaults"
.cache/bin/lakegate bench engine --objects "$(s3url engine)" --logs "$LOGS" --producers "$PRODUCERS" \
  --duration "${DURATION}s" --warmup 3s --verify --data-dir "$TMP/engine"

# --- 2. a standalone node on S3 under pulsar-perf --------------------------------------
.cache/bin/lakegate standalone --data-dir "$TMP/node" --objects "$(s3url node)" \
  --pulsar-addr 127.0.0.1:0 --http-addr 127.0.0.1:0 2>"$TMP/node.log" &
NODE=$!
PIDS+=("$NODE")
for _ in $(seq 1 600); do grep -q 'pulsar_url=' "$TMP/node.log" && break; sleep 0.1; done
ready=$(grep -m1 'pulsar_url=' "$TMP/node.log") || die "lakegate not ready"
URL=$(sed -E 's/.*pulsar_url=([^ ]+).*/\1/' <<<"$ready")
HTTP=http://$(sed -E 's/.* http=([^ ]+).*/\1/' <<<"$ready")
printf 'brokerServiceUrl=%s\nwebServiceUrl=%s\n' "$URL" "$HTTP" >"$TMP/client.conf"
topic=persistent://public/default/remote
curl -fsS -X PUT "$HTTP/admin/v2/persistent/public/default/remote" >/dev/null
say "pulsar-perf: consume + produce at $RATE msg/s for ${DURATION}s on $URL"
java -cp "$PERF_CP" lakegate.bench.PerfLauncher "$TMP/client.conf" consume -s sub -time $((DURATION + 8)) "$topic" >"$TMP/consume.log" 2>&1 &
CPID=$!
for _ in $(seq 1 300); do grep -q 'Start receiving\|Created.*consumer' "$TMP/consume.log" && break; sleep 0.1; done
java -cp "$PERF_CP" lakegate.bench.PerfLauncher "$TMP/client.conf" produce -r "$RATE" -s 1024 -o 10000 -time "$DURATION" "$topic" >"$TMP/produce.log" 2>&1 || true
wait "$CPID" || true
echo
echo "pulsar-perf against lakegate standalone on S3 (PUT +$PUTLAT, GET +$GETLAT), $RATE msg/s, 1 KiB, -o 10000:"
grep -m1 'Aggregated throughput stats' "$TMP/produce.log" || true
echo "publish: $(grep -m1 'Aggregated latency stats' "$TMP/produce.log" | sed 's/.*Aggregated latency stats --- //')"
echo "end-to-end: $(grep -m1 'Aggregated latency stats' "$TMP/consume.log" | sed 's/.*Aggregated latency stats --- //')"
kill -TERM "$NODE"
wait "$NODE" || true
