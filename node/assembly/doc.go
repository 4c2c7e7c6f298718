// Package assembly builds a whole lakegate node from one configuration —
// the one way a node is started, by cmd/lakegate and by the test harness
// (internal/testnode) alike, so that tests run the production wiring:
//
//   - the storage node (node.Start: object store, metadata store, engine,
//     table layer, garbage collection loop);
//   - the stream catalog, with the public/default namespace;
//   - the cluster membership: a node always joins, and a standalone node
//     (embedded etcd) is a one-member cluster, member "standalone" unless
//     an id is given;
//   - the cluster default table materialization, when given, and the
//     compaction worker (one owner per table across the cluster);
//   - the Pulsar gateway on the listeners the caller opened (their
//     addresses are what the node advertises when it joins);
//   - the HTTP surface (nodehttp: /metrics, /healthz, /readyz, admin REST;
//     optionally the Iceberg REST catalog under /iceberg/), served on the
//     caller's HTTP listeners or by the caller (Node.Handler).
//
// Close stops it as a SIGTERM does: the gateway hands its topics over, the
// node leaves the cluster, then everything stops in reverse order.
//
// Files: assembly.go (Config, Start, Close), http.go (the HTTP surface);
// assembly_test.go: a standalone node is a one-member cluster.
package assembly
