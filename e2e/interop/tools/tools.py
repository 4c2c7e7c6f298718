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
    except (Failed, subprocess.TimeoutExpired, json.JSONDecodeError) as e:
        results.append((name, False, str(e)))
        print(f"FAIL {name}: {e}", flush=True)
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

    passed = sum(1 for _, ok, _ in results if ok)
    print(f"tools: {passed}/{len(results)} commands passed", flush=True)
    sys.exit(0 if results and passed == len(results) else 1)


if __name__ == "__main__":
    main()
