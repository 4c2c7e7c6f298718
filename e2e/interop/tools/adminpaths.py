#!/usr/bin/env python3
"""Pulsar's admin REST paths, line by line, against a running lakegate.

Two commands:

  adminpaths.py extract JAR > docs/pulsar-admin-paths.tsv
      Reads the JAX-RS annotations (@Path, @GET/@POST/@PUT/@DELETE) of the
      admin resource classes in Apache Pulsar's broker jar — the classes
      org.apache.pulsar.broker.admin.v2.* (mounted at /admin/v2) and .v3.*
      (mounted at /admin/v3) and the classes they inherit resource methods
      from (admin.impl.*Base; NonPersistentTopics extends PersistentTopics,
      so every persistent-topic path exists under /non-persistent too) — with `javap -v` (a JDK), and prints one line per
      method and path: group, HTTP method, path, the resource method
      (Class.method) and the type of its request body ("-" when it takes
      none). The jar is org.apache.pulsar:pulsar-broker of Maven Central:
        mvn dependency:copy -Dartifact=org.apache.pulsar:pulsar-broker:4.0.8 \\
            -DoutputDirectory=/tmp/pulsarbroker -Dtransitive=false
      Nothing is built or run from the jar; javap only reads it.

  adminpaths.py probe URL [TSV] > table.md
      Sends every path of TSV (default docs/pulsar-admin-paths.tsv) to the
      lakegate node whose HTTP listener is URL (http://127.0.0.1:PORT) and
      prints a markdown table per group: method, path, HTTP status, the
      reason lakegate gave (the body's "reason"), and the verdict:
        works        2xx, or an error about the sample input (a 404 for a
                     name the probe did not create, a 400/412 about the
                     probe's body) from a route lakegate serves
        refused      4xx/5xx from a route lakegate serves on purpose with a
                     reason (405, 412, 501: "does not apply", "not
                     supported", ...)
        unsupported  the catch-all's 404 "… is not an admin endpoint
                     lakegate serves" (admin/routes.go notAnEndpoint)
      The verdict is a first sorting; docs/compatibility.md says what each
      line means. Groups marked group-level in GROUP_LEVEL are probed with
      one path and print one line. Also writes the unsupported lines to
      /tmp/unsupported-admin-paths.txt (or $UNSUPPORTED_OUT).

      The probe changes the node: it creates tenant probe-t, namespaces
      public/default (if absent) and probe-t/probe-ns, topics
      public/default/probe, probe-p (2 partitions) and probe-term, and
      subscription probe-sub, then runs every GET, then PUT/POST, then the
      terminate, then the DELETEs (sub-resources first, then subscriptions,
      topics, the namespace probe-t/probe-ns and the tenant probe-t). Point
      it only at a throwaway node:
        go build -o /tmp/lgat ./cmd/lakegate
        /tmp/lgat standalone --data-dir "$(mktemp -d)" \\
            --pulsar-addr 127.0.0.1:0 --http-addr 127.0.0.1:0
        # the ready line names the HTTP address
        python3 e2e/interop/tools/adminpaths.py probe http://127.0.0.1:PORT

Standard library only.
"""

import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request

# Groups listed one line each in the doc: Pulsar services lakegate has no
# counterpart of (BookKeeper, the load manager's quotas, Pulsar Functions and
# connectors, packages, broker internals).
GROUP_LEVEL = {"bookies", "resource-quotas", "functions", "sinks", "sources", "sink", "source", "packages", "worker",
               "worker-stats", "broker-stats", "resourcegroups"}

HTTP = {"javax.ws.rs.GET": "GET", "javax.ws.rs.POST": "POST", "javax.ws.rs.PUT": "PUT",
        "javax.ws.rs.DELETE": "DELETE"}
# Parameter annotations that make a parameter something other than the body.
NOT_BODY = ("javax.ws.rs.PathParam", "javax.ws.rs.QueryParam", "javax.ws.rs.HeaderParam",
            "javax.ws.rs.container.Suspended", "javax.ws.rs.core.Context", "javax.ws.rs.FormParam",
            "org.glassfish.jersey.media.multipart.FormDataParam", "javax.ws.rs.CookieParam",
            "javax.ws.rs.BeanParam", "javax.ws.rs.MatrixParam")


# ---- extract ---------------------------------------------------------------

def javap(jar, cls):
    r = subprocess.run(["javap", "-v", "-p", "-cp", jar, cls], capture_output=True, text=True, check=True)
    return r.stdout


