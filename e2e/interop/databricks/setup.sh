#!/usr/bin/env bash
# Prepares Spark + delta-spark with S3A (the Databricks stand-in on S3) for
# check_s3.py: the pinned pyspark venv and Delta jars of ../spark/setup.sh,
# plus org.apache.hadoop:hadoop-aws (HADOOP_VERSION, the Hadoop pyspark
# 3.5.3 ships) and the com.amazonaws:aws-java-sdk-bundle it was built
# against, copied from Maven Central into .cache/jars with
# maven-dependency-plugin. Idempotent. Prints two lines last:
#   <venv python>
#   <comma-separated jar paths>
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
jars="${LAKEGATE_SPARK_JARS_DIR:-$repo/.cache/jars}"
HADOOP_VERSION=3.3.4
AWS_SDK_VERSION=1.12.262 # hadoop-aws 3.3.4's dependency
DEP_PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.8.1

out="$("$repo/e2e/interop/spark/setup.sh")"
py="$(tail -2 <<<"$out" | sed -n 1p)"
paths="$(tail -1 <<<"$out")"
mkdir -p "$jars"
for a in org.apache.hadoop:hadoop-aws:$HADOOP_VERSION com.amazonaws:aws-java-sdk-bundle:$AWS_SDK_VERSION; do
  IFS=: read -r g n v <<<"$a"
  jar="$jars/$n-$v.jar"
  if [[ ! -s "$jar" ]]; then
    mvn -q -B -Dstyle.color=never "$DEP_PLUGIN:copy" -Dartifact="$g:$n:$v:jar" \
      -DoutputDirectory="$jars" -Dmdep.overWriteReleases=true >&2
  fi
  [[ -s "$jar" ]] || { echo "setup.sh: $jar missing after mvn" >&2; exit 1; }
  paths+=",$jar"
done
echo "$py"
echo "$paths"
