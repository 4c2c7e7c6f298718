#!/usr/bin/env bash
# Prepares the Spark + Delta reader used by check_delta.py and check_nested.py:
#  - <repo>/.cache/venv-spark: a venv with the pinned pyspark (requirements.txt);
#    kept apart from .cache/venv (delta-rs) so neither setup disturbs the other;
#  - <repo>/.cache/jars: io.delta:delta-spark_2.12 and io.delta:delta-storage
#    (DELTA_VERSION) copied from Maven Central with maven-dependency-plugin, so
#    Spark gets them as spark.jars (no ivy --packages at run time).
# Idempotent: a venv whose recorded requirements hash matches, and jars that are
# already there, are left as they are. Prints two lines last:
#   <venv python>
#   <comma-separated jar paths>
# so callers can do:
#   out=$(e2e/interop/spark/setup.sh); LAKEGATE_SPARK_PYTHON=$(sed -n 1p <<<"$out") ...
# (run.sh does exactly this).
set -euo pipefail
# shellcheck source=../venv.sh
source "$(dirname "${BASH_SOURCE[0]}")/../venv.sh"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
venv="${LAKEGATE_SPARK_VENV:-$repo/.cache/venv-spark}"
jars="${LAKEGATE_SPARK_JARS_DIR:-$repo/.cache/jars}"
req="$here/requirements.txt"
DELTA_VERSION=3.3.2
DEP_PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.8.1

pinned_venv "$venv" "$req" spark 'import pyspark'

mkdir -p "$jars"
paths=()
for a in delta-spark_2.12 delta-storage; do
  jar="$jars/$a-$DELTA_VERSION.jar"
  if [[ ! -s "$jar" ]]; then
    mvn -q -B -Dstyle.color=never "$DEP_PLUGIN:copy" -Dartifact="io.delta:$a:$DELTA_VERSION:jar" \
      -DoutputDirectory="$jars" -Dmdep.overWriteReleases=true >&2
  fi
  [[ -s "$jar" ]] || { echo "setup.sh: $jar missing after mvn" >&2; exit 1; }
  paths+=("$jar")
done

echo "$venv/bin/python"
(IFS=,; echo "${paths[*]}")
