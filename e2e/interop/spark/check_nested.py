#!/usr/bin/env python3
"""Print nested columns of lakegate Delta tables as Spark 3.5 + delta-spark reads them.

usage: check_nested.py --columns A,B,... TABLE_DIR[@VERSION] [TABLE_DIR[@VERSION] ...]

Starts one local SparkSession (local[2], small driver, UI off) with the Delta
extension and catalog and the Delta jars of LAKEGATE_SPARK_JARS (or --jars;
comma-separated, passed as spark.jars), then reads every table with
spark.read.format("delta").load(TABLE_DIR) — at VERSION (time travel,
option versionAsOf) when one follows '@' — and prints one JSON line:

    {"spark": version, "tables": [{"table": TABLE_DIR[@VERSION],
      "types": {column: Spark type as JSON (DataType.jsonValue())},
      "rows": [{column: value}, ...]}, ...]}

Structs are objects by field name, arrays lists, maps objects by key (the
same shape as e2e/interop/nested_rows.py prints for delta-rs and pyiceberg);
tables/tables_nested_test.go (TestSparkReadsNestedTable) compares them with
the values it produced and checks the types are Spark's struct, array and
map, not strings. Logs go to stderr. Exits 0 when every table was read, 2
when Spark did not start or a table could not be read ("error" holds the
JVM cause chain).
"""
import argparse
import json
import os
import sys
import tempfile


def java_error(e: BaseException) -> str:
    """The message of e with the first line of each JVM cause (Py4J)."""
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


def plain(v):
    """A value collected by Spark as JSON-able Python: Row → dict by field
    name, list → list, dict (map) → dict."""
    from pyspark.sql import Row

    if isinstance(v, Row):
        return {k: plain(x) for k, x in v.asDict(recursive=False).items()}
    if isinstance(v, list):
        return [plain(x) for x in v]
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    return v


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--columns", required=True)
    ap.add_argument("--jars", default=os.environ.get("LAKEGATE_SPARK_JARS", ""))
    ap.add_argument("tables", nargs="+")
    a = ap.parse_args()
    if not a.jars:
        print(json.dumps({"error": "no Delta jars: pass --jars or set LAKEGATE_SPARK_JARS"}))
        return 2
    cols = a.columns.split(",")

    out = {}
    try:
        from pyspark.sql import SparkSession

        tmp = tempfile.mkdtemp(prefix="lakegate-spark-")
        spark = (
            SparkSession.builder.master("local[2]")
            .appName("lakegate-check-nested")
            .config("spark.jars", a.jars)
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
        out["spark"] = spark.version
    except Exception as e:  # noqa: BLE001
        print(json.dumps({**out, "error": "spark did not start: " + java_error(e)}))
        return 2

    out["tables"] = []
    try:
        for spec in a.tables:
            path, at, version = spec.rpartition("@")
            if not (at and version.isdigit()):
                path, version = spec, None
            reader = spark.read.format("delta")
            if version is not None:
                reader = reader.option("versionAsOf", int(version))
            df = reader.load(os.path.abspath(path)).select(*cols)
            types = {f.name: f.dataType.jsonValue() for f in df.schema.fields}
            rows = [{c: plain(r[c]) for c in cols} for r in df.collect()]
            out["tables"].append({"table": spec, "types": types, "rows": rows})
    except Exception as e:  # noqa: BLE001 - any read failure is the finding
        out["error"] = java_error(e)
        print(json.dumps(out))
        return 2
    finally:
        try:
            spark.stop()
        except Exception:  # noqa: BLE001
            pass
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
