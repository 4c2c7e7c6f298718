// Package meta is lakegate's metadata-store boundary — the ground floor
// that the engine, the stream catalog and the table layer use: a small,
// linearizable key-value interface (Store) with etcd's revision model,
// multi-key compare-and-swap transactions and prefix watches.
//
// What it owns:
//
//   - The Store contract (store.go) and its sentinel errors.
//   - Etcd: Store on go.etcd.io/etcd/client/v3, for embedded and external
//     clusters, and the mapping of etcd/gRPC errors to the sentinels.
//   - Embedded: a single-member etcd server run in-process (standalone mode
//     and tests), with the limits the engine needs raised
//     (docs/metadata.md). Its client calls the member's request handlers
//     in process (etcd's v3client), without gRPC or a socket; other
//     processes reach the member on its client URL.
//   - Mem: an in-memory Store for unit tests, with fault injection (lost
//     requests, lost replies) for the engine's property tests.
//   - metatest: the acceptance suite every Store must pass, and a helper
//     that starts an embedded etcd for a test.
//
// What it must not touch:
//
//   - Key layout and value encodings. Callers own them (docs/index-format.md,
//     docs/catalog.md); this package never interprets a key beyond byte
//     order and prefixes, and never invents keys of its own.
//   - Retries of failed compares: a Txn either applies or reports ok=false;
//     re-reading and re-deciding is the caller's business. Txns are never
//     retried here either, because their outcome after ErrUnavailable is
//     unknown and only the caller knows how to check it.
//   - Elections: the engine is leaderless. Leases (Grant, KeepAlive,
//     Revoke; PutWithLease) carry cluster sessions and topic ownership
//     (engine/membership.go, docs/cluster.md).
//
// Revisions follow etcd exactly (see Store), so code tested on Mem behaves
// the same on etcd. A reader that must not miss changes reads the current
// revision R (a Txn with no cmps and no ops), reads its keys, and watches
// from R; a watch channel that closes means "re-read and watch again".
//
// Files:
//
//	store.go      the Store contract: KV, Cmp, Op, the sentinel errors
//	check.go      the request checks of etcd's server (op count, request
//	              size, keys written twice) applied by Mem and Etcd alike
//	etcd.go       Etcd: the Store over clientv3; Dial to an external
//	              cluster (TLS, credentials)
//	dialcheck.go  why a first Dial failed (refused, TLS handshake, plain
//	              client against a TLS member), which gRPC does not say
//	embedded.go   Embedded: the in-process single-member etcd
//	mem.go        Mem: the in-memory Store with fault injection
package meta
