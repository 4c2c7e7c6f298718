#!/usr/bin/env python3
"""Read every version of a lakegate Delta table with delta-rs and check that
each holds every transaction's rows of all its partitions, or none of them
(docs/transactions.md: a table snapshot is all-or-none).

usage: versions_all_or_none.py TABLE_DIR SPEC_JSON

SPEC_JSON names the transactions: {"<name>": {"<partition>": [from, end]}},
the offsets [from, end) each transaction's records hold in each partition
(one row per record). For every version v, DeltaTable(TABLE_DIR,
version=v) is read (columns __partition and __offset) and each
transaction's rows are counted; a count other than 0 or the transaction's
whole is a violation. The last version must hold every transaction whole.
Prints one JSON line per version. Exits 0 when every check holds, 1 on a
violation, 2 when the table cannot be read.
"""
import json
import os
import sys


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    table_dir, spec = sys.argv[1], json.loads(sys.argv[2])
    try:
        from deltalake import DeltaTable
        import pyarrow.compute as pc

        latest = DeltaTable(table_dir).version()
    except Exception as e:  # noqa: BLE001 - any failure to read is exit 2
        print(json.dumps({"error": f"cannot read the table: {e}"}))
        return 2
    bad = 0
    for v in range(latest + 1):
        try:
            t = DeltaTable(table_dir, version=v).to_pyarrow_table(columns=["__partition", "__offset"])
        except Exception as e:  # noqa: BLE001
            print(json.dumps({"version": v, "error": f"cannot read: {e}"}))
            return 2
        counts = {}
        for name, parts in spec.items():
            n = 0
            for p, (lo, hi) in parts.items():
                m = pc.and_(pc.equal(t["__partition"], int(p)),
                            pc.and_(pc.greater_equal(t["__offset"], lo), pc.less(t["__offset"], hi)))
                n += pc.sum(pc.cast(m, "int64")).as_py() or 0
            whole = sum(hi - lo for lo, hi in parts.values())
            counts[name] = [n, whole]
            if n not in (0, whole) or (v == latest and n != whole):
                bad += 1
        print(json.dumps({"version": v, "rows": t.num_rows, "txn_rows": counts}))
    if bad:
        print(json.dumps({"violations": bad}))
        return 1
    return 0


if __name__ == "__main__":
    code = main()
    # Skip interpreter teardown: delta-rs/pyarrow worker threads can abort
    # the process at exit (as check_table.py notes) after the check is done.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