def parse_class(text):
    """(class path or None, superclass, [(name, paramTypes, [http], path, bodyType)])."""
    sup = re.search(r"super_class: #\d+\s+// (\S+)", text)
    sup = sup.group(1).replace("/", ".") if sup else ""
    cls_path = None
    m = re.search(r"\nRuntimeVisibleAnnotations:\n(.*?)(\n\S|\Z)", text, re.S)
    if m:
        pm = re.search(r'javax\.ws\.rs\.Path\(\s*value="([^"]*)"', m.group(1))
        cls_path = pm.group(1) if pm else None
    methods = []
    # A method's block: its header at two spaces of indentation up to the next.
    for mm in re.finditer(r"\n  (?:public |protected |private )?[^\n(]*?(\w+)\(([^)]*)\)[^\n]*;\n(.*?)(?=\n  \S|\n}\n)",
                          text, re.S):
        name, params, body = mm.group(1), mm.group(2), mm.group(3)
        ann = re.search(r"\n    RuntimeVisibleAnnotations:\n(.*?)(?=\n    \S|\Z)", body, re.S)
        if not ann:
            continue
        a = ann.group(1)
        verbs = [v for k, v in HTTP.items() if re.search(r"^\s+" + re.escape(k) + r"\s*$", a, re.M)]
        if not verbs:
            continue
        pm = re.search(r'javax\.ws\.rs\.Path\(\s*value="([^"]*)"', a)
        path = pm.group(1) if pm else ""
        types = split_params(params)
        body_type = "-"
        pa = re.search(r"\n    RuntimeVisibleParameterAnnotations:\n(.*?)(?=\n    \S|\Z)", body, re.S)
        annotated = {}
        if pa:
            for pb in re.finditer(r"parameter (\d+):\n(.*?)(?=\n      parameter \d+:|\Z)", pa.group(1), re.S):
                annotated[int(pb.group(1))] = pb.group(2)
        for i, t in enumerate(types):
            if not any(n in annotated.get(i, "") for n in NOT_BODY):
                body_type = t.split("<")[0].split(".")[-1]
                break
        methods.append((name, params, verbs, path, body_type))
    return cls_path, sup, methods


