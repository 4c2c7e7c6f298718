#!/usr/bin/env bash
# Runs the Spark interop check: prepares pyspark + the Delta jars (setup.sh),
# then the Go test that writes a lakegate Delta table and reads it back with
# Spark 3.5 + delta-spark (full log, and our checkpoint alone).
# Exits non-zero if Spark cannot read the table or a check fails.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
out="$("$here/setup.sh")"
py="$(tail -2 <<<"$out" | sed -n 1p)"
jars="$(tail -1 <<<"$out")"
cd "$repo"
. "$repo/e2e/interop/gotest.sh"
LAKEGATE_SPARK_PYTHON="$py" LAKEGATE_SPARK_JARS="$jars" \
  go_test_pass ./lakehouse/delta/ TestSparkReadsOurTable -- -p 1 -count=1 -timeout 15m
