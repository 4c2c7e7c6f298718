#!/usr/bin/env bash
# The secured-node interop run: a `lakegate standalone` with TLS only on the
# Pulsar port (pulsar+ssl), HTTPS admin, token and mTLS authentication and
# authorization (docs/security.md), against the Python (pulsar-client 3.13)
# and Java (pulsar-client 4.0, pulsar-client-admin) clients: allowed and
# refused produce, consume and admin, expired and foreign-role tokens,
# client certificates, a plain client on the TLS port. Certificates and
# tokens are made fresh by ./mkcerts. Prints each scenario and the
# summaries `python-secure: N/M` and `java-secure: N/M`; exits non-zero on
# any failure. KEEP=1 keeps the temporary directory.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
cd "$repo"
say() { echo "secure-interop: $*" >&2; }

py="$("$repo/e2e/interop/python/setup.sh" | tail -1)"
cp="$("$repo/e2e/interop/java/setup.sh" | tail -1)"
mkdir -p .cache/bin
go build -o .cache/bin/lakegate ./cmd/lakegate
go build -o .cache/bin/mkcerts ./e2e/interop/secure/mkcerts

tmp="$(mktemp -d "${TMPDIR:-/tmp}/lakegate-secure.XXXXXX")"
# shellcheck source=../nodes.sh
source "$repo/e2e/interop/nodes.sh"
cleanup() {
  stop_lakegate >/dev/null 2>&1 || true
  if [[ ${KEEP:-0} == 1 ]]; then say "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

certs="$tmp/certs"
.cache/bin/mkcerts "$certs"
start_lakegate .cache/bin/lakegate --pulsar-addr= --pulsar-tls-addr 127.0.0.1:0 --http-tls-addr 127.0.0.1:0 \
  --tls-cert-file "$certs/node.pem" --tls-key-file "$certs/node-key.pem" --tls-ca-file "$certs/ca.pem" \
  --auth-enabled --auth-providers token,tls --auth-token-secret-key "file://$certs/secret.key" --auth-super-user-roles admin
[[ -n ${lg_pulsar_tls_url:-} && -n ${lg_https_url:-} ]] || { say "the node has no TLS listeners"; exit 1; }

# Grants, with the superuser's token over HTTPS.
grant() {
  curl -fsS --cacert "$certs/ca.pem" -H "Authorization: Bearer $(cat "$certs/admin.jwt")" -H 'Content-Type: application/json' \
    -X POST -d "$2" "$lg_https_url/admin/v2/namespaces/public/default/permissions/$1"
}
grant app '["produce","consume"]'
grant app-tls '["consume"]'

rc=0
LAKEGATE_TLS_URL="$lg_pulsar_tls_url" LAKEGATE_CERTS="$certs" "$py" "$here/secure.py" || rc=1
java -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -Dorg.slf4j.simpleLogger.logFile="$tmp/client.log" \
  -cp "$cp" lakegate.interop.Secure "$lg_pulsar_tls_url" "$lg_https_url" "$certs" || rc=1
stop_lakegate || { say "lakegate did not stop cleanly"; rc=1; }
if [[ $rc != 0 ]]; then
  say "failed; lakegate log, last lines:"
  tail -n 40 "${lg_logs[@]}" >&2
fi
exit $rc
