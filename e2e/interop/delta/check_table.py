#!/usr/bin/env python3
"""Read a Delta table written by lakegate with delta-rs and check it.

usage: check_table.py TABLE_DIR EXPECTED_ROWS [EXPECTED_VERSION]
                      [--unique COL] [--nulls COL=N] [--columns A,B,...]

Loads the table with deltalake.DeltaTable(TABLE_DIR).to_pyarrow_table() and
checks the row count (and the table version when given). Options add checks:
--unique COL   no duplicate values in COL (no row committed twice);
--nulls COL=N  COL holds exactly N nulls (rows written before a schema change);
--columns      these columns exist (in this order, as a prefix is not needed).
Prints one JSON line describing what was read. Exits 0 when every check
holds, 1 on a mismatch, 2 when the table cannot be read.
"""
import argparse
import json
import os
import sys


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("table_dir")
    ap.add_argument("expected_rows", type=int)
    ap.add_argument("expected_version", type=int, nargs="?")
    ap.add_argument("--unique")
    ap.add_argument("--nulls", action="append", default=[])
    ap.add_argument("--columns")
    a = ap.parse_args()

    try:
        import deltalake
        import pyarrow.compute as pc

        dt = deltalake.DeltaTable(a.table_dir)
        tbl = dt.to_pyarrow_table()
        version = dt.version()
        files = dt.file_uris()
        protocol = dt.protocol()
    except Exception as e:  # noqa: BLE001 - any read failure is the finding
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
        return 2

    info = {
        "deltalake": deltalake.__version__,
        "version": version,
        "rows": tbl.num_rows,
        "files": len(files),
        "columns": tbl.column_names,
        "protocol": [protocol.min_reader_version, protocol.min_writer_version],
    }
    problems = []
    if tbl.num_rows != a.expected_rows:
        problems.append(f"rows {tbl.num_rows} != expected {a.expected_rows}")
    if a.expected_version is not None and version != a.expected_version:
        problems.append(f"version {version} != expected {a.expected_version}")
    if a.columns:
        for c in a.columns.split(","):
            if c not in tbl.column_names:
                problems.append(f"column {c} missing")
    if a.unique:
        distinct = len(pc.unique(tbl.column(a.unique)))
        info["distinct_" + a.unique] = distinct
        if distinct != tbl.num_rows:
            problems.append(f"{a.unique}: {distinct} distinct values in {tbl.num_rows} rows")
    for spec in a.nulls:
        col, _, n = spec.partition("=")
        got = tbl.column(col).null_count if col in tbl.column_names else None
        info["nulls_" + col] = got
        if got != int(n):
            problems.append(f"{col}: {got} nulls != expected {n}")
    info["problems"] = problems
    print(json.dumps(info))
    return 1 if problems else 0


if __name__ == "__main__":
    code = main()
    # Skip interpreter teardown: with some tables delta-rs/pyarrow worker
    # threads abort the process at exit ("terminate called without an
    # active exception") after the check has already finished.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
