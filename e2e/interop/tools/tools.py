"""Apache Pulsar's own command-line tools against lakegate.

Run by e2e/interop/tools/run.sh, which resolves pulsar-admin and
pulsar-client (org.apache.pulsar:pulsar-client-tools, setup.sh), starts
lakegate and sets:

  PULSAR_TOOLS_CP     the tools' classpath
  PULSAR_CLIENT_CONF  a client.conf naming the node (webServiceUrl,
                      brokerServiceUrl), as the tools' bin scripts pass it
  STEPS               optional regex: run only the steps whose name matches
  PULSAR_TOOLS_CDS    optional path of a class-data archive: the first
                      command writes it (-XX:ArchiveClassesAtExit), every
                      later one maps it (-XX:SharedArchiveFile), ≈ 1 s less
                      JVM start-up per command

Every step runs one command as its own process — `java … PulsarAdminTool
client.conf ARGS` is exactly what `bin/pulsar-admin ARGS` runs (likewise
PulsarClientTool for `bin/pulsar-client`) — and checks its exit code and
its output. Prints PASS/FAIL per step and `tools: N/M commands passed`;
exits 1 if any step failed. Steps depend on the ones before them (a
tenant, then a namespace, then topics), so the first failure is the one to
read. No sleeps synchronize anything: waits are polls of admin output with
a deadline.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid

CP = os.environ["PULSAR_TOOLS_CP"]
CONF = os.environ["PULSAR_CLIENT_CONF"]
ONLY = re.compile(os.environ.get("STEPS", ""))
RUN = uuid.uuid4().hex[:6]
TENANT = f"tools-{RUN}"
NS = f"{TENANT}/ns"
T = f"persistent://{NS}/events"
# JVM flags for a short-lived command (startup time), logs at INFO on
# stderr (pulsar-client reports "N messages successfully produced" there),
# the JVM's own warnings (a class-data archive it cannot map, say) on stderr
# rather than stdout, where they would spoil the checked output.
JAVA = ["java", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xlog:disable", "-Xlog:all=warning:stderr",
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=info", "-cp", CP]
TOOLS = {"admin": "org.apache.pulsar.admin.cli.PulsarAdminTool",
         "client": "org.apache.pulsar.client.cli.PulsarClientTool"}
TIMEOUT = 120  # seconds one command may take
CDS = os.environ.get("PULSAR_TOOLS_CDS", "")


def java(tool):
    """The command line of one tool command, up to its arguments. With a
    class-data archive (CDS) the JVM maps the classes the first command
    loaded instead of loading them from the jars again; classes outside the
    archive load as usual, and a JVM that cannot map it runs without."""
    cds = []
    if CDS:
        cds = ["-XX:SharedArchiveFile=" + CDS] if os.path.exists(CDS) else ["-XX:ArchiveClassesAtExit=" + CDS]
    return JAVA[:1] + cds + JAVA[1:] + [TOOLS[tool], CONF]


class Failed(Exception):
    pass


def run(tool, args, timeout=TIMEOUT):
    """Runs one tool command; returns (exit code, stdout, stderr)."""
    p = subprocess.run(java(tool) + args, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def start(tool, args):
    """Starts one tool command in the background."""
    return subprocess.Popen(java(tool) + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


results = []


def step(name, tool, args, rc=0, out=None, err=None, check=None):
    """One command: its exit code must be rc (0, or "nonzero"); out / err are
    regexes its stdout / stderr must match; check(stdout) may raise Failed."""
    if not ONLY.search(name):
        return None
    started = time.monotonic()
    so = None
    try:
        code, so, se = run(tool, args)
        if (rc == "nonzero" and code == 0) or (rc != "nonzero" and code != rc):
            raise Failed(f"exit code {code}, want {rc}; stdout {so.strip()[-300:]!r} stderr {tail(se)!r}")
        if out is not None and not re.search(out, so, re.S):
            raise Failed(f"stdout {so.strip()[-400:]!r} does not match {out!r}")
        if err is not None and not re.search(err, se + so, re.S):
            raise Failed(f"output {tail(se + so)!r} does not match {err!r}")
        if check is not None:
            check(so)
        results.append((name, True, ""))
        print(f"PASS {name} ({time.monotonic() - started:.1f}s)", flush=True)
        return so
    except (Failed, subprocess.TimeoutExpired, json.JSONDecodeError, KeyError, TypeError, IndexError) as e:
        why = str(e) if isinstance(e, Failed) else f"{type(e).__name__} {e} in stdout {(so or '').strip()[-400:]!r}"
        results.append((name, False, why))
        print(f"FAIL {name}: {why}", flush=True)
        return None


def tail(s, n=400):
    lines = [l for l in s.strip().splitlines() if "WARN" not in l or "Reason" in l]
    return "\n".join(lines)[-n:]


def js(so):
    return json.loads(so)


def expect(cond, what):
    if not cond:
        raise Failed(what)


def wait_admin(name, args, cond, timeout=30):
    """Polls an admin command until cond(stdout) holds (a step)."""
    if not ONLY.search(name):
        return
    deadline = time.monotonic() + timeout
    last = ""
    started = time.monotonic()
    while time.monotonic() < deadline:
        code, so, se = run("admin", args)
        last = so if code == 0 else tail(se)
        try:
            if code == 0 and cond(so):
                results.append((name, True, ""))
                print(f"PASS {name} ({time.monotonic() - started:.1f}s)", flush=True)
                return
        except (ValueError, KeyError):
            pass
    results.append((name, False, f"not within {timeout}s; last output {last.strip()[-300:]!r}"))
    print(f"FAIL {name}: not within {timeout}s; last output {last.strip()[-300:]!r}", flush=True)


def stats_sub(so, sub):
    return js(so)["subscriptions"][sub]


RB_TENANT = f"runbook-{RUN}"
RB_NS = f"{RB_TENANT}/ops"
NODES = int(os.environ.get("LAKEGATE_NODES", "1") or "1")


def part_stats(so, sub):
    """Per partition (partitioned-stats --per-partition): {name: (msgInCounter, msgBacklog of sub)}."""
    return {n: (p["msgInCounter"], p["subscriptions"][sub]["msgBacklog"]) for n, p in js(so)["partitions"].items()}


def ledger_entry(so):
    """(ledgerId, entryId) of a last-message-id answer; (-1, -1) when the step failed."""
    if not so:
        return -1, -1
    m = js(so)
    return m["ledgerId"], m["entryId"]


def runbook():
    """An operator's runbook, end to end, on a tenant of its own (steps
    "runbook …", STEPS='^runbook' runs them alone): the cluster and its
    brokers, a replay-able namespace (retention -1/-1: acknowledged data
    stays, so cursors can be moved back), a partitioned and a plain topic,
    then the backlog commands — skip, clear-backlog, expire-messages by
    time and by id, reset-cursor, analyze-backlog — the internals
    (stats-internal, examine-messages, get-message-by-id), subscription
    properties, unsubscribe (forced, with a consumer attached) and
    namespace-wide clear-backlog, unsubscribe and unload. Every command's
    answer is checked: its JSON fields and counts, not only its exit code."""
    ns, p, t = RB_NS, f"persistent://{RB_NS}/orders", f"persistent://{RB_NS}/audit"
    parts = [f"{p}-partition-{i}" for i in range(3)]

    def backlog(sub, want):
        return lambda so: expect(stats_sub(so, sub)["msgBacklog"] == want, f"{sub} backlog want {want}: {so[-800:]}")

    def part_backlog(sub, want):
        """partitioned-stats --per-partition: sub's backlog per partition is
        want (a list), the aggregate their sum."""
        def check(so):
            got = part_stats(so, sub)
            per = [got[n][1] for n in parts]
            expect(per == want and js(so)["subscriptions"][sub]["msgBacklog"] == sum(want),
                   f"{sub} backlog per partition {per}, aggregate {js(so)['subscriptions'][sub]['msgBacklog']}; want {want}")
        return check

    # --- the cluster and its brokers -------------------------------------
    step("runbook clusters list", "admin", ["clusters", "list"], check=lambda so: expect(so.split() == ["standalone"], so))
    step("runbook clusters get standalone", "admin", ["clusters", "get", "standalone"],
         check=lambda so: expect(js(so)["serviceUrl"].startswith("http://") and js(so)["brokerServiceUrl"].startswith("pulsar://"), so))
    brokers = step("runbook brokers list", "admin", ["brokers", "list", "standalone"],
                   check=lambda so: expect(len(so.split()) == NODES
                                           and all(re.fullmatch(r"[\w.-]+:\d+", b) for b in so.split()), f"want {NODES} brokers: {so}"))
    step("runbook brokers leader-broker", "admin", ["brokers", "leader-broker"],
         check=lambda so: expect(js(so)["brokerId"] in (brokers or "").split()
                                 and js(so)["serviceUrl"].endswith(js(so)["brokerId"]), f"{so} not one of {brokers!r}"))
    step("runbook brokers healthcheck", "admin", ["brokers", "healthcheck"], out=r"(?m)^ok\s*$")

    # --- a replay-able namespace, a partitioned and a plain topic ----------
    step("runbook tenants create", "admin", ["tenants", "create", RB_TENANT, "--allowed-clusters", "standalone"])
    step("runbook namespaces create", "admin", ["namespaces", "create", ns])
    step("runbook namespaces set-retention unlimited", "admin", ["namespaces", "set-retention", ns, "--size", "-1", "--time", "-1"])
    step("runbook topics create-partitioned-topic", "admin", ["topics", "create-partitioned-topic", p, "-p", "3"])
    step("runbook topics create", "admin", ["topics", "create", t])
    # Subscriptions made before anything is produced: everything is their backlog.
    step("runbook topics create-subscription (partitioned)", "admin", ["topics", "create-subscription", "-s", "ops", p])
    for sub in ("ops", "replay", "tmp"):
        step(f"runbook topics create-subscription {sub}", "admin", ["topics", "create-subscription", "-s", sub, t])
    step("runbook topics list", "admin", ["topics", "list", ns],
         check=lambda so: expect(sorted(so.split()) == sorted([t] + parts), so))

    # Unbatched: one message per entry, round-robin over the partitions.
    step("runbook produce to the partitioned topic", "client", ["produce", "-db", "-m", ",".join(f"o{i}" for i in range(12)), p],
         err=r"12 messages successfully produced")
    step("runbook produce to the plain topic", "client", ["produce", "-db", "-m", ",".join(f"rb-{i:02d}" for i in range(10)), t],
         err=r"10 messages successfully produced")

    per_in = {}

    def partitioned_in(so):
        got = part_stats(so, "ops")
        per_in.update({n: got[n][0] for n in parts})
        expect(sorted(got) == parts and sum(per_in.values()) == 12 and js(so)["msgInCounter"] == 12
               and [got[n][0] == got[n][1] for n in parts] == [True] * 3 and js(so)["metadata"]["partitions"] == 3,
               f"msgInCounter/backlog per partition {got}; aggregate {js(so)['msgInCounter']}")
    step("runbook topics partitioned-stats --per-partition", "admin", ["topics", "partitioned-stats", "--per-partition", p],
         check=partitioned_in)
    step("runbook topics partitioned-stats-internal", "admin", ["topics", "partitioned-stats-internal", p],
         check=lambda so: expect(js(so)["metadata"]["partitions"] == 3 and sorted(js(so)["partitions"]) == parts
                                 and sum(x["numberOfEntries"] for x in js(so)["partitions"].values()) == 12
                                 and all(x["cursors"]["ops"]["markDeletePosition"].endswith(":-1") for x in js(so)["partitions"].values()),
                                 so[-800:]))

    # --- the plain topic's internals -----------------------------------------
    ledger, last = ledger_entry(step("runbook topics last-message-id", "admin", ["topics", "last-message-id", t],
                                     check=lambda so: expect(js(so)["entryId"] == 9 and js(so)["ledgerId"] >= 0, so)))

    def internal(so):
        s = js(so)
        expect(s["entriesAddedCounter"] == 10 and s["numberOfEntries"] == 10 and s["totalSize"] > 0
               and [l["ledgerId"] for l in s["ledgers"]] == [ledger] and s["ledgers"][0]["entries"] == 10
               and s["lastConfirmedEntry"] == f"{ledger}:9" and sorted(s["cursors"]) == ["ops", "replay", "tmp"]
               and all(c["markDeletePosition"] == f"{ledger}:-1" and c["readPosition"] == f"{ledger}:0"
                       and c["individuallyDeletedMessages"] == "[]" and c["numberOfEntriesSinceFirstNotAckedMessage"] == 10
                       for c in s["cursors"].values()), so[-1200:])
    step("runbook topics stats-internal", "admin", ["topics", "stats-internal", t], check=internal)
    step("runbook topics examine-messages latest", "admin", ["topics", "examine-messages", "-i", "latest", "-m", "1", t],
         out=r"\|rb-09")
    step("runbook topics examine-messages earliest 3", "admin", ["topics", "examine-messages", "-i", "earliest", "-m", "3", t],
         out=r"\|rb-02")
    step("runbook topics get-message-by-id", "admin", ["topics", "get-message-by-id", "-l", str(ledger), "-e", str(last - 4), t],
         out=r"\|rb-05")

    # --- the backlog commands on subscription ops of the plain topic -------------
    step("runbook topics skip -n 3", "admin", ["topics", "skip", "-n", "3", "-s", "ops", t])
    step("runbook topics stats: backlog 7 after skip", "admin", ["topics", "stats", t], check=backlog("ops", 7))
    step("runbook topics analyze-backlog", "admin", ["topics", "analyze-backlog", "-s", "ops", t],
         check=lambda so: expect(js(so)["entries"] == 7 and js(so)["messages"] == 7 and js(so)["aborted"] is False
                                 and js(so)["firstMessageId"] == f"{ledger}:3" and js(so)["lastMessageId"] == f"{ledger}:9", so))
    step("runbook topics analyze-backlog from a position", "admin",
         ["topics", "analyze-backlog", "-s", "ops", "-p", f"{ledger}:6", t],
         check=lambda so: expect(js(so)["entries"] == 4 and js(so)["messages"] == 4, so))
    step("runbook topics expire-messages up to a message id", "admin",
         ["topics", "expire-messages", "-s", "ops", "-p", f"{ledger}:4", t])
    step("runbook topics stats: backlog 5 after expire by id", "admin", ["topics", "stats", t], check=backlog("ops", 5))
    step("runbook topics stats-internal: the cursor moved", "admin", ["topics", "stats-internal", t],
         check=lambda so: expect(js(so)["cursors"]["ops"]["markDeletePosition"] == f"{ledger}:4"
                                 and js(so)["cursors"]["replay"]["markDeletePosition"] == f"{ledger}:-1", so[-1200:]))
    step("runbook topics expire-messages older than 0 s", "admin", ["topics", "expire-messages", "-s", "replay", "-t", "0", t])
    step("runbook topics stats: replay backlog 0 after expire by time", "admin", ["topics", "stats", t],
         check=lambda so: (backlog("replay", 0)(so), backlog("ops", 5)(so)))
    step("runbook topics clear-backlog", "admin", ["topics", "clear-backlog", "-s", "ops", t])
    step("runbook topics stats: backlog 0 after clear-backlog", "admin", ["topics", "stats", t], check=backlog("ops", 0))
    # Retention keeps what was acknowledged: the cursors go back.
    step("runbook topics reset-cursor -m earliest", "admin", ["topics", "reset-cursor", "-s", "ops", "-m", "earliest", t])
    step("runbook topics reset-cursor -t 1h", "admin", ["topics", "reset-cursor", "-s", "replay", "-t", "1h", t])
    step("runbook topics stats: both backlogs 10 again", "admin", ["topics", "stats", t],
         check=lambda so: (backlog("ops", 10)(so), backlog("replay", 10)(so)))

    # --- the partitioned topic's cursor -----------------------------------------
    step("runbook topics clear-backlog (partitioned)", "admin", ["topics", "clear-backlog", "-s", "ops", p])
    step("runbook partitioned-stats: backlog 0 after clear-backlog", "admin", ["topics", "partitioned-stats", "--per-partition", p],
         check=part_backlog("ops", [0, 0, 0]))
    step("runbook topics reset-cursor -t 1h (partitioned)", "admin", ["topics", "reset-cursor", "-s", "ops", "-t", "1h", p])
    step("runbook partitioned-stats: everything back after reset by time", "admin",
         ["topics", "partitioned-stats", "--per-partition", p],
         check=lambda so: part_backlog("ops", [per_in.get(n, -1) for n in parts])(so))
    # By message id on the partitioned name: lakegate takes earliest and
    # latest there, for every partition (Pulsar's broker refuses any
    # position on a partitioned name, 405) ...
    step("runbook topics reset-cursor -m latest (partitioned)", "admin", ["topics", "reset-cursor", "-s", "ops", "-m", "latest", p])
    step("runbook partitioned-stats: backlog 0 after reset to latest", "admin", ["topics", "partitioned-stats", "--per-partition", p],
         check=part_backlog("ops", [0, 0, 0]))
    # ... and, as Pulsar, refuses a ledger:entry there: a position names one
    # partition's ledger, the operator resets that partition.
    l1, e1 = ledger_entry(step("runbook topics last-message-id of partition 1", "admin", ["topics", "last-message-id", parts[1]],
                               check=lambda so: expect(js(so)["entryId"] == per_in.get(parts[1], 0) - 1, so)))
    step("runbook topics reset-cursor -m ledger:entry on the partitioned name fails", "admin",
         ["topics", "reset-cursor", "-s", "ops", "-m", f"{l1}:0", p], rc="nonzero")
    step("runbook topics reset-cursor -m ledger:entry (partition 1)", "admin",
         ["topics", "reset-cursor", "-s", "ops", "-m", f"{l1}:{e1 - 1}", parts[1]])
    step("runbook partitioned-stats: partition 1 backlog 2 after reset by id", "admin",
         ["topics", "partitioned-stats", "--per-partition", p], check=part_backlog("ops", [0, 2, 0]))
    step("runbook topics reset-cursor -m earliest (partitioned)", "admin", ["topics", "reset-cursor", "-s", "ops", "-m", "earliest", p])
    step("runbook partitioned-stats: everything back after reset to earliest", "admin",
         ["topics", "partitioned-stats", "--per-partition", p],
         check=lambda so: part_backlog("ops", [per_in.get(n, -1) for n in parts])(so))

    # --- subscription properties ----------------------------------------------
    step("runbook topics update-subscription-properties", "admin",
         ["topics", "update-subscription-properties", "-s", "ops", "-p", "owner=payments", "-p", "tier=gold", p])
    step("runbook topics get-subscription-properties", "admin", ["topics", "get-subscription-properties", "-s", "ops", p],
         check=lambda so: expect(js(so) == {"owner": "payments", "tier": "gold"}, so))
    step("runbook topics get-subscription-properties of a partition", "admin",
         ["topics", "get-subscription-properties", "-s", "ops", parts[2]],
         check=lambda so: expect(js(so) == {"owner": "payments", "tier": "gold"}, so))
    step("runbook topics update-subscription-properties --clear", "admin",
         ["topics", "update-subscription-properties", "-s", "ops", "-c", p])
    step("runbook topics get-subscription-properties: cleared", "admin", ["topics", "get-subscription-properties", "-s", "ops", p],
         check=lambda so: expect(js(so) == {}, so))

    # --- unsubscribe ----------------------------------------------------------
    step("runbook topics unsubscribe", "admin", ["topics", "unsubscribe", "-s", "tmp", t])
    step("runbook topics subscriptions after unsubscribe", "admin", ["topics", "subscriptions", t],
         check=lambda so: expect(sorted(so.split()) == ["ops", "replay"], so))
    if ONLY.search("runbook topics unsubscribe --force"):
        # A consumer attached: unsubscribe is refused; --force deletes the
        # subscription and disconnects the consumer (which, as with Pulsar,
        # reconnects and subscribes anew: one consumer, connected since later).
        lt = f"persistent://{ns}/live"
        since = []

        def attached(so):
            cs = stats_sub(so, "live")["consumers"]
            since[:] = [c["connectedSince"] for c in cs]
            return len(cs) == 1

        def reconnected(so):
            now = [c["connectedSince"] for c in stats_sub(so, "live")["consumers"]]
            return len(now) == 1 and now != since
        cons = start("client", ["consume", "-s", "live", "-n", "0", lt])
        try:
            wait_admin("runbook topics unsubscribe --force: a consumer attached", ["topics", "stats", lt], attached)
            step("runbook topics unsubscribe --force: refused without", "admin", ["topics", "unsubscribe", "-s", "live", lt],
                 rc="nonzero", err=r"(?i)consumer")
            step("runbook topics unsubscribe --force", "admin", ["topics", "unsubscribe", "-f", "-s", "live", lt])
            wait_admin("runbook topics unsubscribe --force: the consumer was disconnected", ["topics", "stats", lt], reconnected)
        finally:
            cons.kill()
            cons.communicate()
        # The consumer gone, its subscription goes without --force.
        wait_admin("runbook topics unsubscribe --force: unsubscribe once the consumer left",
                   ["topics", "unsubscribe", "-s", "live", lt], lambda so: True)
        step("runbook topics unsubscribe --force: no subscription left", "admin", ["topics", "subscriptions", lt],
             check=lambda so: expect(so.split() == [], so))

    # --- namespace-wide commands ------------------------------------------------
    step("runbook namespaces clear-backlog -s ops", "admin", ["namespaces", "clear-backlog", "-s", "ops", "--force", ns])
    step("runbook topics stats: ops cleared, replay kept", "admin", ["topics", "stats", t],
         check=lambda so: (backlog("ops", 0)(so), backlog("replay", 10)(so)))
    step("runbook partitioned-stats: ops cleared on every partition", "admin", ["topics", "partitioned-stats", "--per-partition", p],
         check=part_backlog("ops", [0, 0, 0]))
    step("runbook namespaces clear-backlog", "admin", ["namespaces", "clear-backlog", "--force", ns])
    step("runbook topics stats: every backlog 0", "admin", ["topics", "stats", t],
         check=lambda so: (backlog("ops", 0)(so), backlog("replay", 0)(so)))
    step("runbook namespaces unsubscribe", "admin", ["namespaces", "unsubscribe", "-s", "replay", ns])
    step("runbook topics subscriptions after namespaces unsubscribe", "admin", ["topics", "subscriptions", t],
         check=lambda so: expect(so.split() == ["ops"], so))
    step("runbook namespaces unload", "admin", ["namespaces", "unload", ns])
    step("runbook produce after unload", "client", ["produce", "-db", "-m", "after-unload", t], err=r"1 messages successfully produced")
    step("runbook topics last-message-id after unload", "admin", ["topics", "last-message-id", t],
         check=lambda so: expect(js(so)["entryId"] == 10 and js(so)["ledgerId"] == ledger, so))
    step("runbook topics stats: the new message is ops' backlog", "admin", ["topics", "stats", t], check=backlog("ops", 1))
    step("runbook topics examine-messages after unload", "admin", ["topics", "examine-messages", "-i", "latest", "-m", "1", t],
         out=r"\|after-unload")

    # --- cleanup -----------------------------------------------------------------
    step("runbook namespaces delete", "admin", ["namespaces", "delete", "-f", ns])
    step("runbook tenants delete", "admin", ["tenants", "delete", RB_TENANT])


def main():
    tmp = tempfile.mkdtemp(prefix="lakegate-tools-")

    # --- clusters, brokers, tenants, namespaces --------------------------
    step("clusters list", "admin", ["clusters", "list"], out=r"(?m)^standalone$")
    step("brokers list", "admin", ["brokers", "list", "standalone"], out=r"\d+\.\d+\.\d+\.\d+:\d+|localhost:\d+")
    step("tenants create", "admin", ["tenants", "create", TENANT, "--allowed-clusters", "standalone"])
    step("tenants list", "admin", ["tenants", "list"], out=rf"(?m)^{TENANT}$")
    step("tenants get", "admin", ["tenants", "get", TENANT],
         check=lambda so: expect(js(so)["allowedClusters"] == ["standalone"], so))
    step("tenants create again fails", "admin", ["tenants", "create", TENANT], rc="nonzero", err=r"already exists")
    step("namespaces create", "admin", ["namespaces", "create", NS])
    step("namespaces list", "admin", ["namespaces", "list", TENANT], out=rf"(?m)^{NS}$")

    # --- namespace policies ---------------------------------------------
    step("namespaces set-retention", "admin", ["namespaces", "set-retention", NS, "--size", "100M", "--time", "1h"])
    step("namespaces get-retention", "admin", ["namespaces", "get-retention", NS],
         check=lambda so: expect(js(so) == {"retentionTimeInMinutes": 60, "retentionSizeInMB": 100}, so))
    step("namespaces set-message-ttl", "admin", ["namespaces", "set-message-ttl", NS, "--messageTTL", "3600"])
    step("namespaces get-message-ttl", "admin", ["namespaces", "get-message-ttl", NS], out=r"^3600\s*$")
    step("namespaces set-backlog-quota", "admin",
         ["namespaces", "set-backlog-quota", NS, "--limit", "10M", "--policy", "producer_request_hold"])
    step("namespaces get-backlog-quotas", "admin", ["namespaces", "get-backlog-quotas", NS],
         out=r"destination_storage.*limitSize=10485760.*policy=producer_request_hold")
    step("namespaces policies", "admin", ["namespaces", "policies", NS],
         check=lambda so: expect(js(so)["retention_policies"]["retentionSizeInMB"] == 100
                                 and js(so)["message_ttl_in_seconds"] == 3600
                                 and js(so)["backlog_quota_map"]["destination_storage"]["policy"] == "producer_request_hold", so))
    step("namespaces remove-backlog-quota", "admin", ["namespaces", "remove-backlog-quota", NS])
    step("namespaces remove-message-ttl", "admin", ["namespaces", "remove-message-ttl", NS])
    step("namespaces remove-retention", "admin", ["namespaces", "remove-retention", NS])
    step("namespaces get-retention after remove", "admin", ["namespaces", "get-retention", NS], out=r"^(null)?\s*$")
    step("namespaces set-schema-compatibility-strategy", "admin",
         ["namespaces", "set-schema-compatibility-strategy", NS, "--compatibility", "BACKWARD"])
    step("namespaces get-schema-compatibility-strategy", "admin",
         ["namespaces", "get-schema-compatibility-strategy", NS], out=r"^BACKWARD\s*$")
    step("namespaces set-deduplication", "admin", ["namespaces", "set-deduplication", NS, "--enable"])
    step("namespaces get-deduplication", "admin", ["namespaces", "get-deduplication", NS], out=r"^true\s*$")
    # Policies as code (docs/policies.md): honoured, stored, or refused with the reason.
    step("namespaces set-auto-topic-creation", "admin",
         ["namespaces", "set-auto-topic-creation", NS, "--enable", "--type", "partitioned", "--num-partitions", "2"])
    step("namespaces get-auto-topic-creation", "admin", ["namespaces", "get-auto-topic-creation", NS],
         check=lambda so: expect(js(so) == {"allowAutoTopicCreation": True, "topicType": "partitioned", "defaultNumPartitions": 2}, so))
    step("namespaces remove-auto-topic-creation", "admin", ["namespaces", "remove-auto-topic-creation", NS])
    step("namespaces set-inactive-topic-policies", "admin",
         ["namespaces", "set-inactive-topic-policies", NS, "-d", "-t", "3600", "-m", "delete_when_no_subscriptions"])
    step("namespaces get-inactive-topic-policies", "admin", ["namespaces", "get-inactive-topic-policies", NS],
         check=lambda so: expect(js(so)["maxInactiveDurationSeconds"] == 3600 and js(so)["deleteWhileInactive"] is False, so))
    step("namespaces set-inactive-topic-policies deleting is refused", "admin",
         ["namespaces", "set-inactive-topic-policies", NS, "-e", "-t", "3600", "-m", "delete_when_no_subscriptions"],
         rc="nonzero", err=r"does not delete inactive topics")
    step("namespaces set-subscription-expiration-time 0", "admin", ["namespaces", "set-subscription-expiration-time", NS, "-t", "0"])
    step("namespaces set-subscription-expiration-time refused", "admin",
         ["namespaces", "set-subscription-expiration-time", NS, "-t", "60"], rc="nonzero", err=r"does not expire subscriptions")
    step("namespaces set-delayed-delivery", "admin", ["namespaces", "set-delayed-delivery", NS, "--enable", "--time", "1s"])
    step("namespaces get-delayed-delivery", "admin", ["namespaces", "get-delayed-delivery", NS], out=r"active.*true")
    step("namespaces set-delayed-delivery disabled is refused", "admin",
         ["namespaces", "set-delayed-delivery", NS, "--disable"], rc="nonzero", err=r"delivers delayed messages at their time")
    step("namespaces set-persistence", "admin", ["namespaces", "set-persistence", NS, "-e", "3", "-w", "2", "-a", "2", "-r", "0"])
    step("namespaces get-persistence", "admin", ["namespaces", "get-persistence", NS],
         check=lambda so: expect(js(so)["bookkeeperEnsemble"] == 3 and js(so)["bookkeeperAckQuorum"] == 2, so))
    step("namespaces set-offload-threshold is refused", "admin",
         ["namespaces", "set-offload-threshold", NS, "--size", "10M"], rc="nonzero", err=r"offload does not apply")
    step("namespaces set-schema-validation-enforce", "admin", ["namespaces", "set-schema-validation-enforce", NS, "--enable"])
    step("namespaces get-schema-validation-enforce", "admin", ["namespaces", "get-schema-validation-enforce", NS], out=r"^true\s*$")
    step("namespaces policies as code", "admin", ["namespaces", "policies", NS],
         check=lambda so: expect(js(so)["persistence"]["bookkeeperEnsemble"] == 3
                                 and js(so)["schema_validation_enforced"] is True
                                 and js(so)["inactive_topic_policies"]["maxInactiveDurationSeconds"] == 3600, so))
    step("namespaces set-schema-validation-enforce off", "admin", ["namespaces", "set-schema-validation-enforce", NS, "--disable"])

    # --- topics, subscriptions, produce and consume ----------------------
    step("topics create", "admin", ["topics", "create", T])
    step("topics create again fails", "admin", ["topics", "create", T], rc="nonzero", err=r"already exists")
    step("topics create-partitioned-topic", "admin", ["topics", "create-partitioned-topic", f"persistent://{NS}/parts", "-p", "3"])
    step("topics get-partitioned-topic-metadata", "admin",
         ["topics", "get-partitioned-topic-metadata", f"persistent://{NS}/parts"],
         check=lambda so: expect(js(so)["partitions"] == 3, so))
    step("topics list-partitioned-topics", "admin", ["topics", "list-partitioned-topics", NS],
         out=rf"(?m)^persistent://{NS}/parts$")
    step("topics list", "admin", ["topics", "list", NS],
         check=lambda so: expect(T in so.split() and f"persistent://{NS}/parts-partition-2" in so.split(), so))
    step("topics create-subscription", "admin", ["topics", "create-subscription", "-s", "sub1", T])
    step("topics subscriptions", "admin", ["topics", "subscriptions", T], out=r"(?m)^sub1$")
    step("pulsar-client produce", "client", ["produce", "-m", "alpha,beta,gamma", "-n", "2", "-k", "key-1", "-p", "origin=tools", T],
         err=r"6 messages successfully produced")
    step("topics stats: backlog before any consumer", "admin", ["topics", "stats", T],
         check=lambda so: expect(js(so)["msgInCounter"] == 6 and stats_sub(so, "sub1")["msgBacklog"] == 6, so))
    step("topics peek-messages", "admin", ["topics", "peek-messages", "-s", "sub1", "-n", "2", T],
         out=r"alpha.*beta")
    step("pulsar-client consume", "client", ["consume", "-s", "sub1", "-n", "6", T],
         check=lambda so: expect(re.findall(r"content:(\w+)", so) == ["alpha", "beta", "gamma"] * 2
                                 and so.count("key:[key-1]") == 6 and "origin=tools" in so, so[-600:]),
         err=r"6 messages successfully consumed")
    step("topics stats: backlog consumed", "admin", ["topics", "stats", T],
         check=lambda so: expect(stats_sub(so, "sub1")["msgBacklog"] == 0, so))
    step("topics reset-cursor", "admin", ["topics", "reset-cursor", "-s", "sub1", "-t", "1h", T])
    step("topics stats: backlog after reset", "admin", ["topics", "stats", T],
         check=lambda so: expect(stats_sub(so, "sub1")["msgBacklog"] == 6, so))
    step("topics last-message-id", "admin", ["topics", "last-message-id", T],
         check=lambda so: expect(js(so)["entryId"] == 5, so))
    step("topics unload", "admin", ["topics", "unload", T])
    step("topics lookup", "admin", ["topics", "lookup", T], out=r"pulsar://")
    step("topics unsubscribe", "admin", ["topics", "unsubscribe", "-s", "sub1", T])

    # --- topic policies ----------------------------------------------------
    step("topicPolicies set-retention", "admin", ["topicPolicies", "set-retention", T, "-s", "1M", "-t", "10m"])
    step("topicPolicies get-retention", "admin", ["topicPolicies", "get-retention", T],
         check=lambda so: expect(js(so) == {"retentionTimeInMinutes": 10, "retentionSizeInMB": 1}, so))
    step("topicPolicies set-message-ttl", "admin", ["topicPolicies", "set-message-ttl", T, "-t", "60"])
    step("topicPolicies get-message-ttl", "admin", ["topicPolicies", "get-message-ttl", T], out=r"^60\s*$")
    step("topics set-max-message-size", "admin", ["topics", "set-max-message-size", T, "-m", "1048576"])
    step("topics get-max-message-size", "admin", ["topics", "get-max-message-size", T], out=r"^1048576\s*$")
    step("topics remove-max-message-size", "admin", ["topics", "remove-max-message-size", T])
    step("topicPolicies set-backlog-quota", "admin",
         ["topicPolicies", "set-backlog-quota", T, "-l", "1M", "-p", "consumer_backlog_eviction"])
    step("topicPolicies get-backlog-quota", "admin", ["topicPolicies", "get-backlog-quota", T],
         out=r"destination_storage.*limitSize=1048576.*policy=consumer_backlog_eviction")
    step("topicPolicies remove-backlog-quota", "admin", ["topicPolicies", "remove-backlog-quota", T])
    step("topicPolicies remove-message-ttl", "admin", ["topicPolicies", "remove-message-ttl", T])
    step("topicPolicies remove-retention", "admin", ["topicPolicies", "remove-retention", T])
    step("topicPolicies set-schema-compatibility-strategy", "admin",
         ["topicPolicies", "set-schema-compatibility-strategy", T, "-s", "ALWAYS_INCOMPATIBLE"])
    step("topicPolicies get-schema-compatibility-strategy", "admin",
         ["topicPolicies", "get-schema-compatibility-strategy", T], out=r"^ALWAYS_INCOMPATIBLE\s*$")
    step("topicPolicies set-deduplication", "admin", ["topicPolicies", "set-deduplication", T, "--disable"])
    step("topicPolicies get-deduplication", "admin", ["topicPolicies", "get-deduplication", T], out=r"^false\s*$")

    # A backlog quota that evicts, enforced: 20 messages of 100 bytes on a
    # subscription with a 1 KiB quota (the node checks policies every
    # second, run.sh).
    q = f"persistent://{NS}/quota"
    step("quota: create-subscription", "admin", ["topics", "create-subscription", "-s", "slow", q])
    step("quota: produce", "client", ["produce", "-m", "x" * 100, "-n", "20", "-db", q], err=r"20 messages successfully produced")
    step("quota: topicPolicies set-backlog-quota", "admin",
         ["topicPolicies", "set-backlog-quota", q, "-l", "1K", "-p", "consumer_backlog_eviction"])
    wait_admin("quota: the backlog evicted to fit", ["topics", "stats", q],
               lambda so: 0 < stats_sub(so, "slow")["msgBacklog"] < 20 and stats_sub(so, "slow")["backlogSize"] <= 1024)

    # --- compaction ---------------------------------------------------------
    ct = f"persistent://{NS}/compacted"
    step("compaction: produce key a twice", "client", ["produce", "-m", "a1,a2", "-k", "a", "-db", ct], err=r"2 messages successfully produced")
    step("compaction: produce key b", "client", ["produce", "-m", "b1", "-k", "b", "-db", ct], err=r"1 messages successfully produced")
    step("topics compaction-status before", "admin", ["topics", "compaction-status", ct], out=r"not been run")
    step("topics compact", "admin", ["topics", "compact", ct], out=r"Topic compaction requested")
    wait_admin("topics compaction-status: success", ["topics", "compaction-status", ct], lambda so: "success" in so.lower())
    step("topics stats: compaction", "admin", ["topics", "stats", ct],
         check=lambda so: expect(js(so)["compaction"]["lastCompactionRemovedEventCount"] == 1, so))
    step("topicPolicies set-compaction-threshold", "admin", ["topicPolicies", "set-compaction-threshold", ct, "-t", "10M"])
    step("topicPolicies get-compaction-threshold", "admin", ["topicPolicies", "get-compaction-threshold", ct], out=r"^10485760\s*$")
    step("topicPolicies remove-compaction-threshold", "admin", ["topicPolicies", "remove-compaction-threshold", ct])
    step("namespaces set-compaction-threshold", "admin", ["namespaces", "set-compaction-threshold", NS, "-t", "1G"])
    step("namespaces get-compaction-threshold", "admin", ["namespaces", "get-compaction-threshold", NS], out=r"^1073741824\s*$")
    step("namespaces remove-compaction-threshold", "admin", ["namespaces", "remove-compaction-threshold", NS])

    # --- schemas -----------------------------------------------------------
    st = f"persistent://{NS}/typed"
    v1 = {"type": "AVRO", "properties": {"owner": "tools"},
          "schema": json.dumps({"type": "record", "name": "Rec", "namespace": "t", "fields": [{"name": "id", "type": "int"}]})}
    v2 = dict(v1, schema=json.dumps({"type": "record", "name": "Rec", "namespace": "t",
                                     "fields": [{"name": "id", "type": "int"}, {"name": "x", "type": "string"}]}))
    f1, f2 = os.path.join(tmp, "v1.json"), os.path.join(tmp, "v2.json")
    with open(f1, "w") as f:
        json.dump(v1, f)
    with open(f2, "w") as f:
        json.dump(v2, f)
    step("schemas upload", "admin", ["schemas", "upload", "-f", f1, st])
    step("schemas get", "admin", ["schemas", "get", st],
         check=lambda so: expect(js(so)["version"] == 0 and js(so)["schemaInfo"]["type"] == "AVRO"
                                 and js(so)["schemaInfo"]["properties"] == {"owner": "tools"}, so))
    # The namespace strategy is BACKWARD: a new field without default cannot
    # read old data.
    step("schemas upload incompatible fails", "admin", ["schemas", "upload", "-f", f2, st], rc="nonzero",
         err=r"(?i)incompatible")
    step("schemas delete", "admin", ["schemas", "delete", st])
    step("schemas get after delete fails", "admin", ["schemas", "get", st], rc="nonzero", err=r"(?i)deleted|no schema|not found")
    step("schemas upload after delete", "admin", ["schemas", "upload", "-f", f2, st])
    step("schemas get the new version", "admin", ["schemas", "get", st],
         check=lambda so: expect(js(so)["version"] == 2, so))

    # --- non-persistent topic ---------------------------------------------
    np = f"non-persistent://{NS}/live"
    if ONLY.search("non-persistent"):
        cons = start("client", ["consume", "-s", "np-sub", "-n", "3", np])
        wait_admin("non-persistent: the consumer's topic is listed", ["topics", "list", NS], lambda so: np in so.split())
        step("non-persistent: pulsar-client produce", "client", ["produce", "-m", "n1,n2,n3", np], err=r"3 messages successfully produced")
        try:
            so, se = cons.communicate(timeout=TIMEOUT)
            ok = cons.returncode == 0 and re.findall(r"content:(\w+)", so) == ["n1", "n2", "n3"]
            results.append(("non-persistent: pulsar-client consume", ok, "" if ok else f"rc {cons.returncode}: {so[-300:]!r} {tail(se)!r}"))
            print(f"{'PASS' if ok else 'FAIL'} non-persistent: pulsar-client consume" + ("" if ok else f": rc {cons.returncode} {so[-300:]!r} {tail(se)!r}"), flush=True)
        except subprocess.TimeoutExpired:
            cons.kill()
            results.append(("non-persistent: pulsar-client consume", False, "timed out"))
            print("FAIL non-persistent: pulsar-client consume: timed out", flush=True)

    # --- errors and cleanup -------------------------------------------------
    step("namespaces delete non-empty fails", "admin", ["namespaces", "delete", NS], rc="nonzero", err=r"(?i)non.empty|not empty")
    step("topics terminate", "admin", ["topics", "terminate", T], out=r"terminated")
    step("pulsar-client produce to a terminated topic fails", "client", ["produce", "-m", "late", T], rc="nonzero",
         err=r"(?i)terminated")
    step("topics delete", "admin", ["topics", "delete", "-f", T])
    step("topics delete-partitioned-topic", "admin", ["topics", "delete-partitioned-topic", "-f", f"persistent://{NS}/parts"])
    step("namespaces delete", "admin", ["namespaces", "delete", "-f", NS])
    step("tenants delete", "admin", ["tenants", "delete", TENANT])
    step("tenants get deleted fails", "admin", ["tenants", "get", TENANT], rc="nonzero", err=r"(?i)does not exist|not found")

    runbook()

    passed = sum(1 for _, ok, _ in results if ok)
    print(f"tools: {passed}/{len(results)} commands passed", flush=True)
    sys.exit(0 if results and passed == len(results) else 1)


if __name__ == "__main__":
    main()
