"""Kafka interop scenarios for Confluent's Python client (confluent-kafka, librdkafka).

Parametrised only by a bootstrap address and a topic-name prefix, so the same
scenarios check Apache Kafka and lakegate's Kafka listener.

Environment:
  KAFKA_BOOTSTRAP     host:port[,host:port...] (required)
  KAFKA_TOPIC_PREFIX  topic and group name prefix (default pk-RANDOM-)
  SCENARIOS=a,b       run only these (names, or name prefixes: "compression")
  SCENARIO_TIMEOUT    seconds per scenario's waits (default 60)
  KAFKA_CLIENT_DEBUG=1  librdkafka's debug=protocol log (to stderr)

Prints `PASS name (T s)` or `FAIL name: reason` per scenario and
`python-kafka: N/M scenarios passed`; exits 1 if one failed, 2 on a usage error.
Run it with the venv of setup.sh:  "$py" e2e/interop/kafka/scenarios.py
"""
import os
import secrets
import sys
import time
import traceback

from confluent_kafka import (OFFSET_BEGINNING, TIMESTAMP_CREATE_TIME, Consumer, KafkaException,
                             Producer, TopicPartition)
from confluent_kafka.admin import AdminClient, NewTopic

BOOTSTRAP = os.environ.get("KAFKA_BOOTSTRAP", "")
PREFIX = os.environ.get("KAFKA_TOPIC_PREFIX") or f"pk-{secrets.token_hex(3)}-"
TIMEOUT = float(os.environ.get("SCENARIO_TIMEOUT", "60"))


class Failure(Exception):
    pass


def check(ok, msg):
    if not ok:
        raise Failure(msg)


def conf(**kw):
    c = {"bootstrap.servers": BOOTSTRAP, "client.id": "pk-interop", "socket.timeout.ms": 20000}
    if os.environ.get("KAFKA_CLIENT_DEBUG") == "1":
        c["debug"] = "protocol"  # every request's API key and version, to stderr
    c.update(kw)
    return c


def admin():
    return AdminClient(conf())


def create_topic(a, name, partitions):
    for _, f in a.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)],
                                operation_timeout=30, request_timeout=30).items():
        f.result(timeout=TIMEOUT)


def wait_topic_metadata(name, partitions):
    """Until the cluster's metadata lists the topic with all its partitions."""
    a = admin()
    deadline = time.monotonic() + TIMEOUT
    while True:
        md = a.list_topics(topic=name, timeout=10)
        t = md.topics.get(name)
        if t is not None and t.error is None and len(t.partitions) == partitions:
            return
        check(time.monotonic() < deadline, f"topic {name} not in metadata with {partitions} partitions")
        time.sleep(0.1)


def produce(name, records, **extra):
    """records: list of dicts (key, value, headers, timestamp, partition?).
    Returns [(partition, offset)] in the order of records."""
    p = Producer(conf(**{"acks": "all", "enable.idempotence": True, "linger.ms": 5, **extra}))
    where = [None] * len(records)
    errors = []

    def done(i):
        def cb(err, msg):
            if err is not None:
                errors.append(f"record {i}: {err}")
            else:
                where[i] = (msg.partition(), msg.offset())
        return cb

    for i, r in enumerate(records):
        kw = {k: r[k] for k in ("key", "value", "headers", "timestamp", "partition") if k in r}
        while True:
            try:
                p.produce(name, on_delivery=done(i), **kw)
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
    left = p.flush(TIMEOUT)
    check(left == 0, f"{left} records not delivered within {TIMEOUT:.0f} s")
    check(not errors, f"{len(errors)} delivery errors, first: {errors[:1]}")
    return where


def read_exactly(consumer, want, quiet=0.5):
    """Polls until `want` messages (then `quiet` s more: no extra may come) or the bound."""
    got = []
    deadline = time.monotonic() + TIMEOUT
    quiet_until = None
    while time.monotonic() < (quiet_until or deadline):
        m = consumer.poll(0.2)
        if m is None:
            continue
        check(m.error() is None, f"consumer error: {m.error()}")
        got.append(m)
        if len(got) >= want and quiet_until is None:
            quiet_until = time.monotonic() + quiet
    return got


