#!/usr/bin/env python3
"""Readiness probe for a Kafka listener (Apache Kafka or lakegate), stdlib only.

Usage:
  probe.py wait BOOTSTRAP [SECONDS [PID]]
                                      poll until every address of BOOTSTRAP
                                      (host:port[,host:port...]) answers an
                                      ApiVersions v0 and a Metadata request
                                      listing at least one broker and a
                                      controller id (default bound 60 s);
                                      exit 1 if not within the bound, or as
                                      soon as process PID (the server) is gone
  probe.py apiversions HOST:PORT      print the API keys and version ranges the
                                      server advertises (ApiVersions v0)

Wire format by hand (the smallest part of the protocol, so the probe needs no
client library): request header v1 (api_key, api_version, correlation_id,
client_id), ApiVersions v0 (empty body), Metadata v4 (topics = [] so no topic
is named, allow_auto_topic_creation = false). Metadata v4 is used when the
server's range includes it, else the probe says so and fails. Progress to
stderr; `wait` prints nothing on stdout.
"""
import os
import socket
import struct
import sys
import time

API_NAMES = {
    0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit",
    9: "OffsetFetch", 10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat",
    13: "LeaveGroup", 14: "SyncGroup", 15: "DescribeGroups", 16: "ListGroups",
    17: "SaslHandshake", 18: "ApiVersions", 19: "CreateTopics", 20: "DeleteTopics",
    21: "DeleteRecords", 22: "InitProducerId", 23: "OffsetForLeaderEpoch",
    24: "AddPartitionsToTxn", 25: "AddOffsetsToTxn", 26: "EndTxn", 27: "WriteTxnMarkers",
    28: "TxnOffsetCommit", 29: "DescribeAcls", 30: "CreateAcls", 31: "DeleteAcls",
    32: "DescribeConfigs", 33: "AlterConfigs", 34: "AlterReplicaLogDirs",
    35: "DescribeLogDirs", 36: "SaslAuthenticate", 37: "CreatePartitions",
    38: "CreateDelegationToken", 39: "RenewDelegationToken", 40: "ExpireDelegationToken",
    41: "DescribeDelegationToken", 42: "DeleteGroups", 43: "ElectLeaders",
    44: "IncrementalAlterConfigs", 45: "AlterPartitionReassignments",
    46: "ListPartitionReassignments", 47: "OffsetDelete", 48: "DescribeClientQuotas",
    49: "AlterClientQuotas", 50: "DescribeUserScramCredentials",
    51: "AlterUserScramCredentials", 55: "DescribeQuorum", 57: "UpdateFeatures",
    60: "DescribeCluster", 61: "DescribeProducers", 64: "UnregisterBroker",
    65: "DescribeTransactions", 66: "ListTransactions", 68: "ConsumerGroupHeartbeat",
    69: "ConsumerGroupDescribe", 71: "GetTelemetrySubscriptions", 72: "PushTelemetry",
    74: "ListConfigResources", 75: "DescribeTopicPartitions", 76: "ShareGroupHeartbeat",
    77: "ShareGroupDescribe", 78: "ShareFetch", 79: "ShareAcknowledge",
    80: "AddRaftVoter", 81: "RemoveRaftVoter", 83: "InitializeShareGroupState",
    84: "ReadShareGroupState", 85: "WriteShareGroupState", 86: "DeleteShareGroupState",
    87: "ReadShareGroupStateSummary", 88: "StreamsGroupHeartbeat", 89: "StreamsGroupDescribe",
    90: "DescribeShareGroupOffsets", 91: "AlterShareGroupOffsets", 92: "DeleteShareGroupOffsets",
}


def say(msg):
    print(f"kafka probe: {msg}", file=sys.stderr, flush=True)


