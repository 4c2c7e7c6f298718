#!/usr/bin/env bash
# Prepares Spark with Iceberg for check_spark.py: the pinned pyspark venv of
# e2e/interop/spark/setup.sh (.cache/venv-spark) and the Iceberg Spark
# runtime jar (org.apache.iceberg:iceberg-spark-runtime-3.5_2.12,
# ICEBERG_VERSION) copied from Maven Central into .cache/jars with
# maven-dependency-plugin, so Spark gets it as spark.jars (no ivy download
# at run time). Idempotent. Prints two lines last: the venv's python, the jar.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
jars="${LAKEGATE_SPARK_JARS_DIR:-$repo/.cache/jars}"
ICEBERG_VERSION=1.10.0
DEP_PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.8.1

py="$("$repo/e2e/interop/spark/setup.sh" | tail -2 | sed -n 1p)"
mkdir -p "$jars"
jar="$jars/iceberg-spark-runtime-3.5_2.12-$ICEBERG_VERSION.jar"
if [[ ! -s "$jar" ]]; then
  mvn -q -B -Dstyle.color=never "$DEP_PLUGIN:copy" \
    -Dartifact="org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:$ICEBERG_VERSION:jar" \
    -DoutputDirectory="$jars" -Dmdep.overWriteReleases=true >&2
fi
[[ -s "$jar" ]] || { echo "setup-spark.sh: $jar missing after mvn" >&2; exit 1; }
echo "$py"
echo "$jar"
