#!/usr/bin/env python3
"""bench/kafka/summary.py — the Kafka part of bench/compare.sh's summary.

Reads results.tsv (one line per run, as bench/compare.sh writes it) and
prints Markdown for the Kafka loads (kmax1, kmax8, kmax100, kfixed20k,
ke2e10k) on the Kafka targets (lakegate-kafka, kafka, kafka-fsync): medians
per (load, server) over the runs whose status is ok, the ratios
lakegate-kafka ÷ kafka and lakegate-kafka ÷ kafka-fsync, and every run.
A (load, server) whose runs all failed shows "failed"; one with some failed
runs says how many; a median marked † has a run with more than
NOISY_PCT % of a core of other CPU (the machine's CPU less the server's and
the client's over the run: a build or a test running beside it).

Usage: bench/kafka/summary.py RESULTS.TSV [COMMAND]
Standard library only (the Pulsar summary is bench/tools/plot).
"""
import csv
import math
import statistics
import sys

TARGETS = ["lakegate-kafka", "kafka", "kafka-fsync"]
NOISY_PCT = 25
LOADS = ["kmax1", "kmax8", "kmax100", "kfixed20k", "ke2e10k"]

# (label, load, column, higher is better)
METRICS = [
    ("max-rate produce, 1 partition: msg/s", "kmax1", "msgps", True),
    ("max-rate produce, 8 partitions: msg/s", "kmax8", "msgps", True),
    ("max-rate produce, 100 partitions: msg/s", "kmax100", "msgps", True),
    ("max-rate produce, 1 partition: server CPU, % of a core", "kmax1", "cpu_pct", False),
    ("max-rate produce, 1 partition: client (producer-perf) CPU, % of a core", "kmax1", "client_cpu_pct", False),
    ("fixed 20 k msg/s: msg/s reached", "kfixed20k", "msgps", True),
    ("fixed 20 k msg/s: publish p50 ms", "kfixed20k", "p50", False),
    ("fixed 20 k msg/s: publish p99 ms", "kfixed20k", "p99", False),
    ("fixed 20 k msg/s: publish p99.9 ms", "kfixed20k", "p999", False),
    ("fixed 20 k msg/s: server CPU, % of a core", "kfixed20k", "cpu_pct", False),
    ("produce + consume 10 k msg/s: publish p99 ms", "ke2e10k", "p99", False),
    ("produce + consume 10 k msg/s: end-to-end p50 ms", "ke2e10k", "e2e_p50", False),
    ("produce + consume 10 k msg/s: end-to-end p99 ms", "ke2e10k", "e2e_p99", False),
    ("produce + consume 10 k msg/s: end-to-end p99.9 ms", "ke2e10k", "e2e_p999", False),
    ("produce + consume 10 k msg/s: end-to-end max ms", "ke2e10k", "e2e_max", False),
    ("produce + consume 10 k msg/s: server CPU, % of a core", "ke2e10k", "cpu_pct", False),
    ("server peak RSS at max rate, 1 partition: MiB", "kmax1", "rss_mib", False),
    ("server peak RSS at max rate, 100 partitions: MiB", "kmax100", "rss_mib", False),
    ("server peak RSS at fixed 20 k msg/s: MiB", "kfixed20k", "rss_mib", False),
]

RUN_COLS = [
    ("load", "load"), ("server", "target"), ("rep", "rep"), ("msg/s", "msgps"),
    ("p50", "p50"), ("p95", "p95"), ("p99", "p99"), ("p99.9", "p999"), ("max", "max"),
    ("e2e p50", "e2e_p50"), ("e2e p99", "e2e_p99"), ("e2e p99.9", "e2e_p999"), ("e2e max", "e2e_max"),
    ("CPU %", "cpu_pct"), ("RSS MiB", "rss_mib"), ("client CPU %", "client_cpu_pct"),
    ("other CPU %", "other_cpu_pct"), ("status", "status"),
]


