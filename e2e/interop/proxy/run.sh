#!/usr/bin/env bash
# Apache Pulsar's own proxy (pulsar-proxy 4.0.8 from the Maven Central jars:
# setup.sh) in front of lakegate, as Pulsar operators deploy it: a
# three-node lakegate cluster (LAKEGATE_NODES, ../nodes.sh) with TLS-only
# Pulsar listeners, token authentication and authorization, and
# `auth.proxyRoles: proxy`; pulsar-proxy authenticates clients with the same
# token key, connects to lakegate over TLS as role proxy (its own token) and
# forwards each client's token (forwardAuthorizationCredentials), so that
# lakegate authorizes the client — and verifies its token — as original
# principal. Apache Pulsar's Java client (ProxyClient.java) produces and
# consumes through the proxy with a token that has grants, and is refused
# with one that has none, or an expired one; admin requests through the
# proxy's HTTP port are allowed or refused (403) the same way. Prints each
# scenario and `pulsar-proxy: N/M scenarios passed`; exits non-zero on any
# failure. About two minutes (JVM starts; the refused client retries until
# its operation timeout). KEEP=1 keeps the temporary directory.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
cd "$repo"
say() { echo "proxy-interop: $*" >&2; }
export LAKEGATE_NODES="${LAKEGATE_NODES:-3}"

cp="$("$here/setup.sh" | tail -1)"
mkdir -p .cache/bin
go build -o .cache/bin/lakegate ./cmd/lakegate
go build -o .cache/bin/mkcerts ./e2e/interop/secure/mkcerts

