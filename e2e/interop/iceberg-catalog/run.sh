#!/usr/bin/env bash
# pyiceberg and iceberg-go against lakegate's own Iceberg REST catalog on a
# three-node cluster (one etcd, three `lakegate serve`): resolves
# pyiceberg's venv (e2e/interop/iceberg/setup.sh) and runs the Go test
# that starts the cluster, produces to a partitioned topic, waits for its
# tables, and has pyiceberg read the topic table through every node's REST
# endpoint and two pyiceberg processes (through two nodes) append to one
# user table at once, then iceberg-go (two REST clients, two nodes) do the
# same. Then Spark 3.5 with iceberg-spark-runtime (setup-spark.sh: the
# pinned pyspark venv and runtime jar) reads the topic table through every
# node and appends to a user table through two nodes, which pyiceberg counts
# (TestClusterIcebergCatalogSpark). Exits non-zero on any difference, or if
# a test skipped.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
py="$("$repo/e2e/interop/iceberg/setup.sh" | tail -1)"
spark="$("$here/setup-spark.sh")"
spark_py="$(tail -2 <<<"$spark" | sed -n 1p)"
spark_jar="$(tail -1 <<<"$spark")"
cd "$repo"
. "$repo/e2e/interop/gotest.sh"
LAKEGATE_PYICEBERG="$py" LAKEGATE_SPARK_PYTHON="$spark_py" LAKEGATE_ICEBERG_SPARK_JAR="$spark_jar" \
  go_test_pass ./e2e/ TestClusterIcebergCatalogInterop TestClusterIcebergCatalogSpark -- -p 1 -count=1 -timeout 20m
