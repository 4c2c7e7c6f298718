#!/usr/bin/env bash
# The OAuth2 / OpenID Connect interop run: a test OpenID Connect issuer
# (internal/testissuer/cmd/testissuer, its own process: discovery, JWKS,
# client credentials token endpoint on loopback http) and a `lakegate
# standalone` with TLS on the Pulsar port, HTTPS admin, the token and openid
# providers and authorization (docs/security.md, "OAuth2 and OpenID
# Connect"), against the Python client's AuthenticationOauth2
# (pulsar-client 3.13) and the Java client's and admin client's
# AuthenticationFactoryOAuth2.clientCredentials (pulsar-client 4.0.8): a
# client's token gives its subject as the role, grants apply to it, a client
# without grants, a token for another audience and a wrong client secret are
# refused. Prints each scenario and the summaries `python-oauth: N/M` and
# `java-oauth: N/M`; exits non-zero on any failure. KEEP=1 keeps the
# temporary directory.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
cd "$repo"
say() { echo "oauth-interop: $*" >&2; }

py="$("$repo/e2e/interop/python/setup.sh" | tail -1)"
cp="$("$repo/e2e/interop/java/setup.sh" | tail -1)"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/lakegate-oauth.XXXXXX")"
# The binaries go to the temporary directory (.cache/bin may be shared by
# several checkouts).
bin="$tmp/bin"
go build -o "$bin/lakegate" ./cmd/lakegate
go build -o "$bin/mkcerts" ./e2e/interop/secure/mkcerts
go build -o "$bin/testissuer" ./internal/testissuer/cmd/testissuer
# shellcheck source=../nodes.sh
source "$repo/e2e/interop/nodes.sh"
issuer_pid=
cleanup() {
  stop_lakegate >/dev/null 2>&1 || true
  [[ -n $issuer_pid ]] && kill "$issuer_pid" 2>/dev/null && wait "$issuer_pid" 2>/dev/null || true
  if [[ ${KEEP:-0} == 1 ]]; then say "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

certs="$tmp/certs"
"$bin/mkcerts" "$certs"
secret() { head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
# Clients of the issuer (id:secret:subject); the subject is the role.
keys="$tmp/oauth"
"$bin/testissuer" -dir "$keys" -audience lakegate \
  -client "orders-app:$(secret):orders" -client "stranger:$(secret):stranger" -client "ops:$(secret):admin" \
  >"$tmp/issuer.out" 2>"$tmp/issuer.log" &
issuer_pid=$!
issuer=
for _ in $(seq 1 100); do
  issuer=$(grep -m1 -oE 'url=[^ ]+' "$tmp/issuer.out" 2>/dev/null | sed 's/^url=//' || true)
  [[ -n $issuer ]] && break
  kill -0 "$issuer_pid" 2>/dev/null || { cat "$tmp/issuer.log" >&2; say "the issuer exited"; exit 1; }
  sleep 0.1
done
[[ -n $issuer ]] || { say "the issuer did not start"; exit 1; }
say "issuer $issuer"

# openIDRequireIssuersUseHttps=false: the test issuer serves http on loopback.
start_lakegate "$bin/lakegate" --pulsar-addr= --pulsar-tls-addr 127.0.0.1:0 --http-tls-addr 127.0.0.1:0 \
  --tls-cert-file "$certs/node.pem" --tls-key-file "$certs/node-key.pem" --tls-ca-file "$certs/ca.pem" \
  --auth-enabled --auth-providers token,openid --auth-token-secret-key "file://$certs/secret.key" --auth-super-user-roles admin \
  --auth-open-id-allowed-token-issuers "$issuer" --auth-open-id-allowed-audiences lakegate \
  --auth-open-id-require-issuers-use-https=false
[[ -n ${lg_pulsar_tls_url:-} && -n ${lg_https_url:-} ]] || { say "the node has no TLS listeners"; exit 1; }

# The grant goes to the role the issuer's tokens name (their subject).
curl -fsS --cacert "$certs/ca.pem" -H "Authorization: Bearer $(cat "$certs/admin.jwt")" -H 'Content-Type: application/json' \
  -X POST -d '["produce","consume"]' "$lg_https_url/admin/v2/namespaces/public/default/permissions/orders"

rc=0
LAKEGATE_TLS_URL="$lg_pulsar_tls_url" LAKEGATE_CERTS="$certs" LAKEGATE_ISSUER="$issuer" LAKEGATE_OAUTH_KEYS="$keys" \
  "$py" "$here/oauth.py" || rc=1
java -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -Dorg.slf4j.simpleLogger.logFile="$tmp/client.log" \
  -cp "$cp" lakegate.interop.OAuth "$lg_pulsar_tls_url" "$lg_https_url" "$certs" "$issuer" "$keys" || rc=1
stop_lakegate || { say "lakegate did not stop cleanly"; rc=1; }
if [[ $rc != 0 ]]; then
  say "failed; lakegate log, last lines:"
  tail -n 40 "${lg_logs[@]}" >&2
fi
exit $rc
