// Package metacat is an Apache Iceberg catalog kept in lakegate's metadata
// store (etcd): iceberg-go's catalog.Catalog over meta.Store. Every node of
// a cluster opens it on the same etcd, so every node serves the same
// catalog (icebergrest puts it on HTTP) and a commit is one etcd
// transaction comparing the table key's revision: commits are linearizable
// across the cluster. Table metadata JSON files, manifests and data stay in
// the object store, as Iceberg specifies; only the pointer to the current
// metadata file and the namespaces live in etcd. docs/iceberg-catalog.md is
// the format of the keys; this package writes exactly that.
//
// It imports meta and iceberg-go, nothing of the engine or the table layer.
package metacat
