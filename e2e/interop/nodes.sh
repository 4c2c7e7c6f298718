# Sourced by the interop runners: starts lakegate for a scenario run and
# stops it. With LAKEGATE_NODES=1 (the default) one `lakegate standalone`;
# with LAKEGATE_NODES=N>1 a cluster as a user deploys it: one real etcd
# member (the etcd server of go.mod, built from
# internal/testservers/etcdmember) and N `lakegate serve` processes sharing a
# file:// object store — the clients then get every node in their service
# URL, as a client of a cluster is configured.
#
# Usage (after `repo`, `tmp` and `say` are set):
#   start_etcd_member DIR [FLAG…]  one etcd member alone (below); sets etcd_pid, etcd_url
#   start_lakegate BIN [FLAG…]  extra flags go to every node; sets lg_pulsar_url,
#                               lg_http_url (plain listeners, when there are), lg_pulsar_tls_url,
#                               lg_https_url (TLS listeners, when there are), lg_logs (one per node)
#   stop_lakegate               SIGTERM every node (a cluster hands its topics
#                               over first), waits up to 30 s each; returns
#                               non-zero if one had to be killed or failed
#   kill9_node I                SIGKILL node I (the I-th of lg_pids, the I-th host
#                               of lg_pulsar_url) and wait until it is gone
#   restart_node I              start node I again on its data directory and on
#                               the Pulsar and HTTP addresses it had (so the
#                               service URL and the admin URL stay valid; TLS
#                               and other listeners get new ports), its log in a
#                               new file added to lg_logs; waits for its ready
#                               line and /readyz

lg_pids=()
lg_logs=()
etcd_pid=
# What restart_node needs: the binary, the extra flags, and each node's
# plain Pulsar and HTTP addresses (from its first ready line).
lg_bin=
lg_extra=()
lg_paddrs=()
lg_haddrs=()
lg_restarts=0

# wait_ready LOG PID: the node's ready line (up to 60 s); prints it.
wait_ready() {
  local log=$1 pid=$2 ready=
  for _ in $(seq 1 600); do
    ready=$(grep -m1 'lakegate node ready' "$log" || true)
    [[ -n $ready ]] && break
    kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; say "lakegate exited before it was ready"; return 1; }
    sleep 0.1
  done
  [[ -n $ready ]] || { cat "$log" >&2; say "lakegate not ready after 60 s"; return 1; }
  echo "$ready"
}

# attr LINE KEY: the value of key=value in a slog text line ("" if absent).
attr() { grep -oE "(^| )$2=[^ ]+" <<<"$1" | head -1 | sed -E "s/^ ?$2=//" || true; }

