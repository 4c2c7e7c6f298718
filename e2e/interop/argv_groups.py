"""Splits a command line into groups separated by "++".

The interop readers (spark/check_delta.py, tables/read_table.py) take
several tables in one run, one group of arguments each, so that one Spark
session (10-15 s to start) serves them all: "A --x 1 ++ B --x 2" is
[["A", "--x", "1"], ["B", "--x", "2"]].
"""


def split(argv):
    groups, cur = [], []
    for arg in argv:
        if arg == "++":
            groups.append(cur)
            cur = []
        else:
            cur.append(arg)
    groups.append(cur)
    return groups