class Conn:
    def __init__(self, addr, timeout=5.0):
        host, _, port = addr.rpartition(":")
        self.sock = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
        self.corr = 0

    def close(self):
        self.sock.close()

    def _recv(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("connection closed by the server")
            buf += chunk
        return buf

    def call(self, api_key, version, body):
        self.corr += 1
        client = b"lakegate-kafka-probe"
        header = struct.pack(">hhih", api_key, version, self.corr, len(client)) + client
        msg = header + body
        self.sock.sendall(struct.pack(">i", len(msg)) + msg)
        (size,) = struct.unpack(">i", self._recv(4))
        resp = self._recv(size)
        (corr,) = struct.unpack(">i", resp[:4])
        if corr != self.corr:
            raise ValueError(f"correlation id {corr}, want {self.corr}")
        return resp[4:]


def api_versions(conn):
    """ApiVersions v0: {api_key: (min, max)}; raises on an error code."""
    r = conn.call(18, 0, b"")
    err, n = struct.unpack(">hi", r[:6])
    if err != 0:
        raise ValueError(f"ApiVersions error code {err}")
    out, off = {}, 6
    for _ in range(n):
        k, lo, hi = struct.unpack(">hhh", r[off:off + 6])
        out[k] = (lo, hi)
        off += 6
    return out


def read_str(r, off):
    (n,) = struct.unpack(">h", r[off:off + 2])
    off += 2
    if n < 0:
        return None, off
    return r[off:off + n].decode(), off + n


def metadata_v4(conn):
    """Metadata v4 naming no topic: (brokers [(id, host, port)], cluster_id, controller_id)."""
    r = conn.call(3, 4, struct.pack(">ib", 0, 0))
    off = 4  # throttle_time_ms
    (n,) = struct.unpack(">i", r[off:off + 4])
    off += 4
    brokers = []
    for _ in range(n):
        (node,) = struct.unpack(">i", r[off:off + 4])
        host, off = read_str(r, off + 4)
        (port,) = struct.unpack(">i", r[off:off + 4])
        _rack, off = read_str(r, off + 4)
        brokers.append((node, host, port))
    cluster, off = read_str(r, off)
    (controller,) = struct.unpack(">i", r[off:off + 4])
    return brokers, cluster, controller


def check(addr):
    """None when addr is ready, else the reason it is not."""
    try:
        conn = Conn(addr, timeout=3.0)
    except OSError as e:
        return f"connect: {e}"
    try:
        versions = api_versions(conn)
        lo, hi = versions.get(3, (None, None))
        if lo is None or not lo <= 4 <= hi:
            return f"Metadata v4 not in the advertised range {lo}..{hi}"
        brokers, cluster, controller = metadata_v4(conn)
        if not brokers:
            return "Metadata lists no broker yet"
        if controller < 0:
            return "Metadata names no controller yet"
        return None
    except (OSError, ValueError, struct.error) as e:
        return f"{type(e).__name__}: {e}"
    finally:
        conn.close()


def alive(pid):
    """False once process pid is gone or a zombie (exited, not yet reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait(bootstrap, bound, pid=None):
    deadline = time.monotonic() + bound
    for addr in bootstrap.split(","):
        while True:
            why = check(addr)
            if why is None:
                break
            if pid is not None and not alive(pid):
                say(f"server process {pid} exited before {addr} was ready ({why})")
                return 1
            if time.monotonic() > deadline:
                say(f"{addr} not ready after {bound:.0f} s: {why}")
                return 1
            time.sleep(0.1)
    say(f"{bootstrap} ready")
    return 0


def main(argv):
    if len(argv) >= 3 and argv[1] == "wait":
        return wait(argv[2], float(argv[3]) if len(argv) > 3 else 60.0,
                    int(argv[4]) if len(argv) > 4 else None)
    if len(argv) == 3 and argv[1] == "apiversions":
        conn = Conn(argv[2])
        try:
            for k, (lo, hi) in sorted(api_versions(conn).items()):
                print(f"{k}\t{API_NAMES.get(k, '?')}\t{lo}..{hi}")
        finally:
            conn.close()
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