def split_params(params):
    """The parameter types of a javap method header, generics kept whole."""
    types, depth, cur = [], 0, ""
    for ch in params:
        depth += {"<": 1, ">": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            types.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        types.append(cur.strip())
    return types


def join(*parts):
    p = "/".join(s.strip("/") for s in parts if s.strip("/"))
    return "/" + p


def extract(jar):
    listing = subprocess.run(["unzip", "-Z1", jar], capture_output=True, text=True, check=True).stdout.split()
    rows = []
    for entry in sorted(listing):
        m = re.fullmatch(r"org/apache/pulsar/broker/admin/(v2|v3)/([A-Za-z]+)\.class", entry)
        if not m:
            continue
        version, simple = m.groups()
        cls = f"org.apache.pulsar.broker.admin.{version}.{simple}"
        cls_path, sup, methods = parse_class(javap(jar, cls))
        if cls_path is None:
            continue
        seen = {(n, p) for n, p, *_ in methods}
        # Methods inherited from *Base (and, for NonPersistentTopics, from
        # v2.PersistentTopics): JAX-RS serves them at this class's path.
        while re.match(r"org\.apache\.pulsar\.broker\.admin\.(impl|v2|v3)\.", sup):
            _, nxt, inherited = parse_class(javap(jar, sup))
            for meth in inherited:
                if (meth[0], meth[1]) not in seen:
                    methods.append(meth)
                    seen.add((meth[0], meth[1]))
            sup = nxt
        for name, _, verbs, path, body in methods:
            full = join(f"/admin/{version}", cls_path, path)
            group = full.split("/")[3]
            for v in verbs:
                rows.append((group, v, full, f"{simple}.{name}", body))
    # One line per method and path: Pulsar's Ext* classes add a second
    # resource method for the same path (another request media type).
    merged = {}
    for group, v, full, res, body in sorted(set(rows)):
        if (v, full) in merged:
            g, r, b = merged[(v, full)]
            merged[(v, full)] = (g, r + ", " + res, b if b != "-" else body)
        else:
            merged[(v, full)] = (group, res, body)
    order = {"GET": 0, "PUT": 1, "POST": 2, "DELETE": 3}
    rows = sorted(((g, v, full, r, b) for (v, full), (g, r, b) in merged.items()),
                  key=lambda r: (r[0], r[2], order[r[1]], r[3]))
    print("# group\tmethod\tpath\tresource\tbody  (adminpaths.py extract " + os.path.basename(jar) + ")")
    for r in rows:
        print("\t".join(r))


# ---- probe -----------------------------------------------------------------

TENANT, NS = "public", "default"
SCRATCH_TENANT, SCRATCH_NS = "probe-t", "probe-ns"
TOPIC, PTOPIC, TERM_TOPIC, SUB = "probe", "probe-p", "probe-term", "probe-sub"

# Sample values of path parameters, by name (a name followed by a regex,
# {topic: .*}, is matched by its name).
SAMPLES = {"tenant": TENANT, "property": TENANT, "namespace": NS, "topic": TOPIC, "subName": SUB,
           "role": "probe-role", "timestamp": "0", "messagePosition": "1", "ledgerId": "0", "entryId": "0",
           "numMessages": "1", "expireTimeInSeconds": "60", "bundle": "0x00000000_0xffffffff",
           "version": "0", "cluster": "standalone", "clusterName": "standalone", "policyName": "probe-policy",
           "domainName": "probe-domain", "broker": "127.0.0.1:8080", "brokerId": "127.0.0.1:8080",
           "destinationBroker": "127.0.0.1:8080", "key": "k", "propertyName": "k", "quota": "1",
           "backlogQuotaType": "destination_storage", "authMethodName": "token", "subscription": SUB,
           "subscriptionName": SUB + "2", "encodedTopic": TOPIC, "schemaVersion": "0", "operation": "lookup",
           "resourceGroup": "probe-rg", "functionName": "f", "sinkName": "s", "sourceName": "s",
           "instanceId": "0", "type": "function", "name": "n", "metricName": "m", "leaderBroker": "",
           "group": "probe-group", "configName": "probe", "configValue": "1", "allocator": "default",
           "timeout": "1", "value": "v", "coordinatorId": "0", "mostSigBits": "0", "leastSigBits": "0",
           "bookie": "127.0.0.1:3181", "resourcegroup": "probe-rg", "packageName": "p"}

# Notes on what lakegate's answer means, by regex over "METHOD path"
# (the path template); the first that matches is printed. Written from
# admin/*.go and docs/policies.md; the probe does not check them.
NOTES = [
    # transactions (/admin/v3; admin/transactions.go, docs/transactions.md "Admin REST")
    (r"GET /admin/v3/transactions/coordinators$", "Each coordinator and the pulsar:// URL of the node serving it (or that placement picks). Superusers."),
    (r"GET /admin/v3/transactions/coordinatorStats$", "From the metadata store, on any node: `state` (Ready while a node serves it, else None), `leastSigBits` (highest sequence kept), `lowWaterMark`, `ongoingTxnSize`; recover times 0. All by id, or `?coordinatorId=N`. Superusers."),
    (r"GET /admin/v3/transactions/transactionMetadata/", "`txnId`, `status` (OPEN, COMMITTING, COMMITTED, ABORTING, ABORTED), `openTimestamp`, `timeoutAt`, `owner`, `producedPartitions` (`startPosition` null: messages are staged until the commit), `ackedPartitions`. Superusers."),
    (r"GET /admin/v3/transactions/slowTransactions/", "The transactions not ended and open longer than the timeout (ms), by txnId, at most 1000 (the oldest). Superusers."),
    (r"POST /admin/v3/transactions/abortTransaction/", "Aborts the transaction from any node (204); 404 unknown, 409 committed. Superusers, as Pulsar."),
    (r"/admin/v3/transactions/transactionCoordinator/replicas$", "406 for a count not above the current one, as Pulsar; else 501: the count is `transactions.coordinators`. Superusers."),
    (r"/admin/v3/transactions/(coordinatorInternalStats|transactionBufferInternalStats|pendingAckInternalStats)/", "405, Pulsar's answer for a coordinator, buffer or pending-ack handle without a managed ledger: lakegate keeps them in the metadata store."),
    (r"GET /admin/v3/transactions/transactionInBufferStats/", "`aborted` once the transaction, which produced to the topic, is aborted; `startPosition` null. Superusers and tenant admins."),
    (r"GET /admin/v3/transactions/transactionBufferStats/", "On the topic's owner: `maxReadPosition` is the last entry (open transactions hold no reader back), `ongoingTxnSize` the open transactions producing to it. Superusers and tenant admins."),
    (r"GET /admin/v3/transactions/pendingAckStats/", "On the topic's owner: the transactions holding pending acks on the subscription. Superusers and tenant admins."),
    (r"GET /admin/v3/transactions/transactionInPendingAckStats/", "On the topic's owner: the position of the transaction's cumulative ack, or null. Superusers and tenant admins."),
    (r"GET /admin/v3/transactions/positionStatsInPendingAck/", "On the topic's owner: MarkDelete, PendingAck, NotInPendingAck or InvalidPosition (the ledger is the topic's log id). Superusers and tenant admins."),
    # non-persistent (first: the generic notes below are about persistent topics)
    (r"GET /admin/v2/non-persistent/\{tenant\}/\{namespace\}$", "The non-persistent topics with producers or consumers, from any node."),
    (r"GET /admin/v2/non-persistent/.*/partitions$", "Always 0 partitions: partitioned non-persistent topics are not supported."),
    (r"/non-persistent/", ""),
    # clusters, brokers
    (r"GET /admin/v2/clusters$", "One cluster, `standalone` (every node of a lakegate cluster is in it)."),
    (r"GET /admin/v2/clusters/\{cluster\}$", "`serviceUrl` and `brokerServiceUrl` only; other names 404."),
    (r"(PUT|POST|DELETE) /admin/v2/clusters/\{cluster\}$", "Clusters are not created or changed through the admin API: the one cluster is the set of nodes sharing an etcd and a store (docs/cluster.md)."),
    (r"/clusters/\{cluster\}/(failureDomains|namespaceIsolationPolicies)", "Failure domains and namespace isolation: not supported (placement is per partition, docs/cluster.md)."),
    (r"/clusters/\{cluster\}/(migrate|peers)", "Cluster migration and peer clusters (geo-replication): not supported."),
    (r"GET /admin/v2/brokers$", "The live nodes' admin addresses (host:port), as `brokers/{cluster}`."),
    (r"GET /admin/v2/brokers/\{cluster\}$", "The live nodes' admin addresses (host:port); other cluster names 404."),
    (r"GET /admin/v2/brokers/configuration$", "`[]`: no setting is dynamic."),
    (r"GET /admin/v2/brokers/configuration/runtime$", "The broker settings lakegate has an equivalent of, by Pulsar's names (`clusterName`, auto topic creation, default retention, `maxMessageSize` …)."),
    (r"/brokers/configuration/", "Dynamic configuration: not supported; settings are flags, environment and file (docs/configuration.md)."),
    (r"GET /admin/v2/brokers/health$", "Writes and reads a heartbeat; `ok` (text/plain); `topicVersion` V1 or V2."),
    (r"GET /admin/v2/brokers/ready$", "`ok` while the node serves, 503 once it shuts down."),
    (r"GET /admin/v2/brokers/leaderBroker$", "lakegate has no leader: the live node with the lowest id, the same answer on every node."),
    (r"/brokers/version$", "Not supported; `lakegate version` prints it."),
    (r"/brokers/shutdown$", "Not supported; SIGTERM hands the node's topics over and stops it (docs/cluster.md)."),
    (r"/brokers/backlog-quota-check$", "Not supported; backlog quotas are checked every `policies.checkInterval` by each topic's owner."),
    (r"/brokers/internal-configuration$", "Not supported (Pulsar's metadata and BookKeeper settings have no counterpart)."),
    (r"/ownedNamespaces$", "Not supported: ownership is per topic partition, not per namespace bundle."),
    # tenants
    (r"GET /admin/v2/tenants$", ""),
    (r"PUT /admin/v2/tenants/\{tenant\}$", "`allowedClusters` must name `standalone` (else 412); `adminRoles` are used by authorization (docs/security.md)."),
    (r"DELETE /admin/v2/tenants/\{tenant\}$", "409 while the tenant has namespaces."),
    # namespaces
    (r"PUT /admin/v2/namespaces/\{tenant\}/\{namespace\}$", "Creates the namespace. A Policies body is read and ignored: set each policy at its own path."),
    (r"GET /admin/v2/namespaces/\{tenant\}/\{namespace\}$", "Pulsar's Policies, with the policies lakegate keeps under Pulsar's field names."),
    (r"DELETE /admin/v2/namespaces/\{tenant\}/\{namespace\}$", "409 while it has topics; `force=true` deletes them."),
    (r"/namespaces/\{tenant\}/\{namespace\}/unload$", "Unloads every topic of the namespace wherever it is served."),
    (r"/\{bundle\}", "Bundles: not supported; lakegate places each topic partition on its own, there are no bundles to split, unload or clear."),
    (r"/(clearBacklog|unsubscribe)", "Every topic of the namespace, each at its owner."),
    (r"/bundles$", "Bundles: not supported (no bundles)."),
    (r"/(replication|replicatorDispatchRate|allowedClusters|replicatedSubscriptionStatus|shadowTopics|migration)$", "Geo-replication, replicated subscriptions and shadow topics: not supported."),
    (r"/antiAffinity", "Namespace anti-affinity: not supported (no bundles to place)."),
    (r"bookieAffinity", "Bookie affinity: not applicable (no BookKeeper), not served."),
    (r"/subscription/\{subName\}/properties$", "Subscription properties (admin/subprops.go)."),
    (r"/(properties|property)", "Namespace and topic properties: not supported (lakegate keeps its own `lakegate.*` properties; docs/policies.md)."),
    (r"/(subscriptionAuthMode|encryptionRequired)$", "Not supported."),
    (r"/(entryFilters)$", "Entry filters (broker plugins): not supported."),
    (r"/(dispatcherPauseOnAckStatePersistent|deduplicationSnapshotInterval|subscriptionTypesEnabled|autoSubscriptionCreation|maxTopicsPerNamespace|isAllowAutoUpdateSchema|schemaAutoUpdateCompatibilityStrategy|resourcegroup)", "Policy not supported yet."),
    (r"/scanOffloadedLedgers$", "Offload does not apply (the store is object storage); not served."),
    (r"/(offloadPolicies|offloadThreshold|offloadThresholdInSeconds|offloadDeletionLagMs|removeOffloadPolicies|offload)$", "Offload does not apply: lakegate stores in object storage already. GET answers Pulsar's unset values, DELETE succeeds, a set is refused."),
    (r"/retention$", "Honoured by each topic's owner every `policies.checkInterval` (docs/policies.md); no policy means no trim (Pulsar's default deletes acknowledged data)."),
    (r"/(messageTTL|backlogQuota|backlogQuotaMap)$", "Honoured by each topic's owner every `policies.checkInterval` (docs/policies.md)."),
    (r"/deduplication(Enabled)?$", "Honoured; a change while a producer or consumer is connected is refused (412)."),
    (r"/compactionThreshold$", "Honoured (docs/compaction.md)."),
    (r"/schemaCompatibilityStrategy$", "Honoured; FULL when unset."),
    (r"/schemaValidationEnforced$", "Honoured at PRODUCER."),
    (r"/autoTopicCreation$", "Honoured (broker/autocreate.go)."),
    (r"/persistence$", "Stored and answered, not applicable: no bookies. Pulsar's quorum check applies (412)."),
    (r"/inactiveTopicPolicies$", "Accepted with `deleteWhileInactive: false` only (lakegate never deletes idle topics); `true` refused (405)."),
    (r"/subscriptionExpirationTime$", "0 accepted; a time refused (405): not honoured yet."),
    (r"/delayedDelivery$", "Accepted with `active: true` and no maximum; otherwise refused (405)."),
    (r"/subscribeRate$", "Accepted when not limiting (≤ 0); a rate refused (405): not honoured yet."),
    (r"/(dispatchRate|subscriptionDispatchRate)$", "Honoured by the topic's owner (docs/policies.md, Limits); `relativeToPublishRate: true` refused (412)."),
    (r"/publishRate$", "Honoured by the topic's owner (docs/policies.md, Limits)."),
    (r"/(maxProducers|maxConsumers|maxConsumersPerSubscription|maxSubscriptionsPerTopic|maxUnackedMessages\w*|maxProducersPerTopic|maxConsumersPerTopic)$", "Honoured by the topic's owner at PRODUCER/SUBSCRIBE or dispatch (docs/policies.md, Limits); 0 is no limit, a negative count refused (412)."),
    (r"/maxMessageSize$", "Honoured at SEND, up to the node's `maxMessageSize`."),
    (r"grantPermissionsOnTopics|revokePermissionsOnTopics", "Batch grants: not supported; grant per topic."),
    (r"/permissions", "Stored; enforced when authorization is on (docs/security.md)."),
    (r"GET /admin/v2/namespaces/\{tenant\}/\{namespace\}/topics$", ""),
    # persistent topics
    (r"PUT /admin/v2/persistent/\{tenant\}/\{namespace\}/\{topic\}$", "Creates a non-partitioned topic; 409 if it exists."),
    (r"PUT .*/\{topic\}/partitions$", "Body: the partition count (or PartitionedTopicMetadata); 409 if it exists."),
    (r"POST .*/\{topic\}/partitions$", "Grows the partition count; a count not above the current one is refused (422)."),
    (r"/\{topic\}/(stats|partitioned-stats)$", "Pulsar's TopicStats: publishers, subscriptions, consumers, backlogs, rates."),
    (r"/\{topic\}/(internalStats|partitioned-internalStats)$", "Pulsar's PersistentTopicInternalStats shape: the topic's log is its one \"ledger\" (ledgerId = the log id), cursors are the subscriptions' (docs/message-ids.md)."),
    (r"/internal-info$", "Managed-ledger metadata: not applicable (no managed ledger); not served."),
    (r"/\{topic\}/ledger/\{ledgerId\}/entry/\{entryId\}$", "The entry's payload with X-Pulsar-* headers; the ledger id is the log's id (from a message id)."),
    (r"/examinemessage$", "The N-th entry from the first or the last; 405 on a partitioned topic."),
    (r"/position/\{messagePosition\}$", "Peek: the N-th message of the subscription's backlog."),
    (r"/messageid/\{timestamp\}$", "Not supported yet (seek by time works over the binary protocol)."),
    (r"/(backlog|backlogSize)$", "Offline backlog estimate and backlog size by position: not supported yet."),
    (r"/(trim|truncate)$", "Not supported yet (retention trims the stream)."),
    (r"/createMissedPartitions$", "Not supported yet."),
    (r"/terminate/partitions$", "Not supported yet; terminate each partition."),
    (r"/terminate$", "Fences the log: producers get TopicTerminatedError, consumers REACHED_END_OF_TOPIC."),
    (r"/\{topic\}/unload$", "Graceful: appends in flight answered, cursors persisted; `destinationBroker` (a member id) honoured."),
    (r"/compaction$", "Triggers compaction / answers its LongRunningProcessStatus."),
    (r"/lastMessageId$", ""),
    (r"/subscription/\{subscriptionName\}$", "Creates a durable subscription at the message id in the body (latest by default)."),
    (r"/(skip_all|skip/\{numMessages\}|expireMessages.*|analyzeBacklog)$", "The backlog runbook (admin/backlog.go, admin/runbook.go); on a partitioned topic sent to each partition's owner."),
    (r"/resetcursor", ""),
    (r"/\{subName\}/dispatchRate$", "Subscription-level dispatch rate: not supported yet (the topic's `subscriptionDispatchRate` is)."),
    (r"/policies$", "Not supported (remove each topic policy by its path)."),
    (r"DELETE /admin/v2/persistent/\{tenant\}/\{namespace\}/\{topic\}$", "Deletes the topic and its cursors; 412 while producers or consumers are attached, unless `force=true`."),
    (r"DELETE .*/\{topic\}/partitions$", "Deletes every partition."),
    # schemas
    (r"/schemas/.*/metadata$", "Not supported yet."),
    (r"POST /admin/v2/schemas/.*/schema$", "As Pulsar; an incompatible upload answers 409 (strategy: docs/policies.md)."),
    (r"DELETE /admin/v2/schemas/", "As Pulsar, `force` included."),
    (r"/schemas/", "As Pulsar."),
]


def note(method, path):
    key = f"{method} {path}"
    return next((text for rx, text in NOTES if re.search(rx, key)), "")


# Request bodies by the Java type of the resource method's body parameter.
BODIES = {
    "int": 60, "Integer": 60, "long": 60, "Long": 60, "boolean": True, "Boolean": True, "double": 1.0,
    "String": "probe", "List": [], "Set": ["consume"], "Map": {"k": "v"},
    "RetentionPolicies": {"retentionTimeInMinutes": 60, "retentionSizeInMB": 10},
    "BacklogQuotaImpl": {"limitSize": 1048576, "limitTime": -1, "policy": "producer_request_hold"},
    "BacklogQuota": {"limitSize": 1048576, "limitTime": -1, "policy": "producer_request_hold"},
    "DispatchRateImpl": {"dispatchThrottlingRateInMsg": 100, "dispatchThrottlingRateInByte": 1000,
                         "ratePeriodInSecond": 1, "relativeToPublishRate": False},
    "DispatchRate": {"dispatchThrottlingRateInMsg": 100, "dispatchThrottlingRateInByte": 1000,
                     "ratePeriodInSecond": 1},
    "PublishRate": {"publishThrottlingRateInMsg": 100, "publishThrottlingRateInByte": 1000},
    "SubscribeRate": {"subscribeThrottlingRatePerConsumer": 10, "ratePeriodInSecond": 30},
    "PersistencePolicies": {"bookkeeperEnsemble": 1, "bookkeeperWriteQuorum": 1, "bookkeeperAckQuorum": 1,
                            "managedLedgerMaxMarkDeleteRate": 0},
    "InactiveTopicPolicies": {"inactiveTopicDeleteMode": "delete_when_no_subscriptions",
                              "maxInactiveDurationSeconds": 600, "deleteWhileInactive": False},
    "DelayedDeliveryPolicies": {"active": True, "tickTime": 1000, "maxDeliveryDelayInMillis": 0},
    "AutoTopicCreationOverride": {"allowAutoTopicCreation": True, "topicType": "non-partitioned"},
    "AutoSubscriptionCreationOverride": {"allowAutoSubscriptionCreation": True},
    "OffloadPoliciesImpl": {"managedLedgerOffloadDriver": "aws-s3"},
    "OffloadPolicies": {"managedLedgerOffloadDriver": "aws-s3"},
    "SchemaCompatibilityStrategy": "FULL", "SubscriptionAuthMode": "None", "SubType": "Shared",
    "Policies": {"replication_clusters": ["standalone"]},
    "TenantInfoImpl": {"adminRoles": [], "allowedClusters": ["standalone"]},
    "TenantInfo": {"adminRoles": [], "allowedClusters": ["standalone"]},
    "ClusterDataImpl": {"serviceUrl": "http://127.0.0.1:8080"},
    "ClusterData": {"serviceUrl": "http://127.0.0.1:8080"},
    "PostSchemaPayload": {"type": "STRING", "schema": "", "properties": {}},
    "ResetCursorData": {"ledgerId": 0, "entryId": 0, "partitionIndex": -1, "isExcluded": False},
    "MessageIdImpl": {"ledgerId": 0, "entryId": 0, "partitionIndex": -1},
    "BookieAffinityGroupData": {"bookkeeperAffinityGroupPrimary": "g"},
    "BundlesData": {"boundaries": ["0x00000000", "0xffffffff"], "numBundles": 1},
    "EntryFilters": {"entryFilterNames": ""},
    "SchemaAutoUpdateCompatibilityStrategy": "Full", "PartitionedTopicMetadata": 2,
    "LinkedHashSet": ["standalone"], "Map": {"k": "v"},
}


def request(base, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except Exception as e:  # a node that hangs up: recorded, not fatal
        return 0, f"{type(e).__name__}: {e}"


def reason(text):
    try:
        v = json.loads(text)
    except ValueError:
        return text.strip()[:200]
    if isinstance(v, dict) and "reason" in v:
        return str(v["reason"])
    return ""


def fill(path, method, resource):
    """The concrete path of a template: sample names, and the fixture a
    line needs (the partitioned topic, the scratch tenant to delete)."""
    topic = TOPIC
    if re.search(r"/(partitions|partitioned-stats|partitioned-internalStats|createMissedPartitions)$", path):
        topic = PTOPIC
    if path.endswith("/terminate") or path.endswith("/terminate/partitions"):
        topic = PTOPIC if path.endswith("/partitions") else TERM_TOPIC
    tenant, ns = TENANT, NS
    if method == "DELETE" and re.fullmatch(r"/admin/v2/(tenants/\{tenant\}|namespaces/\{tenant\}/\{namespace\})", path):
        tenant, ns = SCRATCH_TENANT, SCRATCH_NS
    vals = dict(SAMPLES, tenant=tenant, property=tenant, namespace=ns, topic=topic, encodedTopic=topic)

    def sub(m):
        return vals.get(m.group(1).split(":")[0].strip(), "x")
    return re.sub(r"\{([^}]*)\}", sub, path)


def verdict(status, why):
    if status == 404 and "is not an admin endpoint lakegate serves" in why:
        return "unsupported"
    if 200 <= status < 300:
        return "works"
    if status in (405, 501) or (status == 412 and "not enforced" in why):
        return "refused"
    if status in (404, 409, 412):
        return "works (sample)"  # the route answered about the probe's names or body
    return "error"


def phase(method, path):
    """Order: reads, then writes, the terminate, then the deletes —
    sub-resources first, whole subscriptions, topics, namespace, tenant."""
    if method == "GET":
        return 0
    if method in ("PUT", "POST"):
        if "/unsubscribe/" in path:
            return 4.5  # after the subscription's own DELETE
        return 2 if re.search(r"/(terminate|clearBacklog)", path) else 1
    if re.search(r"/subscription/\{[^}]*\}$", path):
        return 4
    if re.fullmatch(r"/admin/v2/(non-)?persistent/\{[^}]*\}/\{[^}]*\}/\{[^}]*\}(/partitions)?", path):
        return 5
    if path.startswith("/admin/v2/namespaces/") and path.count("/") == 5:
        return 6
    if path.startswith("/admin/v2/tenants/"):
        return 7
    return 3


def load(tsv):
    rows = []
    with open(tsv) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            group, method, path, resource, body = line.rstrip("\n").split("\t")
            rows.append((group, method, path, resource, body))
    return rows


def setup(base):
    """The fixtures; their answers are printed on stderr, not judged."""
    steps = [
        ("PUT", f"/admin/v2/tenants/{SCRATCH_TENANT}", BODIES["TenantInfo"]),
        ("PUT", f"/admin/v2/namespaces/{SCRATCH_TENANT}/{SCRATCH_NS}", None),
        ("PUT", f"/admin/v2/namespaces/{TENANT}/{NS}", None),
        ("PUT", f"/admin/v2/persistent/{TENANT}/{NS}/{TOPIC}", None),
        ("PUT", f"/admin/v2/persistent/{TENANT}/{NS}/{TERM_TOPIC}", None),
        ("PUT", f"/admin/v2/persistent/{TENANT}/{NS}/{PTOPIC}/partitions", 2),
        ("PUT", f"/admin/v2/persistent/{TENANT}/{NS}/{TOPIC}/subscription/{SUB}", None),
        ("POST", f"/admin/v2/schemas/{TENANT}/{NS}/{TOPIC}/schema", BODIES["PostSchemaPayload"]),
    ]
    for method, path, body in steps:
        st, text = request(base, method, path, body)
        print(f"setup: {method} {path}: {st} {reason(text)}", file=sys.stderr)
    # Message ids in bodies name the probe topic's ledger (its log id).
    st, text = request(base, "GET", f"/admin/v2/persistent/{TENANT}/{NS}/{TOPIC}/lastMessageId")
    try:
        ledger = json.loads(text)["ledgerId"]
    except (ValueError, KeyError, TypeError):
        ledger = 0
    for k in ("ResetCursorData", "MessageIdImpl"):
        BODIES[k] = dict(BODIES[k], ledgerId=ledger)


def short(why):
    """A reason without the request's own path in front."""
    return re.sub(r"^((GET|PUT|POST|DELETE) )?/admin/\S+: ", "", why)


def cell(s):
    return s.replace("|", "\\|").replace("\n", " ")


def probe(base, tsv):
    rows = load(tsv)
    setup(base)
    detailed = [r for r in rows if r[0] not in GROUP_LEVEL]
    results = {}
    for group, method, path, resource, body in sorted(detailed, key=lambda r: phase(r[1], r[2])):
        b = None
        if method in ("PUT", "POST"):
            b = BODIES.get(body) if body != "-" else None
            if body != "-" and b is None:
                b = {}
        concrete = fill(path, method, resource)
        if method == "POST" and body == "-" and path.endswith("/{topic}/messageTTL"):
            concrete += "?messageTTL=60"  # Pulsar's topic TTL is a query parameter
        st, text = request(base, method, concrete, b)
        results[(method, path, resource)] = (st, reason(text))
    # One line per group-level group: its first path, as sent.
    for group in sorted({r[0] for r in rows if r[0] in GROUP_LEVEL}):
        mine = [r for r in rows if r[0] == group]
        first = next((r for r in mine if r[1] == "GET"), mine[0])
        st, text = request(base, first[1], fill(first[2], first[1], first[3]), None if first[1] == "GET" else {})
        results[("*", group, "")] = (st, reason(text), len(mine), first)

    unsupported = []
    counts = {}
    current = None
    for group, method, path, resource, body in rows:
        if group in GROUP_LEVEL:
            continue
        if group != current:
            current = group
            print(f"\n### {group}\n")
            print("| Method | Path | lakegate | Status | What lakegate answers |")
            print("|---|---|---|---|---|")
        st, why = results[(method, path, resource)]
        v = verdict(st, why)
        counts[v] = counts.get(v, 0) + 1
        if v == "unsupported":
            unsupported.append(f"{method} {path}")
        text = note(method, path)
        if v == "refused" and why:
            text = (text + " " if text else "") + f"Reason: \"{cell(short(why))}\"."
        elif v == "works (sample)" and why:
            text = (text + " " if text else "") + f"(Probe: \"{cell(short(why))}\".)"
        label = "works" if v.startswith("works") else v
        print(f"| {method} | `{path.removeprefix('/admin/v2')}` | {label} | {st} | {cell(text)} |")
    print("\n### Services lakegate does not have (one line per group)\n")
    print("| Group | Paths | Probed | Status | lakegate |")
    print("|---|---|---|---|---|")
    for key, val in sorted(results.items()):
        if key[0] != "*":
            continue
        st, why, n, first = val
        v = verdict(st, why)
        prefix = "/".join(first[2].split("/")[:4])
        counts["group " + v] = counts.get("group " + v, 0) + 1
        if v == "unsupported":
            unsupported.append(f"{prefix}/... ({n} paths)")
        print(f"| {prefix}/… | {n} | {first[1]} `{first[2]}` | {st} | {v} |")
    print(f"\ncounts: {sorted(counts.items())}", file=sys.stderr)
    out = os.environ.get("UNSUPPORTED_OUT", "/tmp/unsupported-admin-paths.txt")
    with open(out, "w") as f:
        f.write("\n".join(unsupported) + "\n")
    print(f"\n{len(unsupported)} unsupported lines written to {out}", file=sys.stderr)


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "extract":
        extract(sys.argv[2])
    elif len(sys.argv) >= 3 and sys.argv[1] == "probe":
        here = os.path.dirname(os.path.abspath(__file__))
        tsv = sys.argv[3] if len(sys.argv) > 3 else os.path.join(here, "../../../docs/pulsar-admin-paths.tsv")
        probe(sys.argv[2].rstrip("/"), tsv)
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
