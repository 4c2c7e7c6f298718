"""Scan time of a lakegate table, for `lakegate bench tables` (docs/benchmarks.md).

    python tables_scan.py deltars <table dir>
    python tables_scan.py pyiceberg <sqlite catalog file> <namespace.table>

Reads the whole table three times and prints one JSON line:
{"rows": N, "files": F, "seconds": median}. Run with the venvs of
e2e/interop/delta/setup.sh (delta-rs) and e2e/interop/iceberg/setup.sh
(pyiceberg).
"""
import json
import statistics
import sys
import time


def scan_deltars(path):
    from deltalake import DeltaTable
    t = DeltaTable(path)
    tbl = t.to_pyarrow_table()
    return tbl.num_rows, len(t.file_uris())


def scan_pyiceberg(db, ident):
    from pyiceberg.catalog.sql import SqlCatalog
    cat = SqlCatalog("lakegate", uri=f"sqlite:///{db}")
    t = cat.load_table(tuple(ident.split(".")))
    scan = t.scan()
    files = len(list(scan.plan_files()))
    return scan.to_arrow().num_rows, files


def main():
    kind = sys.argv[1]
    times, rows, files = [], 0, 0
    for _ in range(3):
        t0 = time.perf_counter()
        if kind == "deltars":
            rows, files = scan_deltars(sys.argv[2])
        elif kind == "pyiceberg":
            rows, files = scan_pyiceberg(sys.argv[2], sys.argv[3])
        else:
            raise SystemExit(f"unknown reader {kind}")
        times.append(time.perf_counter() - t0)
    print(json.dumps({"rows": rows, "files": files, "seconds": statistics.median(times)}))


if __name__ == "__main__":
    main()
