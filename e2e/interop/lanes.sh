#!/usr/bin/env bash
# `make interop`: every interop suite, in two lanes that run at once.
#
# The suites wait on JVMs, Python and servers much of the time, so two at a
# time use the machine's cores that one leaves idle. First every suite's
# setup runs, one after the other (they download pinned packages into
# .cache/: Maven's local repository is not safe for two writers), then:
#
#   lane 1  the table readers: delta-rs, Spark + delta-spark, pyiceberg, the
#           Iceberg REST catalog, Spark + Iceberg, Databricks-style S3A,
#           the 100 000-message tables scenario; the Kafka clients (Java
#           kafka-clients, Kafka's CLI tools, confluent-kafka) against one
#           node; then the Java scenario matrix against three nodes (it
#           balances the lanes)
#   lane 2  the clients: Python and Java scenario matrices against one node,
#           Python against three, Pulsar's pulsar-admin and pulsar-client
#           (then their operator's runbook steps against three nodes),
#           the secured node, OAuth2 against a test OpenID issuer,
#           Apache Pulsar's proxy in front of three secured nodes, the
#           Kafka clients against three nodes
#
# The lanes share no setup and no fixed port. Within a lane the suites run
# in order and the lane stops at its first failure, as make would. Each
# suite's output goes to .cache/interop-logs/<n>-<suite>.log and is printed
# whole when the suite ends, followed by "make: <suite> took N s" (the line
# CI's time budget is read from). INTEROP_LANES=1 runs the suites one after
# the other instead. Exits non-zero if any suite failed, naming them.
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"

lane1=(
  "./e2e/interop/delta/run.sh"
  "./e2e/interop/spark/run.sh"
  "./e2e/interop/iceberg/run.sh"
  "./e2e/interop/iceberg-rest/run.sh"
  "./e2e/interop/iceberg-catalog/run.sh"
  "./e2e/interop/databricks/run.sh"
  "./e2e/interop/tables/run.sh"
  "./e2e/interop/kafka/run.sh"
  "LAKEGATE_NODES=3 ./e2e/interop/java/run.sh"
)
lane2=(
  "./e2e/interop/python/run.sh"
  "./e2e/interop/java/run.sh"
  "LAKEGATE_NODES=3 ./e2e/interop/python/run.sh"
  "./e2e/interop/tools/run.sh"
  "LAKEGATE_NODES=3 STEPS='^runbook' ./e2e/interop/tools/run.sh"
  "./e2e/interop/secure/run.sh"
  "./e2e/interop/proxy/run.sh"
  "./e2e/interop/oauth/run.sh"
  "LAKEGATE_NODES=3 ./e2e/interop/kafka/run.sh"
)
setups=(
  e2e/interop/delta/setup.sh e2e/interop/spark/setup.sh e2e/interop/iceberg/setup.sh
  e2e/interop/iceberg-rest/setup.sh e2e/interop/iceberg-catalog/setup-spark.sh
  e2e/interop/databricks/setup.sh e2e/interop/python/setup.sh e2e/interop/java/setup.sh
  e2e/interop/tools/setup.sh e2e/interop/proxy/setup.sh e2e/interop/kafka/setup.sh
)

logs=.cache/interop-logs
rm -rf "$logs"
mkdir -p "$logs"
lock="$logs/.print"
: >"$lock"
failed="$logs/.failed"
: >"$failed"

s=$SECONDS
for setup in "${setups[@]}"; do
  echo "interop setup: $setup"
  if ! "./$setup" >/dev/null; then
    echo "interop setup: $setup failed" >&2
    exit 1
  fi
done
echo "make: interop setup took $((SECONDS - s)) s"

# run_lane N SUITE...: the suites in order, each printed whole when it ends.
run_lane() {
  local n=$1 i=0 suite log st rc
  shift
  for suite in "$@"; do
    i=$((i + 1))
    log="$logs/$n.$i-$(sed -E 's#LAKEGATE_NODES=([0-9]+) #nodes\1-#; s#\./e2e/interop/##; s#/run\.sh##; s#[^A-Za-z0-9.-]#_#g' <<<"$suite").log"
    st=$SECONDS
    bash -c "$suite" >"$log" 2>&1
    rc=$?
    {
      echo "$suite"
      cat "$log"
      echo "make: $suite took $((SECONDS - st)) s"
      [[ $rc == 0 ]] || echo "make: $suite FAILED (exit $rc)"
    } | flock "$lock" cat
    if [[ $rc != 0 ]]; then
      echo "$suite" >>"$failed" # one short appended line: atomic
      return 1
    fi
  done
}

if [[ ${INTEROP_LANES:-2} == 1 ]]; then
  run_lane 1 "${lane1[@]}" "${lane2[@]}"
else
  run_lane 1 "${lane1[@]}" &
  p1=$!
  run_lane 2 "${lane2[@]}" &
  p2=$!
  wait "$p1"
  wait "$p2"
fi

if [[ -s $failed ]]; then
  echo "interop: failed:" >&2
  sed 's/^/  /' "$failed" >&2
  exit 1
fi
echo "interop: every suite passed"