tmp="$(mktemp -d "${TMPDIR:-/tmp}/lakegate-proxy.XXXXXX")"
proxy_pid=
# shellcheck source=../nodes.sh
source "$repo/e2e/interop/nodes.sh"
cleanup() {
  if [[ -n $proxy_pid ]]; then kill "$proxy_pid" 2>/dev/null || true; wait "$proxy_pid" 2>/dev/null || true; fi
  stop_lakegate >/dev/null 2>&1 || true
  if [[ ${KEEP:-0} == 1 ]]; then say "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

certs="$tmp/certs"
.cache/bin/mkcerts "$certs"
.cache/bin/lakegate token create --secret-key "file://$certs/secret.key" --subject proxy >"$certs/proxy.jwt"
start_lakegate .cache/bin/lakegate --pulsar-addr= --pulsar-tls-addr 127.0.0.1:0 --http-tls-addr 127.0.0.1:0 \
  --tls-cert-file "$certs/node.pem" --tls-key-file "$certs/node-key.pem" --tls-ca-file "$certs/ca.pem" \
  --auth-enabled --auth-token-secret-key "file://$certs/secret.key" --auth-super-user-roles admin \
  --auth-proxy-roles proxy
[[ -n ${lg_pulsar_tls_url:-} && -n ${lg_https_url:-} ]] || { say "the nodes have no TLS listeners"; exit 1; }
broker_tls="${lg_pulsar_tls_url%%,*}" # the proxy looks topics up at one node; lookups send it to the owners

admin() { # METHOD PATH [BODY]
  curl -fsS --cacert "$certs/ca.pem" -H "Authorization: Bearer $(cat "$certs/admin.jwt")" -H 'Content-Type: application/json' \
    -X "$1" ${3:+-d "$3"} "$lg_https_url/admin/v2/$2"
}
# Pulsar's rule, which lakegate follows: a proxied request needs both the
# proxy's role and the client's to be allowed.
admin POST namespaces/public/default/permissions/app '["produce","consume"]'
admin POST namespaces/public/default/permissions/proxy '["produce","consume"]'
admin PUT persistent/public/default/proxied-p/partitions 3

ports=$(python3 -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1",0)) for x in s]
print(" ".join(str(x.getsockname()[1]) for x in s))')
proxy_port=${ports% *} proxy_web_port=${ports#* }
cat >"$tmp/proxy.conf" <<CONF
clusterName=standalone
bindAddress=127.0.0.1
advertisedAddress=127.0.0.1
servicePort=$proxy_port
webServicePort=$proxy_web_port
brokerServiceURLTLS=$broker_tls
brokerWebServiceURLTLS=$lg_https_url
tlsEnabledWithBroker=true
brokerClientTrustCertsFilePath=$certs/ca.pem
authenticationEnabled=true
authenticationProviders=org.apache.pulsar.broker.authentication.AuthenticationProviderToken
tokenSecretKey=file://$certs/secret.key
authorizationEnabled=false
brokerClientAuthenticationPlugin=org.apache.pulsar.client.impl.auth.AuthenticationToken
brokerClientAuthenticationParameters=file://$certs/proxy.jwt
forwardAuthorizationCredentials=true
# The proxy relays only to brokers on these ports (default 6650,6651); the
# nodes here listen on free ports.
brokerProxyAllowedTargetPorts=*
# pulsar-proxy 4.0.8 with tlsEnabledWithBroker and its default zero-copy
# mode hands the broker's TLS records to a plain client undecrypted (the
# Java client fails with TooLongFrameException, frame length 386073348 =
# 0x17030304, a TLS record header): copy through the JVM instead.
proxyZeroCopyModeEnabled=false
CONF
cat >"$tmp/log4j2.xml" <<XML
<Configuration status="warn">
  <Appenders><File name="f" fileName="$tmp/proxy.log"><PatternLayout pattern="%d %p %c{1} %m%n"/></File></Appenders>
  <Loggers><Root level="info"><AppenderRef ref="f"/></Root></Loggers>
</Configuration>
XML
java -Xmx512m -Dlog4j.configurationFile="$tmp/log4j2.xml" -Dpulsar.log.dir="$tmp" \
  --add-opens java.base/java.io=ALL-UNNAMED --add-opens java.base/java.lang=ALL-UNNAMED \
  --add-opens java.base/java.util=ALL-UNNAMED --add-opens java.base/sun.net=ALL-UNNAMED \
  --add-opens java.base/jdk.internal.misc=ALL-UNNAMED \
  -cp "$cp" org.apache.pulsar.proxy.server.ProxyServiceStarter -c "$tmp/proxy.conf" >"$tmp/proxy.out" 2>&1 &
proxy_pid=$!
for _ in $(seq 1 600); do
  (exec 3<>"/dev/tcp/127.0.0.1/$proxy_port") 2>/dev/null && break
  kill -0 "$proxy_pid" 2>/dev/null || { tail -n 40 "$tmp/proxy.out" "$tmp/proxy.log" >&2 || true; say "pulsar-proxy exited"; exit 1; }
  sleep 0.1
done
(exec 3<>"/dev/tcp/127.0.0.1/$proxy_port") 2>/dev/null || { say "pulsar-proxy not listening after 60 s"; exit 1; }
say "pulsar-proxy at pulsar://127.0.0.1:$proxy_port in front of $broker_tls"

rc=0
java -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp "$cp" "$here/ProxyClient.java" "pulsar://127.0.0.1:$proxy_port" "$certs" \
  persistent://public/default/proxied persistent://public/default/proxied-p 2>"$tmp/client.err" || rc=1
# Admin requests through the proxy's HTTP port: it authenticates the
# client, then calls lakegate as role proxy naming the client in
# X-Original-Principal; lakegate authorizes both.
web() { # TOKEN-FILE → HTTP status of the topic's stats through the proxy
  curl -sS -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $(cat "$certs/$1")" \
    "http://127.0.0.1:$proxy_web_port/admin/v2/persistent/public/default/proxied/stats"
}
for c in "app.jwt 200" "other.jwt 403"; do
  set -- $c
  got=$(web "$1")
  if [[ $got == "$2" ]]; then echo "PASS admin through pulsar-proxy with $1: HTTP $got"; else echo "FAIL admin through pulsar-proxy with $1: HTTP $got, want $2"; rc=1; fi
done
if [[ $rc == 0 ]] && ! grep -qh 'original_principal=app' "${lg_logs[@]}"; then
  say "lakegate logged no connection with original_principal=app"
  rc=1
fi
stop_lakegate || { say "lakegate did not stop cleanly"; rc=1; }
if [[ $rc != 0 ]]; then
  say "failed; client stderr, pulsar-proxy and lakegate logs, last lines:"
  tail -n 20 "$tmp/client.err" "$tmp/proxy.out" "$tmp/proxy.log" >&2 || true
  tail -n 40 "${lg_logs[@]}" >&2
fi
exit $rc
