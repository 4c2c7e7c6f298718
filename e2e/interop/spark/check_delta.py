#!/usr/bin/env python3
"""Read a Delta table written by lakegate with Spark 3.5 + delta-spark and check it.

usage: check_delta.py TABLE_DIR EXPECTED_ROWS [--version V] [--columns A,B,...]
                      [--unique COL] [--nulls COL=N] [--where 'SQL EXPR=N' ...]
                      [++ TABLE_DIR EXPECTED_ROWS [...] ...]

Starts a local SparkSession (local[2], small driver, UI off) with the Delta
extension and catalog and the Delta jars given by --jars or LAKEGATE_SPARK_JARS
(comma-separated, passed as spark.jars: no ivy download at run time), then
spark.read.format("delta").load(TABLE_DIR): row count, schema, and the newest
version from DESCRIBE HISTORY. Checks:
--version V     the table's version is V;
--columns       these columns exist;
--unique COL    no duplicate values in COL (no row committed twice);
--nulls COL=N   COL holds exactly N nulls (rows written before a schema change);
--where E=N     a filter E (Spark SQL) selects exactly N rows. Filters on data
                columns go through Delta's data skipping, i.e. through the
                min/max stats in our add actions (or checkpoint): a stat that
                is not a true bound drops rows and shows up here. The JSON
                line's files_read tells how many data files each filter read.
Several tables separated by "++" are checked in one Spark session (a
session takes 10-15 s to start), each with its own checks. Prints one JSON
line per table describing what was read, in order (logs go to stderr).
Exits 0 when every check holds, 1 on a mismatch, 2 when a table cannot be
read (the highest over the tables).
"""
import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import argv_groups  # noqa: E402 - e2e/interop/argv_groups.py


def java_error(e: BaseException) -> str:
    """The message of e, with the JVM cause chain (first line of each) when
    it comes from Py4J, so a Delta error is readable in one JSON line."""
    msg = f"{type(e).__name__}: {e}".strip()
    jexc = getattr(e, "java_exception", None)
    if jexc is not None:
        causes = []
        try:
            c = jexc
            while c is not None and len(causes) < 8:
                causes.append(f"{c.getClass().getName()}: {c.getMessage()}")
                c = c.getCause()
        except Exception:  # noqa: BLE001
            pass
        if causes:
            msg = " <- ".join(causes)
    return msg[:6000]


def files_read(q):
    """Data files the (already executed) scan of q read: Spark's numFiles
    metric, which shows Delta's data skipping at work (None if not found)."""
    try:
        plan = q._jdf.queryExecution().executedPlan()
        if plan.nodeName() == "AdaptiveSparkPlan":
            plan = plan.executedPlan()
        leaves = plan.collectLeaves()
        total = None
        for i in range(leaves.size()):
            m = leaves.apply(i).metrics().get("numFiles")
            if m.isDefined():
                total = (total or 0) + m.get().value()
        return total
    except Exception:  # noqa: BLE001 - informational only
        return None


def parse(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("table_dir")
    ap.add_argument("expected_rows", type=int)
    ap.add_argument("--version", type=int)
    ap.add_argument("--columns")
    ap.add_argument("--unique")
    ap.add_argument("--nulls", action="append", default=[])
    ap.add_argument("--where", action="append", default=[])
    ap.add_argument("--jars", default=os.environ.get("LAKEGATE_SPARK_JARS", ""))
    return ap.parse_args(argv)


def main() -> int:
    groups = argv_groups.split(sys.argv[1:])
    checks = [parse(g) for g in groups]
    jars = next((a.jars for a in checks if a.jars), "")
    if not jars:
        for _ in checks:
            print(json.dumps({"error": "no Delta jars: pass --jars or set LAKEGATE_SPARK_JARS"}))
        return 2

    info = {}
    t0 = time.monotonic()
    try:
        import pyspark
        from pyspark.sql import SparkSession

        info["pyspark"] = pyspark.__version__
        tmp = tempfile.mkdtemp(prefix="lakegate-spark-")
        spark = (
            SparkSession.builder.master("local[2]")
            .appName("lakegate-check-delta")
            .config("spark.jars", jars)
            .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
            .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
            .config("spark.driver.memory", "768m")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.sql.warehouse.dir", os.path.join(tmp, "warehouse"))
            .config("spark.local.dir", tmp)
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("WARN")
        info["spark"] = spark.version
        info["startup_s"] = round(time.monotonic() - t0, 1)
    except Exception as e:  # noqa: BLE001
        for _ in checks:
            print(json.dumps({**info, "error": "spark did not start: " + java_error(e)}))
        return 2

    code = 0
    try:
        for a in checks:
            code = max(code, check(spark, a, dict(info)))
    finally:
        try:
            spark.stop()
        except Exception:  # noqa: BLE001
            pass
    return code


def check(spark, a, info) -> int:
    """Reads the table of a with spark and checks it; prints its JSON line."""
    t1 = time.monotonic()
    path = os.path.abspath(a.table_dir)
    try:
        df = spark.read.format("delta").load(path)
        columns = df.columns
        rows = df.count()
        hist = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").select("version", "operation").collect()
        version = max(r["version"] for r in hist)
        detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0]
        info.update(
            version=version,
            history=[[r["version"], r["operation"]] for r in sorted(hist, key=lambda r: r["version"])],
            rows=rows,
            files=detail["numFiles"],
            columns=columns,
            schema=df.schema.simpleString(),
            partition_columns=list(detail["partitionColumns"]),
            protocol=[detail["minReaderVersion"], detail["minWriterVersion"]],
        )
        try:
            jlog = spark._jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)
            snap = jlog.update(False, spark._jvm.scala.Option.empty(), spark._jvm.scala.Option.empty())
            info["checkpoint_version"] = snap.checkpointProvider().version()
        except Exception as e:  # noqa: BLE001 - informational only
            info["checkpoint_version"] = "unknown: " + java_error(e)[:200]
        problems = []
        if rows != a.expected_rows:
            problems.append(f"rows {rows} != expected {a.expected_rows}")
        if a.version is not None and version != a.version:
            problems.append(f"version {version} != expected {a.version}")
        if a.columns:
            for c in a.columns.split(","):
                if c not in columns:
                    problems.append(f"column {c} missing")
        if a.unique:
            distinct = df.select(a.unique).distinct().count()
            info["distinct_" + a.unique] = distinct
            if distinct != rows:
                problems.append(f"{a.unique}: {distinct} distinct values in {rows} rows")
        for spec in a.nulls:
            col, _, n = spec.partition("=")
            got = df.where(df[col].isNull()).count() if col in columns else None
            info["nulls_" + col] = got
            if got != int(n):
                problems.append(f"{col}: {got} nulls != expected {n}")
        for spec in a.where:
            expr, _, n = spec.rpartition("=")
            q = df.where(expr)
            got = len(q.collect())
            info.setdefault("where", {})[expr] = got
            info.setdefault("files_read", {})[expr] = files_read(q)
            if got != int(n):
                problems.append(f"where {expr}: {got} rows != expected {n}")
    except Exception as e:  # noqa: BLE001 - any read failure is the finding
        info["error"] = java_error(e)
        info["read_s"] = round(time.monotonic() - t1, 1)
        print(json.dumps(info))
        return 2
    info["read_s"] = round(time.monotonic() - t1, 1)
    info["problems"] = problems
    print(json.dumps(info))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
