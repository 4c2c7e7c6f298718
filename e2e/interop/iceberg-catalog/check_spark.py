#!/usr/bin/env python3
"""Spark 3.5 + iceberg-spark-runtime against lakegate's Iceberg REST catalog.

usage: check_spark.py --jar JAR --uris URI[,URI...] [--credential ID:SECRET]
                      --topic tenant.ns.topic --user-table ns.table --per N

Starts one local SparkSession (local[2], UI off) with the Iceberg runtime jar
as spark.jars and one REST catalog per URI (lg0, lg1, …: each a different
lakegate node's /iceberg, OAuth2 client credentials), then:
  1. reads the topic's table through every catalog: rows and the SHA-256 of
     the sorted __payload values;
  2. creates the user table through lg0 and appends N rows through the first
     and N through the last catalog (two nodes), each INSERT one snapshot;
  3. counts the user table through lg1: rows, distinct (writer, seq), snapshots.
Prints one JSON line; logs go to stderr. Exits 2 when Spark fails.
"""
import argparse
import hashlib
import json
import os
import sys
import tempfile


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jar", required=True)
    ap.add_argument("--uris", required=True)
    ap.add_argument("--credential", default="")
    ap.add_argument("--topic", required=True)
    ap.add_argument("--user-table", required=True)
    ap.add_argument("--per", type=int, default=5)
    a = ap.parse_args()
    from pyspark.sql import SparkSession

    uris = a.uris.split(",")
    b = (SparkSession.builder.master("local[2]").appName("lakegate-iceberg-rest")
         .config("spark.ui.enabled", "false")
         .config("spark.driver.memory", "1g")
         .config("spark.sql.shuffle.partitions", "2")
         .config("spark.jars", a.jar)
         .config("spark.local.dir", tempfile.mkdtemp(prefix="spark-"))
         .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"))
    for i, uri in enumerate(uris):
        c = f"spark.sql.catalog.lg{i}"
        b = b.config(c, "org.apache.iceberg.spark.SparkCatalog").config(c + ".type", "rest").config(c + ".uri", uri)
        if a.credential:
            b = b.config(c + ".credential", a.credential)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    out = {"reads": []}
    try:
        topic = ".".join(f"`{p}`" for p in a.topic.split("."))
        for i in range(len(uris)):
            rows = spark.sql(f"SELECT __payload FROM lg{i}.{topic}").collect()
            h = hashlib.sha256()
            for p in sorted(bytes(r[0]) for r in rows):
                h.update(p)
            out["reads"].append({"catalog": f"lg{i}", "rows": len(rows), "payloads_sha256": h.hexdigest()})
        ns, tbl = a.user_table.rsplit(".", 1)
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS lg0.{ns}")
        spark.sql(f"CREATE TABLE IF NOT EXISTS lg0.{ns}.{tbl} (writer INT, seq BIGINT) USING iceberg")
        last = len(uris) - 1
        for w, cat in ((0, "lg0"), (1, f"lg{last}")):
            for s in range(a.per):
                spark.sql(f"INSERT INTO {cat}.{ns}.{tbl} VALUES ({w}, {s})")
        reader = "lg1" if len(uris) > 1 else "lg0"
        spark.sql(f"REFRESH TABLE {reader}.{ns}.{tbl}")
        r = spark.sql(f"SELECT count(*), count(DISTINCT writer, seq) FROM {reader}.{ns}.{tbl}").collect()[0]
        snaps = spark.sql(f"SELECT count(*) FROM {reader}.{ns}.{tbl}.snapshots").collect()[0][0]
        out["user"] = {"rows": r[0], "distinct": r[1], "snapshots": snaps}
        out["spark"] = spark.version
    except Exception as e:  # noqa: BLE001
        out["error"] = f"{type(e).__name__}: {e}"[:4000]
        print(json.dumps(out))
        sys.exit(2)
    finally:
        spark.stop()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
