"""pyiceberg against lakegate's own Iceberg REST catalog (a three-node cluster).

  check_catalog.py read --uri URI --table t.ns.topic
      loads a topic table through RestCatalog, prints
      "rows=N payloads_sha256=<hex of the sorted payloads>"
  check_catalog.py append --uri URI --table ns.tbl --writer W --count N
      appends N one-row snapshots (writer=W, seq=0..N-1) to a user table,
      creating namespace and table if needed, retrying lost commit races;
      prints "appended=N retries=R"
  check_catalog.py count --uri URI --table ns.tbl
      prints "rows=N distinct=D snapshots=S"
"""
import argparse
import hashlib
import sys
import time

import pyarrow as pa
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import (CommitFailedException, NamespaceAlreadyExistsError,
                                  TableAlreadyExistsError)
from pyiceberg.schema import Schema
from pyiceberg.types import IntegerType, LongType, NestedField


def catalog(uri, credential):
    props = {"uri": uri}
    if credential:
        props["credential"] = credential
    return RestCatalog("lakegate", **props)


def ident(s):
    return tuple(s.split("."))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["read", "append", "count"])
    ap.add_argument("--uri", required=True)
    ap.add_argument("--table", required=True)
    ap.add_argument("--credential", default="")
    ap.add_argument("--writer", type=int, default=0)
    ap.add_argument("--count", type=int, default=0)
    a = ap.parse_args()
    cat = catalog(a.uri, a.credential)
    if a.cmd == "read":
        t = cat.load_table(ident(a.table))
        tbl = t.scan().to_arrow()
        pays = sorted(bytes(p) for p in tbl.column("__payload").to_pylist())
        h = hashlib.sha256()
        for p in pays:
            h.update(p)
        print(f"rows={tbl.num_rows} payloads_sha256={h.hexdigest()}")
        return
    if a.cmd == "append":
        ns = ident(a.table)[:-1]
        try:
            cat.create_namespace(ns)
        except NamespaceAlreadyExistsError:
            pass
        schema = Schema(NestedField(1, "writer", IntegerType(), required=True),
                        NestedField(2, "seq", LongType(), required=True))
        try:
            cat.create_table(ident(a.table), schema=schema)
        except TableAlreadyExistsError:
            pass
        arrow_schema = pa.schema([pa.field("writer", pa.int32(), nullable=False),
                                  pa.field("seq", pa.int64(), nullable=False)])
        retries = 0
        for i in range(a.count):
            for attempt in range(100):
                t = cat.load_table(ident(a.table))
                try:
                    t.append(pa.Table.from_pylist([{"writer": a.writer, "seq": i}], schema=arrow_schema))
                    break
                except CommitFailedException:
                    retries += 1
                    time.sleep(0.01 * (attempt + 1))
            else:
                sys.exit(f"writer {a.writer} seq {i}: too many commit conflicts")
        print(f"appended={a.count} retries={retries}")
        return
    t = cat.load_table(ident(a.table))
    tbl = t.scan().to_arrow()
    pairs = set(zip(tbl.column("writer").to_pylist(), tbl.column("seq").to_pylist()))
    print(f"rows={tbl.num_rows} distinct={len(pairs)} snapshots={len(t.metadata.snapshots)}")


if __name__ == "__main__":
    main()