def records_for(codec, n=300):
    base = int(time.time() * 1000) - 3_600_000
    out = []
    for i in range(n):
        out.append({
            "key": f"key-{i}".encode(),
            "value": None if i == 13 else f"value-{i}-{codec}-".encode() + b"lakegate " * (i % 40),
            # "bin" is not valid UTF-8; "dup" twice keeps its order.
            "headers": [("idx", str(i).encode()), ("bin", bytes([0xFF, 0xFE, 0x00, i & 0xFF])),
                        ("dup", b"a"), ("dup", b"b")],
            "timestamp": base + i,
        })
    return out


def produce_consume(codec="none"):
    name = f"{PREFIX}records-{codec}"
    create_topic(admin(), name, 3)
    wait_topic_metadata(name, 3)
    recs = records_for(codec)
    where = produce(name, recs, **{"compression.type": codec})
    index = {w: i for i, w in enumerate(where)}
    check(len(index) == len(recs), "two records acknowledged at the same offset")
    check(len({p for p, _ in where}) > 1, "all keyed records went to one partition of 3")

    # No group: assign every partition from the beginning.
    c = Consumer(conf(**{"group.id": f"{PREFIX}unused", "enable.auto.commit": False,
                         "enable.auto.offset.store": False}))
    try:
        c.assign([TopicPartition(name, p, OFFSET_BEGINNING) for p in range(3)])
        got = read_exactly(c, len(recs))
    finally:
        c.close()
    check(len(got) == len(recs), f"read {len(got)} records, want exactly {len(recs)}")
    last = {}
    for m in got:
        pos = (m.partition(), m.offset())
        check(pos in index, f"unexpected record at {pos}")
        i = index[pos]
        r = recs[i]
        check(pos > (m.partition(), last.get(m.partition(), -1)), f"partition {m.partition()} out of order at {pos}")
        last[m.partition()] = m.offset()
        check(m.key() == r["key"], f"record {i}: key {m.key()!r}, want {r['key']!r}")
        check(m.value() == r["value"], f"record {i}: value {m.value()!r:.60}, want {r['value']!r:.60}")
        check(m.timestamp() == (TIMESTAMP_CREATE_TIME, r["timestamp"]),
              f"record {i}: timestamp {m.timestamp()}, want CreateTime {r['timestamp']}")
        check(m.headers() == r["headers"], f"record {i}: headers {m.headers()}, want {r['headers']}")