# start_etcd_member DIR [FLAG…]: one real etcd member (built from
# internal/testservers/etcdmember) on free loopback ports, its data in
# DIR/etcd and its log in DIR/etcd.log, the flags added; waits until it is
# healthy (up to 30 s). Sets etcd_pid and etcd_url.
start_etcd_member() {
  local dir=$1 ports cport pport
  shift
  (cd "$repo" && go build -o .cache/bin/etcdmember ./internal/testservers/etcdmember)
  ports=$(python3 -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1",0)) for x in s]
print(" ".join(str(x.getsockname()[1]) for x in s))')
  cport=${ports% *} pport=${ports#* }
  "$repo/.cache/bin/etcdmember" --name=m0 --data-dir="$dir/etcd" \
    --listen-client-urls="http://127.0.0.1:$cport" --advertise-client-urls="http://127.0.0.1:$cport" \
    --listen-peer-urls="http://127.0.0.1:$pport" --initial-advertise-peer-urls="http://127.0.0.1:$pport" \
    --initial-cluster="m0=http://127.0.0.1:$pport" --log-level=warn "$@" \
    2>"$dir/etcd.log" &
  etcd_pid=$!
  etcd_url=http://127.0.0.1:$cport
  for _ in $(seq 1 300); do
    curl -fsS "$etcd_url/health" 2>/dev/null | grep -q '"health":"true"' && return 0
    sleep 0.1
  done
  cat "$dir/etcd.log" >&2
  say "etcd not healthy"
  return 1
}

# start_node I PULSAR_ADDR HTTP_ADDR LOG: starts node I (the standalone when
# LAKEGATE_NODES <= 1, else `lakegate serve` with the etcd member's URL) in
# the background; sets lg_pids[I].
start_node() {
  local i=$1 paddr=$2 haddr=$3 log=$4
  if [[ ${LAKEGATE_NODES:-1} -le 1 ]]; then
    "$lg_bin" standalone --data-dir "$tmp/data" --pulsar-addr "$paddr" --http-addr "$haddr" "${lg_extra[@]}" \
      2>"$log" &
  else
    "$lg_bin" serve --data-dir "$tmp/node$i" --objects "file://$tmp/objects" \
      --etcd-endpoints "$etcd_url" --engine-node-id "node$i" \
      --pulsar-addr "$paddr" --http-addr "$haddr" --cluster-session-ttl 2s "${lg_extra[@]}" \
      2>"$log" &
  fi
  lg_pids[$i]=$!
}

start_lakegate() {
  local nodes=${LAKEGATE_NODES:-1} ready urls=() tlsurls=() https=() httpss=() a
  lg_bin=$1
  shift
  lg_extra=("$@")
  lg_pids=() lg_logs=() lg_paddrs=() lg_haddrs=()
  if [[ $nodes -le 1 ]]; then
    start_node 0 127.0.0.1:0 127.0.0.1:0 "$tmp/lakegate.log"
    lg_logs=("$tmp/lakegate.log")
  else
    start_etcd_member "$tmp" --max-txn-ops=1024 --max-request-bytes=8388608 \
      --heartbeat-interval=100 --election-timeout=1000 --unsafe-no-fsync || return 1
    for i in $(seq 0 $((nodes - 1))); do
      start_node "$i" 127.0.0.1:0 127.0.0.1:0 "$tmp/lakegate$i.log"
      lg_logs+=("$tmp/lakegate$i.log")
    done
  fi
  for i in "${!lg_pids[@]}"; do
    ready=$(wait_ready "${lg_logs[$i]}" "${lg_pids[$i]}") || return 1
    lg_paddrs[$i]=$(attr "$ready" pulsar)
    lg_haddrs[$i]=$(attr "$ready" http)
    a=$(attr "$ready" pulsar_url); [[ -n $a ]] && urls+=("${a#pulsar://}")
    a=$(attr "$ready" pulsar_tls_url); [[ -n $a ]] && tlsurls+=("${a#pulsar+ssl://}")
    a=$(attr "$ready" http); [[ -n $a ]] && https+=("http://$a")
    a=$(attr "$ready" https); [[ -n $a ]] && httpss+=("https://$a")
  done
  lg_pulsar_url= lg_pulsar_tls_url= lg_http_url= lg_https_url=
  [[ ${#urls[@]} -gt 0 ]] && lg_pulsar_url="pulsar://$(IFS=,; echo "${urls[*]}")"
  [[ ${#tlsurls[@]} -gt 0 ]] && lg_pulsar_tls_url="pulsar+ssl://$(IFS=,; echo "${tlsurls[*]}")"
  [[ ${#https[@]} -gt 0 ]] && lg_http_url=${https[0]}
  [[ ${#httpss[@]} -gt 0 ]] && lg_https_url=${httpss[0]}
  for h in "${https[@]}"; do
    wait_readyz "$h" || return 1
  done
  say "lakegate: ${#lg_pids[@]} node(s) at ${lg_pulsar_url:-$lg_pulsar_tls_url}, admin ${lg_http_url:-$lg_https_url}, data $tmp"
}

# wait_readyz URL: until URL/readyz answers 2xx (up to 30 s).
wait_readyz() {
  for _ in $(seq 1 300); do
    curl -fsS "$1/readyz" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  curl -fsS "$1/readyz" >/dev/null || { say "$1/readyz not ready"; return 1; }
}

kill9_node() {
  local i=$1 pid=${lg_pids[$1]:-}
  [[ -n $pid ]] || { say "kill9_node: no node $i running"; return 1; }
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  lg_pids[$i]=
  say "node $i (pid $pid) killed with SIGKILL"
}

restart_node() {
  local i=$1 log
  [[ -n ${lg_paddrs[$i]:-} && -n ${lg_haddrs[$i]:-} ]] || { say "restart_node: node $i has no recorded addresses"; return 1; }
  [[ -z ${lg_pids[$i]:-} ]] || { say "restart_node: node $i is running (pid ${lg_pids[$i]})"; return 1; }
  lg_restarts=$((lg_restarts + 1))
  log="$tmp/lakegate$i.restart$lg_restarts.log"
  lg_logs+=("$log")
  start_node "$i" "${lg_paddrs[$i]}" "${lg_haddrs[$i]}" "$log"
  wait_ready "$log" "${lg_pids[$i]}" >/dev/null || return 1
  wait_readyz "http://${lg_haddrs[$i]}" || return 1
  say "node $i restarted (pid ${lg_pids[$i]}) at ${lg_paddrs[$i]}"
}

stop_lakegate() {
  local rc=0 pid
  for pid in "${lg_pids[@]}"; do [[ -z $pid ]] || kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${lg_pids[@]}"; do
    [[ -n $pid ]] || continue # killed by kill9_node and not restarted
    for _ in $(seq 1 300); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      say "lakegate pid $pid did not stop within 30 s of SIGTERM; killing it"
      kill -KILL "$pid" 2>/dev/null || true
      rc=1
    fi
    wait "$pid" 2>/dev/null || rc=$?
  done
  lg_pids=()
  if [[ -n $etcd_pid ]]; then
    kill -KILL "$etcd_pid" 2>/dev/null || true
    wait "$etcd_pid" 2>/dev/null || true
    etcd_pid=
  fi
  return $rc
}
