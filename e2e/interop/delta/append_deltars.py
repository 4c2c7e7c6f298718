#!/usr/bin/env python3
"""Append rows to a lakegate Delta table with delta-rs, then checkpoint it.

usage: append_deltars.py TABLE_DIR FIRST_ID ROWS PART

Writes ROWS rows (id FIRST_ID.., name, ts, part=PART, extra) with
deltalake.write_deltalake(mode="append") and then DeltaTable.create_checkpoint(),
so lakegate's reader is tested on a commit and a checkpoint written by
delta-rs. Prints one JSON line: the new version and protocol.
"""
import datetime as dt
import json
import sys

import deltalake
import pyarrow as pa


def main() -> int:
    table_dir, first, rows, part = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    base = dt.datetime(2026, 11, 30, 1, 0, 0, tzinfo=dt.timezone.utc)
    ids = list(range(first, first + rows))
    tbl = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "name": pa.array([f"name-{i}" for i in ids], pa.string()),
            "ts": pa.array([base + dt.timedelta(milliseconds=i) for i in ids], pa.timestamp("us", tz="UTC")),
            "part": pa.array([part] * rows, pa.string()),
            "extra": pa.array([f"x{i}" for i in ids], pa.string()),
        }
    )
    deltalake.write_deltalake(table_dir, tbl, mode="append")
    t = deltalake.DeltaTable(table_dir)
    t.create_checkpoint()
    p = t.protocol()
    print(json.dumps({"version": t.version(), "protocol": [p.min_reader_version, p.min_writer_version]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
