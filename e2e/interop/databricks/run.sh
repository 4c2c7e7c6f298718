#!/usr/bin/env bash
# The Databricks path as far as it runs here: prepares Spark + delta-spark
# with S3A (setup.sh), then runs the Go test that starts SeaweedFS and a
# lakegate node storing on it, produces to a topic, waits for its Delta
# table, and has Spark read it through s3a://, register it as an external
# table and check its protocol and properties (check_s3.py). Needs the weed
# binary (make tools). Exits non-zero on any difference, or if it skipped.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
out="$("$here/setup.sh")"
py="$(tail -2 <<<"$out" | sed -n 1p)"
jars="$(tail -1 <<<"$out")"
cd "$repo"
. "$repo/e2e/interop/gotest.sh"
LAKEGATE_SPARK_PYTHON="$py" LAKEGATE_SPARK_S3_JARS="$jars" \
  go_test_pass ./e2e/ TestDatabricksPathS3 -- -count=1 -timeout 10m
