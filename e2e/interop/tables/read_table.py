#!/usr/bin/env python3
"""Read a lakegate topic table with another engine and summarize it.

usage: read_table.py READER TABLE [--typed COL,COL,...] [options]
                     [++ TABLE [--typed COL,COL,...] [options] ...]

READER is one of
  deltars    delta-rs (the deltalake package): TABLE is the table directory
  spark      Spark 3.5 + delta-spark, spark.read.format("delta"): TABLE is the
             table directory; the Delta jars come from --jars or
             LAKEGATE_SPARK_JARS (comma-separated)
  pyiceberg  pyiceberg's SqlCatalog: TABLE is the identifier (a.b.c), with
             --catalog-uri (sqlite:///…) and --warehouse (file:///…)

Tables separated by "++" are read by one process (for spark: one session,
which takes 10-15 s to start), each with its own options.

Prints one JSON line per table, in order: {"reader", "rows", "digest",
"partitions": {p: rows},
"typed": {col: {"non_null", "sum"}}}. digest is the sum modulo 2^64 of the
first 8 bytes (big-endian) of SHA-256 of every row's __payload: equal digests
and row counts mean the same multiset of payloads. Exits 2 when a table
cannot be read.
"""
import argparse
import hashlib
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import argv_groups  # noqa: E402 - e2e/interop/argv_groups.py

MASK = (1 << 64) - 1


def digest_of(payloads):
    d = 0
    n = 0
    for p in payloads:
        d = (d + int.from_bytes(hashlib.sha256(p).digest()[:8], "big")) & MASK
        n += 1
    return d, n


def summarize_arrow(tbl, typed):
    """Summary of a pyarrow Table."""
    import pyarrow.compute as pc
    payloads = tbl.column("__payload").to_pylist()
    d, n = digest_of(payloads)
    parts = {}
    for p in tbl.column("__partition").to_pylist():
        parts[str(p)] = parts.get(str(p), 0) + 1
    out = {"rows": n, "digest": format(d, "016x"), "partitions": parts, "typed": {}}
    for c in typed:
        col = tbl.column(c)
        s = pc.sum(col).as_py() if col.type != "string" else None
        out["typed"][c] = {"non_null": len(col) - col.null_count, "sum": s}
    return out


def read_deltars(table, typed):
    from deltalake import DeltaTable
    dt = DeltaTable(table)
    return summarize_arrow(dt.to_pyarrow_table(), typed)


def read_pyiceberg(ident, typed, catalog_uri, warehouse):
    from pyiceberg.catalog.sql import SqlCatalog
    cat = SqlCatalog("lakegate", uri=catalog_uri, warehouse=warehouse)
    t = cat.load_table(ident)
    return summarize_arrow(t.scan().to_arrow(), typed)


def start_spark(jars):
    from pyspark.sql import SparkSession
    tmp = tempfile.mkdtemp(prefix="lakegate-spark-")
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("lakegate-tables")
        .config("spark.jars", jars)
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.databricks.delta.snapshotPartitions", "2")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.local.dir", tmp)
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def read_spark(spark, table, typed):
    from pyspark.sql import functions as F
    df = spark.read.format("delta").load(table)
    d, n = digest_of(bytes(r[0]) for r in df.select("__payload").toLocalIterator())
    parts = {str(r[0]): r[1] for r in df.groupBy("__partition").count().collect()}
    out = {"rows": n, "digest": format(d, "016x"), "partitions": parts, "typed": {}}
    for c in typed:
        dtype = dict(df.dtypes)[c]
        agg = [F.count(F.col(c))]
        if dtype != "string":
            agg.append(F.sum(F.col(c)))
        r = df.agg(*agg).collect()[0]
        out["typed"][c] = {"non_null": r[0], "sum": r[1] if dtype != "string" else None}
    return out


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in ("deltars", "spark", "pyiceberg"):
        print("usage: read_table.py deltars|spark|pyiceberg TABLE [options] [++ TABLE [options] ...]", file=sys.stderr)
        return 2
    reader = sys.argv[1]
    ap = argparse.ArgumentParser()
    ap.add_argument("table")
    ap.add_argument("--typed", default="")
    ap.add_argument("--jars", default=os.environ.get("LAKEGATE_SPARK_JARS", ""))
    ap.add_argument("--catalog-uri", default="")
    ap.add_argument("--warehouse", default="")
    groups = argv_groups.split(sys.argv[2:])
    reads = [ap.parse_args(g) for g in groups]
    spark = None
    code = 0
    try:
        for a in reads:
            typed = [c for c in a.typed.split(",") if c]
            try:
                if reader == "deltars":
                    out = read_deltars(a.table, typed)
                elif reader == "spark":
                    if spark is None:
                        spark = start_spark(a.jars)
                    out = read_spark(spark, a.table, typed)
                else:
                    out = read_pyiceberg(a.table, typed, a.catalog_uri, a.warehouse)
            except Exception as e:  # noqa: BLE001 — reported as one JSON line
                print(json.dumps({"reader": reader, "error": f"{type(e).__name__}: {e}"[:4000]}))
                code = 2
                continue
            out["reader"] = reader
            print(json.dumps(out, sort_keys=True))
    finally:
        if spark is not None:
            spark.stop()
    return code


if __name__ == "__main__":
    rc = main()
    # Leave without the interpreter's teardown: pyarrow 26 with deltalake
    # 1.6.6 sometimes aborts there ("terminate called without an active
    # exception", seen on this machine under load) after the table was read,
    # and an abort would also lose the buffered summary line.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)