def num(v):
    if v is None or math.isnan(v):
        return "–"
    if v >= 10000:
        return f"{v / 1000:.1f} k"
    if v >= 100:
        return f"{v:.0f}"
    return f"{v:.1f}"


def runs_of(runs, load, target):
    return [r for r in runs if r["load"] == load and r["target"] == target]


def noisy(r):
    try:
        return float(r.get("other_cpu_pct", "")) > NOISY_PCT
    except ValueError:
        return False


def median(runs, load, target, col):
    """(median over the ok runs or None, runs, failed runs, any ok run noisy)"""
    rs = runs_of(runs, load, target)
    ok = [r for r in rs if r.get("status", "ok") == "ok"]
    vals = []
    for r in ok:
        try:
            vals.append(float(r[col]))
        except (KeyError, ValueError):
            pass
    return (statistics.median(vals) if vals else None), len(rs), len(rs) - len(ok), any(noisy(r) for r in ok)


def ratio(a, b, higher_better):
    if a is None or b is None or a <= 0 or b <= 0:
        return "–"
    r = a / b
    rs = f"{r:.2f}×" if r >= 0.1 else f"{r:.3f}×" if r >= 0.001 else f"{r:.1e}×"
    if higher_better:
        return rs
    if r <= 1:
        return f"{rs} ({1 / r:.1f}× less)"
    return f"{rs} (more)"


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    with open(sys.argv[1], newline="") as f:
        runs = list(csv.DictReader(f, delimiter="\t"))
    command = sys.argv[2] if len(sys.argv) > 2 else "make bench-compare"
    runs = [r for r in runs if r["load"] in LOADS and r["target"] in TARGETS]
    ts = [t for t in TARGETS if any(r["target"] == t for r in runs)]
    out = [f"Command: `{command.strip()}` — medians over the runs of each (load, server) whose "
           "status is ok; every run on a fresh server. Kafka's default flush settings (`kafka`) never "
           "fsync on the produce path; `kafka-fsync` fsyncs every append "
           "(log.flush.interval.messages=1); lakegate fsyncs its WAL before every acknowledgement.", ""]
    head = "| load (median) |" + "".join(f" {t} |" for t in ts)
    ratios = [b for b in ("kafka", "kafka-fsync") if b in ts and "lakegate-kafka" in ts]
    head += "".join(f" lakegate-kafka ÷ {b} |" for b in ratios)
    out += [head, "|---|" + "---:|" * (len(ts) + len(ratios))]
    for label, load, col, hb in METRICS:
        if not any(r["load"] == load for r in runs):
            continue
        row = f"| {label} |"
        meds = {}
        for t in ts:
            m, n, failed, loud = median(runs, load, t, col)
            meds[t] = m
            mark = " †" if loud else ""
            if n == 0:
                cell = "–"
            elif failed == n:
                cell = "failed"
            elif failed:
                cell = f"{num(m)}{mark} ({failed} of {n} failed)"
            else:
                cell = num(m) + mark
            row += f" {cell} |"
        for b in ratios:
            row += f" {ratio(meds.get('lakegate-kafka'), meds.get(b), hb)} |"
        out.append(row)
    if any(noisy(r) for r in runs):
        out += ["", f"†: at least one of its runs had more than {NOISY_PCT} % of a core of other CPU (the machine's "
                "user and system time less the server's and the client's: other work on the machine during the run)."]
    out += ["", "Every Kafka run (throughput msg/s and latency ms after the warm-up; server CPU % of one core "
            "after the warm-up; client and other CPU % of one core and peak RSS MiB over the whole run):", ""]
    out.append("|" + "".join(f" {h} |" for h, _ in RUN_COLS))
    out.append("|---|---|" + "---:|" * (len(RUN_COLS) - 3) + "---|")
    for r in runs:
        out.append("|" + "".join(f" {r.get(c, '') or '–'} |" for _, c in RUN_COLS))
    print("\n".join(out))


if __name__ == "__main__":
    main()
