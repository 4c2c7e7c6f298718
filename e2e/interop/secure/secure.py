"""Secured-node scenarios for the Pulsar Python client (pulsar-client, the
C++ core): TLS only, token and mTLS authentication, grants. Run by
e2e/interop/secure/run.sh, which starts the node and passes:

  LAKEGATE_TLS_URL   pulsar+ssl://host:port
  LAKEGATE_CERTS     the directory mkcerts wrote (ca.pem, *.jwt, app-tls*.pem)

Grants set up by the runner: public/default gives app produce+consume and
app-tls consume. Prints PASS/FAIL per scenario and `python-secure: N/M
scenarios passed`; exits 1 on any failure.
"""
import os
import sys
import time
import uuid

import pulsar

URL = os.environ["LAKEGATE_TLS_URL"]
CERTS = os.environ["LAKEGATE_CERTS"]
CA = os.path.join(CERTS, "ca.pem")
RUN = uuid.uuid4().hex[:8]
# The C++ core logs every reconnection at INFO: only errors, to stderr.
LOG = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)


def token(name):
    with open(os.path.join(CERTS, name + ".jwt")) as f:
        return f.read().strip()


def client(auth, url=URL, timeout=5):
    return pulsar.Client(url, authentication=auth, tls_trust_certs_file_path=CA,
                         operation_timeout_seconds=timeout, connection_timeout_ms=5000, logger=LOG)


def topic(name):
    return "persistent://public/default/pysec-%s-%s" % (RUN, name)


def refused(fn, *words):
    """fn must raise an error whose type or message names one of words."""
    try:
        fn()
    except Exception as e:  # the client's own exception classes
        text = type(e).__name__ + " " + str(e)
        if any(w in text for w in words):
            return
        raise AssertionError("refused, but not with %s: %s" % ("/".join(words), text))
    raise AssertionError("accepted; want a refusal (%s)" % "/".join(words))


def token_produce_consume():
    c = client(pulsar.AuthenticationToken(token("app")))
    try:
        t = topic("tok")
        cons = c.subscribe(t, "s", initial_position=pulsar.InitialPosition.Earliest)
        p = c.create_producer(t)
        for i in range(10):
            p.send(("m%d" % i).encode())
        got = set()
        for _ in range(10):
            m = cons.receive(timeout_millis=10000)
            got.add(m.data())
            cons.acknowledge(m)
        assert len(got) == 10, got
    finally:
        c.close()


def token_other_role_refused():
    c = client(pulsar.AuthenticationToken(token("other")), timeout=2)
    try:
        refused(lambda: c.create_producer(topic("other")), "Authorization", "authoriz")
    finally:
        c.close()


def token_expired_refused():
    c = client(pulsar.AuthenticationToken(token("expired")), timeout=2)
    try:
        refused(lambda: c.create_producer(topic("expired")), "Authentication", "authentic", "Connect", "Timeout")
    finally:
        c.close()


def mtls_consume_not_produce():
    c = client(pulsar.AuthenticationTLS(os.path.join(CERTS, "app-tls.pem"), os.path.join(CERTS, "app-tls-key.pem")), timeout=2)
    try:
        cons = c.subscribe(topic("mtls"), "s")
        cons.close()
        refused(lambda: c.create_producer(topic("mtls")), "Authorization", "authoriz")
    finally:
        c.close()


def plain_client_on_tls_port_fails():
    url = URL.replace("pulsar+ssl://", "pulsar://")
    c = pulsar.Client(url, operation_timeout_seconds=2, connection_timeout_ms=2000, logger=LOG)
    try:
        refused(lambda: c.create_producer(topic("plain")), "Connect", "Timeout", "Error")
    finally:
        c.close()


SCENARIOS = [token_produce_consume, token_other_role_refused, token_expired_refused,
             mtls_consume_not_produce, plain_client_on_tls_port_fails]

if __name__ == "__main__":
    passed = 0
    for s in SCENARIOS:
        start = time.time()
        try:
            s()
            print("PASS %s (%.1fs)" % (s.__name__, time.time() - start), flush=True)
            passed += 1
        except Exception as e:
            print("FAIL %s: %s" % (s.__name__, e), flush=True)
    print("python-secure: %d/%d scenarios passed" % (passed, len(SCENARIOS)), flush=True)
    # Past this point only interpreter teardown is left, where the C++ client
    # given a Python logger sometimes aborts (pulsar-client-python issue 256);
    # the results are printed, so the process ends without it.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0 if passed == len(SCENARIOS) else 1)
