#!/usr/bin/env python3
"""Prints columns of a lakegate table as delta-rs or pyiceberg reads them.

usage: nested_rows.py (--delta DIR | --iceberg-db PATH --table IDENT) --columns A,B,...

Loads the Delta table at DIR with deltalake.DeltaTable(DIR).to_pyarrow_table,
or the Iceberg table IDENT (levels joined by '.') through pyiceberg's
SqlCatalog "lakegate" on the sqlite file PATH, and prints one JSON document:

    {"types": {column: arrow type}, "rows": [{column: value}, ...]}

Structs are objects by field name, lists arrays, maps objects by key.
tables/tables_nested_test.go compares them with the values it produced.
Exits non-zero when the table cannot be read.
"""
import argparse
import json
import os
import sys

import pyarrow as pa


def norm(t, v):
    if v is None:
        return None
    if pa.types.is_map(t):
        return {k: norm(t.item_type, x) for k, x in v}
    if pa.types.is_struct(t):
        return {f.name: norm(f.type, v.get(f.name)) for f in t}
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t):
        return [norm(t.value_type, x) for x in v]
    return v


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--delta")
    ap.add_argument("--iceberg-db")
    ap.add_argument("--table")
    ap.add_argument("--columns", required=True)
    a = ap.parse_args()
    cols = a.columns.split(",")
    if a.delta:
        import deltalake

        at = deltalake.DeltaTable(a.delta).to_pyarrow_table(columns=cols)
    else:
        from pyiceberg.catalog.sql import SqlCatalog

        cat = SqlCatalog("lakegate", uri=f"sqlite:///{a.iceberg_db}")
        at = cat.load_table(tuple(a.table.split("."))).scan(selected_fields=tuple(cols)).to_arrow()
    types = {c: at.schema.field(c).type for c in cols}
    rows = [{c: norm(types[c], r[c]) for c in cols} for r in at.select(cols).to_pylist()]
    print(json.dumps({"types": {c: str(t) for c, t in types.items()}, "rows": rows}))
    return 0


if __name__ == "__main__":
    code = main()
    # deltalake 1.6.6's runtime threads sometimes abort the process at
    # interpreter exit ("terminate called without an active exception"),
    # after the output is complete: flush and leave without the teardown,
    # as e2e/interop/delta/check_table.py does.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
