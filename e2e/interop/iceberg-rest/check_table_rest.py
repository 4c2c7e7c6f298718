"""Reads a lakegate Iceberg table through an Iceberg REST catalog with
pyiceberg and prints what it holds.

Loads the table with pyiceberg's RestCatalog (the server run.sh starts),
scans it with pyarrow and prints one line:

    rows=<N> payload_sha256=<hex of sha256 over __payload in __offset order>

Exits non-zero when an __offset appears twice (within the partition given).
Runs in e2e/interop/iceberg's venv (pyiceberg's REST client needs nothing
more). Usage: check_table_rest.py --uri URL --table tenant.ns.topic [--partition P]
"""

import argparse
import hashlib
import sys

import pyarrow.compute as pc
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.expressions import EqualTo


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--uri", required=True, help="the REST catalog's base URL")
    ap.add_argument("--table", required=True, help="identifier, levels joined by '.'")
    ap.add_argument("--partition", type=int)
    args = ap.parse_args()

    cat = RestCatalog("lakegate", uri=args.uri)
    tbl = cat.load_table(tuple(args.table.split(".")))
    scan = tbl.scan(row_filter=EqualTo("__partition", args.partition)) if args.partition is not None else tbl.scan()
    at = scan.to_arrow()
    if at.num_rows and pc.count_distinct(at["__offset"]).as_py() != at.num_rows:
        print(f"duplicate __offset values in {at.num_rows} rows", file=sys.stderr)
        return 1
    at = at.sort_by("__offset")
    h = hashlib.sha256()
    for b in at["__payload"].to_pylist():
        h.update(b)
    fields = {f.name: f.field_id for f in tbl.schema().fields}
    print(f"location={tbl.location()} metadata={tbl.metadata_location}"
          f" field ids: __offset={fields['__offset']} __entry_payload={fields['__entry_payload']}"
          f" snapshots={len(tbl.snapshots())}", file=sys.stderr)
    print(f"rows={at.num_rows} payload_sha256={h.hexdigest()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
