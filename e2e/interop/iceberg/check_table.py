"""Reads a lakegate Iceberg table with pyiceberg and prints what it holds.

Loads the table through pyiceberg's SqlCatalog on lakegate's sqlite catalog
file (catalog name "lakegate", docs/iceberg.md), scans it with pyarrow and
prints one line:

    rows=<N> payload_sha256=<hex of sha256 over __payload in __offset order>

Exits non-zero when an __offset appears twice (within the partition given).
Usage: check_table.py --catalog-db PATH --table tenant.ns.topic [--partition P]
"""

import argparse
import hashlib
import sys

import pyarrow.compute as pc
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import EqualTo


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--catalog-db", required=True)
    ap.add_argument("--catalog-name", default="lakegate")
    ap.add_argument("--table", required=True, help="identifier, levels joined by '.'")
    ap.add_argument("--partition", type=int)
    args = ap.parse_args()

    cat = SqlCatalog(args.catalog_name, uri=f"sqlite:///{args.catalog_db}")
    tbl = cat.load_table(tuple(args.table.split(".")))
    flt = EqualTo("__partition", args.partition) if args.partition is not None else None
    scan = tbl.scan(row_filter=flt) if flt is not None else tbl.scan()
    at = scan.to_arrow()
    if at.num_rows and pc.count_distinct(at["__offset"]).as_py() != at.num_rows:
        print(f"duplicate __offset values in {at.num_rows} rows", file=sys.stderr)
        return 1
    at = at.sort_by("__offset")
    h = hashlib.sha256()
    for b in at["__payload"].to_pylist():
        h.update(b)
    fields = {f.name: f.field_id for f in tbl.schema().fields}
    print(f"schema field ids: __offset={fields['__offset']} __entry_payload={fields['__entry_payload']}"
          f" spec={tbl.spec()} snapshots={len(tbl.snapshots())}", file=sys.stderr)
    print(f"rows={at.num_rows} payload_sha256={h.hexdigest()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