def group_resume():
    """A member reads and commits half, leaves; a new member resumes exactly after it."""
    name = f"{PREFIX}group"
    group = f"{PREFIX}group-g"
    create_topic(admin(), name, 2)
    wait_topic_metadata(name, 2)
    first = [{"key": f"first-{i}".encode(), "value": f"first-{i}".encode()} for i in range(200)]
    produce(name, first)
    member = conf(**{"group.id": group, "enable.auto.commit": False, "auto.offset.reset": "earliest",
                     "group.protocol": "classic", "partition.assignment.strategy": "cooperative-sticky",
                     "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000})
    c = Consumer(member)
    try:
        c.subscribe([name])
        got = read_exactly(c, len(first))
        check(len(got) == len(first), f"first member read {len(got)} records, want exactly {len(first)}")
        c.commit(asynchronous=False)
        committed = c.committed([TopicPartition(name, p) for p in range(2)], timeout=TIMEOUT)
        ends = {}
        for m in got:
            ends[m.partition()] = max(ends.get(m.partition(), 0), m.offset() + 1)
        for tp in committed:
            check(tp.offset == ends.get(tp.partition, 0) or (tp.offset < 0 and tp.partition not in ends),
                  f"committed {tp.partition}: {tp.offset}, want {ends.get(tp.partition, 0)}")
    finally:
        c.close()
    seen = {(m.partition(), m.offset()) for m in got}

    second = [{"key": f"second-{i}".encode(), "value": f"second-{i}".encode()} for i in range(100)]
    produce(name, second)
    c = Consumer(member)
    try:
        c.subscribe([name])
        got2 = read_exactly(c, len(second), quiet=1.0)
    finally:
        c.close()
    dups = [(m.partition(), m.offset()) for m in got2 if (m.partition(), m.offset()) in seen]
    check(not dups, f"the resumed member read {len(dups)} committed records again, first {dups[:1]}")
    values = sorted(m.value() for m in got2)
    check(values == sorted(r["value"] for r in second),
          f"the resumed member read {len(got2)} records, want exactly the {len(second)} new ones")


def admin_topics():
    a = admin()
    names = [f"{PREFIX}admin-{i}" for i in range(2)]
    fs = a.create_topics([NewTopic(n, num_partitions=2 + i, replication_factor=1) for i, n in enumerate(names)],
                         operation_timeout=30, request_timeout=30)
    for f in fs.values():
        f.result(timeout=TIMEOUT)
    # Creating one again is refused with TOPIC_ALREADY_EXISTS.
    try:
        a.create_topics([NewTopic(names[0], num_partitions=2, replication_factor=1)],
                        request_timeout=30)[names[0]].result(timeout=TIMEOUT)
        raise Failure(f"creating {names[0]} twice succeeded")
    except KafkaException as e:
        check(e.args[0].name() == "TOPIC_ALREADY_EXISTS", f"creating a topic twice: {e}, want TOPIC_ALREADY_EXISTS")
    for i, n in enumerate(names):
        wait_topic_metadata(n, 2 + i)
    md = a.list_topics(timeout=10)
    for i, n in enumerate(names):
        t = md.topics.get(n)
        check(t is not None and len(t.partitions) == 2 + i, f"list_topics: {n} is {t}")
        for p in t.partitions.values():
            check(p.leader >= 0 and p.leader in md.brokers, f"{n}/{p.id} leader {p.leader} not among {list(md.brokers)}")
    check(len(md.brokers) >= 1 and md.cluster_id, f"list_topics: brokers {md.brokers}, cluster id {md.cluster_id}")
    d = a.describe_cluster(request_timeout=30).result(timeout=TIMEOUT)
    check(d.nodes and d.cluster_id == md.cluster_id, f"describe_cluster: {d.cluster_id} {d.nodes}")
    for f in a.delete_topics(names, operation_timeout=30, request_timeout=30).values():
        f.result(timeout=TIMEOUT)
    deadline = time.monotonic() + TIMEOUT
    while any(n in a.list_topics(timeout=10).topics for n in names):
        check(time.monotonic() < deadline, f"topics still listed {TIMEOUT:.0f} s after delete_topics")
        time.sleep(0.2)


def txn():
    """Transactions: commit and abort to three partitions, consume-transform-produce with
    send_offsets_to_transaction, a second producer of the transactional.id fencing the first;
    a read_committed consumer reads until a sentinel per partition: exactly what committed."""
    src, out, group, tid = f"{PREFIX}txn-in", f"{PREFIX}txn-out", f"{PREFIX}txn-g", f"{PREFIX}txn"
    a = admin()
    create_topic(a, src, 2)
    create_topic(a, out, 3)
    wait_topic_metadata(src, 2)
    wait_topic_metadata(out, 3)
    produce(src, [{"value": f"in-{i}".encode(), "partition": i % 2} for i in range(6)])
    tconf = conf(**{"transactional.id": tid, "transaction.timeout.ms": 60000})
    want = set()
    p = Producer(tconf)
    p.init_transactions(TIMEOUT)
    p.begin_transaction()
    for i in range(6):
        p.produce(out, value=f"c-{i}".encode(), partition=i % 3)
        want.add(f"c-{i}")
    p.commit_transaction(TIMEOUT)
    p.begin_transaction()
    for i in range(3):
        p.produce(out, value=f"aborted-{i}".encode(), partition=i)
    p.abort_transaction(TIMEOUT)

    member = conf(**{"group.id": group, "enable.auto.commit": False, "auto.offset.reset": "earliest",
                     "group.protocol": "classic", "isolation.level": "read_committed",
                     "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000})
    c = Consumer(member)
    try:
        c.subscribe([src])
        p.begin_transaction()
        got = read_exactly(c, 6)
        check(len(got) == 6, f"consumed {len(got)} inputs, want 6")
        for m in got:
            v = "out-" + m.value().decode()
            p.produce(out, value=v.encode(), partition=m.partition())
            want.add(v)
        p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), TIMEOUT)
        p.commit_transaction(TIMEOUT)
        committed = c.committed([TopicPartition(src, q) for q in range(2)], timeout=TIMEOUT)
        check(all(tp.offset == 3 for tp in committed), f"group offsets {[(tp.partition, tp.offset) for tp in committed]}, want 3 and 3")
    finally:
        c.close()

    # Fencing: the zombie's open transaction is aborted by the new producer's init.
    p.begin_transaction()
    p.produce(out, value=b"zombie-0", partition=0)
    check(p.flush(TIMEOUT) == 0, "the zombie's first record was not delivered")
    nxt = Producer(tconf)
    nxt.init_transactions(TIMEOUT)
    nxt.begin_transaction()
    nxt.produce(out, value=b"next-0", partition=1)
    want.add("next-0")
    nxt.commit_transaction(TIMEOUT)
    fenced = None
    try:
        p.produce(out, value=b"zombie-1", partition=2)
        p.commit_transaction(TIMEOUT)
    except KafkaException as e:
        fenced = e
    check(fenced is not None, "the fenced producer committed")

    produce(out, [{"value": b"sentinel", "partition": q} for q in range(3)])
    r = Consumer(conf(**{"group.id": f"{group}-reader", "enable.auto.commit": False,
                         "isolation.level": "read_committed"}))
    try:
        r.assign([TopicPartition(out, q, OFFSET_BEGINNING) for q in range(3)])
        seen, extra, sentinels = set(), [], 0
        deadline = time.monotonic() + TIMEOUT
        while sentinels < 3 and time.monotonic() < deadline:
            m = r.poll(0.2)
            if m is None:
                continue
            check(m.error() is None, f"consumer error: {m.error()}")
            v = m.value().decode()
            if v == "sentinel":
                sentinels += 1
            elif v in seen or v not in want:
                extra.append(v)
            else:
                seen.add(v)
        check(sentinels == 3, f"read {sentinels} sentinels of 3")
        check(not extra, f"read_committed read records not committed or twice: {extra}")
        check(seen == want, f"read_committed read {sorted(seen)}, want {sorted(want)}")
    finally:
        r.close()


SCENARIOS = [
    ("produce-consume", produce_consume),
    *[(f"compression-{c}", (lambda c=c: produce_consume(c))) for c in ("gzip", "snappy", "lz4", "zstd")],
    ("group-resume", group_resume),
    ("admin-topics", admin_topics),
    ("txn", txn),
]


def select(want):
    if not want:
        return SCENARIOS
    out = []
    for w in (x.strip() for x in want.split(",")):
        if not w:
            continue
        hit = [s for s in SCENARIOS if s[0] == w or s[0].startswith(w + "-")]
        if not hit:
            print(f"python-kafka: unknown scenario {w}; known: {[s[0] for s in SCENARIOS]}", file=sys.stderr)
            sys.exit(2)
        out += [s for s in hit if s not in out]
    return out


def main():
    if not BOOTSTRAP:
        print("python-kafka: KAFKA_BOOTSTRAP (host:port[,host:port...]) is required", file=sys.stderr)
        return 2
    run = select(os.environ.get("SCENARIOS", ""))
    passed = 0
    for name, fn in run:
        t0 = time.monotonic()
        try:
            fn()
            passed += 1
            print(f"PASS {name} ({time.monotonic() - t0:.1f} s)", flush=True)
        except Failure as e:
            print(f"FAIL {name}: {e} ({time.monotonic() - t0:.1f} s)", flush=True)
        except Exception as e:  # a client error is a failure of the scenario
            print(f"FAIL {name}: {type(e).__name__}: {e} ({time.monotonic() - t0:.1f} s)", flush=True)
            traceback.print_exc(file=sys.stderr)
    print(f"python-kafka: {passed}/{len(run)} scenarios passed", flush=True)
    return 0 if passed == len(run) else 1


if __name__ == "__main__":
    sys.exit(main())
