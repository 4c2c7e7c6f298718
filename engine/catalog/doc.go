// Package catalog implements lakestream.StreamCatalog (level 2 of the
// Lakestream API) on the metadata store (meta.Store) and a level-1
// lakestream.LogStorage.
//
// It owns the keys under <root>catalog/ — namespaces, streams, tombstones of
// dropped streams, table catalogs, the cluster default materialization
// policy and the log-id allocator — whose layout and JSON values are
// specified in docs/catalog.md. Every mutation is one meta.Txn guarded by
// ModRevision compares, retried (re-read, re-decide) when it loses a race,
// so any number of Catalogs in any number of processes may share a store.
//
// It also provides the data-plane handles: lakestream.Stream with its
// layout (Pulsar-compatible murmur3 key routing, round-robin otherwise),
// writer and reader, which delegate to LogStorage. Table views come from
// Options.TableProvider (the tables package's View, wired by node);
// without one, Scan returns
// lakestream.ErrNotMaterialized.
//
// It must not touch log data itself (offsets, index, cursors, WAL objects:
// that is LogStorage's), nor any key outside <root>catalog/. It does not own
// the Store or the LogStorage it is given: Close closes neither.
//
// Reads are linearizable: every load reads the record from the store. The
// read-only loads (LoadStream, Stream and the handles built on it) decode a
// stream record's JSON only when its ModRevision changed since this Catalog
// last decoded it (a cache of decoded records bounded in bytes and
// entries, streams.go): the record of a 1000-partition stream holds 1000
// log ids, and a producer on each partition loads it.
//
// Concurrency: Catalog is safe for concurrent use; its one lock guards the
// decoded-record cache. Stream handles are immutable snapshots apart from
// an atomic round-robin counter.
package catalog
