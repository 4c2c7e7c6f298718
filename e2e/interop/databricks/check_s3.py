#!/usr/bin/env python3
"""The Databricks path, as far as it goes here: a lakegate Delta table on S3
read by Spark 3.5 + delta-spark through s3a://, registered as an external
table, with the protocol and properties a Databricks reader sees checked.

usage: check_s3.py --jars J1,J2,... --endpoint http://127.0.0.1:PORT
                   --location s3a://BUCKET/PREFIX/tables/t/ns/topic --rows N

Starts a local SparkSession (local[2], UI off) with the Delta extension and
catalog, S3A pointed at the endpoint (path-style, no TLS, static keys), then:
  1. spark.read.format("delta").load(location): rows;
  2. CREATE TABLE orders USING DELTA LOCATION '<location>' (the external
     table a Unity Catalog / Hive metastore user registers), SELECT through
     it, a filtered count (data skipping on our stats);
  3. DESCRIBE DETAIL and SHOW TBLPROPERTIES: protocol, table features,
     partition columns, properties.
Prints one JSON line; logs go to stderr. Exits 2 when Spark fails.
"""
import argparse
import json
import sys
import tempfile


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jars", required=True)
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--location", required=True)
    ap.add_argument("--rows", type=int, required=True)
    a = ap.parse_args()
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("lakegate-databricks-path")
             .config("spark.ui.enabled", "false")
             .config("spark.driver.memory", "1g")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.jars", a.jars)
             .config("spark.local.dir", tempfile.mkdtemp(prefix="spark-"))
             .config("spark.sql.warehouse.dir", tempfile.mkdtemp(prefix="warehouse-"))
             .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
             .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
             .config("spark.hadoop.fs.s3a.impl", "org.apache.hadoop.fs.s3a.S3AFileSystem")
             .config("spark.hadoop.fs.s3a.endpoint", a.endpoint)
             .config("spark.hadoop.fs.s3a.path.style.access", "true")
             .config("spark.hadoop.fs.s3a.connection.ssl.enabled", "false")
             .config("spark.hadoop.fs.s3a.aws.credentials.provider", "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider")
             .config("spark.hadoop.fs.s3a.access.key", "lakegate")
             .config("spark.hadoop.fs.s3a.secret.key", "lakegate")
             .config("spark.hadoop.fs.s3a.endpoint.region", "us-east-1")
             .getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    out = {}
    try:
        df = spark.read.format("delta").load(a.location)
        out["rows_by_path"] = df.count()
        spark.sql(f"CREATE TABLE orders USING DELTA LOCATION '{a.location}'")
        out["rows_by_table"] = spark.sql("SELECT count(*) FROM orders").collect()[0][0]
        out["distinct_offsets"] = spark.sql("SELECT count(DISTINCT __partition, __offset) FROM orders").collect()[0][0]
        out["rows_partition_0"] = spark.sql("SELECT count(*) FROM orders WHERE __partition = 0").collect()[0][0]
        d = spark.sql("DESCRIBE DETAIL orders").collect()[0].asDict()
        out["detail"] = {
            "format": d.get("format"),
            "minReaderVersion": d.get("minReaderVersion"),
            "minWriterVersion": d.get("minWriterVersion"),
            "tableFeatures": sorted(d.get("tableFeatures") or []),
            "partitionColumns": list(d.get("partitionColumns") or []),
            "numFiles": d.get("numFiles"),
            "properties": d.get("properties") or {},
        }
        out["tblproperties"] = {r[0]: r[1] for r in spark.sql("SHOW TBLPROPERTIES orders").collect()}
        out["history_ops"] = sorted({r[0] for r in spark.sql("DESCRIBE HISTORY orders").select("operation").collect()})
        out["spark"] = spark.version
    except Exception as e:  # noqa: BLE001
        out["error"] = f"{type(e).__name__}: {e}"[:4000]
        print(json.dumps(out, default=str))
        sys.exit(2)
    finally:
        spark.stop()
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    main()
