"""OAuth2 scenarios for the Pulsar Python client (pulsar-client, the C++
core): AuthenticationOauth2 with the client credentials flow against a test
OpenID Connect issuer, and a node with the openid provider. Run by
e2e/interop/oauth/run.sh, which starts both and passes:

  LAKEGATE_TLS_URL     pulsar+ssl://host:port
  LAKEGATE_CERTS       the directory mkcerts wrote (ca.pem)
  LAKEGATE_ISSUER      the issuer URL
  LAKEGATE_OAUTH_KEYS  the clients' credentials files (<id>.json)

The issuer's clients: orders-app (subject orders, which public/default
grants produce+consume), stranger (no grants). Prints PASS/FAIL per
scenario and `python-oauth: N/M scenarios passed`; exits 1 on any failure.
"""
import json
import os
import sys
import time
import uuid

import pulsar

URL = os.environ["LAKEGATE_TLS_URL"]
CA = os.path.join(os.environ["LAKEGATE_CERTS"], "ca.pem")
ISSUER = os.environ["LAKEGATE_ISSUER"]
KEYS = os.environ["LAKEGATE_OAUTH_KEYS"]
RUN = uuid.uuid4().hex[:8]
LOG = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)


def oauth2(client_id, audience="lakegate", key_file=None):
    return pulsar.AuthenticationOauth2(json.dumps({
        "issuer_url": ISSUER,
        "private_key": key_file or os.path.join(KEYS, client_id + ".json"),
        "audience": audience,
    }))


def client(auth, timeout=5):
    return pulsar.Client(URL, authentication=auth, tls_trust_certs_file_path=CA,
                         operation_timeout_seconds=timeout, connection_timeout_ms=5000, logger=LOG)


def topic(name):
    return "persistent://public/default/pyoauth-%s-%s" % (RUN, name)


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


def oauth2_produce_consume():
    c = client(oauth2("orders-app"))
    try:
        t = topic("orders")
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


def oauth2_role_without_grant_refused():
    c = client(oauth2("stranger"), timeout=3)
    try:
        refused(lambda: c.create_producer(topic("stranger")), "Authorization", "authoriz")
    finally:
        c.close()


def oauth2_other_audience_refused():
    c = client(oauth2("orders-app", audience="another-service"), timeout=3)
    try:
        refused(lambda: c.create_producer(topic("aud")), "Authentication", "authentic", "Connect", "Timeout")
    finally:
        c.close()


def oauth2_wrong_secret_refused():
    with open(os.path.join(KEYS, "orders-app.json")) as f:
        creds = json.load(f)
    creds["client_secret"] = "guess"
    bad = os.path.join(KEYS, "py-bad.json")
    with open(bad, "w") as f:
        json.dump(creds, f)
    c = client(oauth2("orders-app", key_file=bad), timeout=3)
    try:
        refused(lambda: c.create_producer(topic("bad")), "Authentication", "authentic", "Connect", "Timeout")
    finally:
        c.close()


SCENARIOS = [oauth2_produce_consume, oauth2_role_without_grant_refused, oauth2_other_audience_refused,
             oauth2_wrong_secret_refused]

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
    print("python-oauth: %d/%d scenarios passed" % (passed, len(SCENARIOS)), flush=True)
    # As in secure.py: skip interpreter teardown (pulsar-client-python
    # issue 256).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0 if passed == len(SCENARIOS) else 1)
