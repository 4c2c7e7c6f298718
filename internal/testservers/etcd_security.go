package testservers

// EtcdSecurity secures a cluster's client side (the members reach each
// other over plain HTTP on loopback).
type EtcdSecurity struct {
	// TLS serves the client URLs over https with a certificate of a CA made
	// for the cluster (EtcdCluster.Certs).
	TLS bool
	// ClientCertAuth requires a client certificate of that CA from every
	// client (etcd's --client-cert-auth). Needs TLS.
	ClientCertAuth bool
	// RootPassword, when set, turns etcd's authentication on once the
	// cluster is healthy: user root with this password (and role root),
	// and Users. Clients then need a user and password (or, with
	// ClientCertAuth, a certificate whose common name is a user).
	RootPassword string
	Users        []EtcdUser
	// CAFile, MemberCertFile and MemberKeyFile, when set, are the TLS
	// material instead of a CA made for the cluster (EtcdCluster.Certs is
	// then nil): e.g. what deploy/k8s/etcd-certs.sh makes. The member
	// certificate must be valid for 127.0.0.1 and for client
	// authentication too (the helper presents it as a client).
	CAFile, MemberCertFile, MemberKeyFile string
}

// EtcdUser is a user of a cluster with authentication on, with a role of
// its own name that may read and write the keys under Prefix (all keys
// when Prefix is empty).
type EtcdUser struct {
	Name, Password, Prefix string
}
