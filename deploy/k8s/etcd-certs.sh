#!/bin/sh
# Makes the TLS material of the etcd StatefulSet (etcd.yaml) and of the
# lakegate pods' etcd client, with a CA of its own: only holders of a
# certificate of THIS CA reach etcd, and whoever can write etcd owns the
# lakegate cluster (docs/security.md, "etcd") — never sign anything else
# with it, and keep ca.key offline.
#
#   deploy/k8s/etcd-certs.sh DIR [NAMESPACE]          # writes the files into DIR
#   deploy/k8s/etcd-certs.sh DIR [NAMESPACE] --apply  # and creates the Secrets with kubectl
#
# Secrets (namespace lakegate unless given):
#   etcd-tls           ca.crt, tls.crt, tls.key: the members' certificate, for
#                      clients (https://etcd-N.etcd:2379) and peers (:2380)
#   lakegate-etcd-tls  ca.crt, tls.crt, tls.key: the gateways' client certificate
#                      (common name "lakegate")
# Certificates last DAYS days (default 365); rerun and restart the pods to
# rotate (lakegate re-reads its client certificate when the files change).
set -eu

dir=${1:?usage: etcd-certs.sh DIR [NAMESPACE] [--apply]}
ns=${2:-lakegate}
apply=${3:-}
days=${DAYS:-365}
umask 077
mkdir -p "$dir"

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days "$days" \
  -subj "/CN=lakegate etcd CA" -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null

# Members: the headless Service etcd names them etcd-N.etcd (and the longer
# in-cluster forms); localhost for etcdctl inside the pod.
san="DNS:*.etcd,DNS:*.etcd.$ns,DNS:*.etcd.$ns.svc,DNS:*.etcd.$ns.svc.cluster.local,DNS:etcd,DNS:etcd.$ns.svc,DNS:localhost,IP:127.0.0.1"
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=etcd" \
  -keyout "$dir/member.key" -out "$dir/member.csr" 2>/dev/null
openssl x509 -req -in "$dir/member.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
  -days "$days" -out "$dir/member.crt" \
  -extfile /dev/stdin 2>/dev/null <<EOF
subjectAltName=$san
extendedKeyUsage=serverAuth,clientAuth
keyUsage=digitalSignature,keyEncipherment
EOF

openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=lakegate" \
  -keyout "$dir/lakegate.key" -out "$dir/lakegate.csr" 2>/dev/null
openssl x509 -req -in "$dir/lakegate.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
  -days "$days" -out "$dir/lakegate.crt" \
  -extfile /dev/stdin 2>/dev/null <<EOF
extendedKeyUsage=clientAuth
keyUsage=digitalSignature,keyEncipherment
EOF
rm -f "$dir"/*.csr "$dir/ca.srl"

echo "wrote $dir/{ca,member,lakegate}.{crt,key}"
if [ "$apply" = "--apply" ]; then
  kubectl -n "$ns" create secret generic etcd-tls \
    --from-file=ca.crt="$dir/ca.crt" --from-file=tls.crt="$dir/member.crt" --from-file=tls.key="$dir/member.key"
  kubectl -n "$ns" create secret generic lakegate-etcd-tls \
    --from-file=ca.crt="$dir/ca.crt" --from-file=tls.crt="$dir/lakegate.crt" --from-file=tls.key="$dir/lakegate.key"
else
  echo "create the Secrets (namespace $ns) with:"
  echo "  kubectl -n $ns create secret generic etcd-tls --from-file=ca.crt=$dir/ca.crt --from-file=tls.crt=$dir/member.crt --from-file=tls.key=$dir/member.key"
  echo "  kubectl -n $ns create secret generic lakegate-etcd-tls --from-file=ca.crt=$dir/ca.crt --from-file=tls.crt=$dir/lakegate.crt --from-file=tls.key=$dir/lakegate.key"
fi
