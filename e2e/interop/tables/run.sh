#!/usr/bin/env bash
# Issue #4's scenario end to end: a real lakegate binary takes 100 000 Pulsar
# messages (4 partitions) plus a JSON- and an AVRO-schema topic, compacts them
# by age into Parquet committed to Delta and Iceberg, and Spark + delta-spark,
# delta-rs and pyiceberg each read every table (e2e TestTablesInterop).
# The readers come from the other interop setups (pinned, under .cache/).
# LAKEGATE_TABLES_MESSAGES overrides the message count (default 100000).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
delta_py="$("$repo/e2e/interop/delta/setup.sh" | tail -1)"
spark_out="$("$repo/e2e/interop/spark/setup.sh")"
spark_py="$(tail -2 <<<"$spark_out" | sed -n 1p)"
spark_jars="$(tail -1 <<<"$spark_out")"
iceberg_py="$("$repo/e2e/interop/iceberg/setup.sh" | tail -1)"
cd "$repo"
. "$repo/e2e/interop/gotest.sh"
LAKEGATE_TABLES_INTEROP=1 LAKEGATE_TABLES_SCRIPT="$here/read_table.py" \
LAKEGATE_PYTHON="$delta_py" LAKEGATE_SPARK_PYTHON="$spark_py" LAKEGATE_SPARK_JARS="$spark_jars" \
LAKEGATE_ICEBERG_PYTHON="$iceberg_py" \
  go_test_pass ./e2e/ TestTablesInterop -- -p 1 -count=1 -timeout 20m
