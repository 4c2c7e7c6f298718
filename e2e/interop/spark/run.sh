#!/usr/bin/env bash
# Runs the Spark interop checks: prepares pyspark + the Delta jars (setup.sh),
# then the Go tests that write lakegate Delta tables and read them back with
# Spark 3.5 + delta-spark: TestSparkReadsOurTable (full log, JSON commits
# alone, our checkpoint alone) and TestSparkReadsNestedTable (compacted
# nested columns as structs, arrays and maps, before and after evolution and
# bin-packing). Exits non-zero if Spark cannot read a table, a check fails,
# or a test skipped or did not run (go_test_pass).
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
LAKEGATE_SPARK_PYTHON="$py" LAKEGATE_SPARK_JARS="$jars" \
  go_test_pass ./tables/ TestSparkReadsNestedTable -- -p 1 -count=1 -timeout 15m
