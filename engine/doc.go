// Package engine is lakegate's storage engine: it implements the lakestream
// contract (levels 0 and 1 here, level 2 in engine/catalog) on an object
// store (data: WAL objects) and a metadata store (order: a commit log, log
// heads, a sparse index, cursors). It is log storage: logs, the WAL, the
// index, cursors, the catalog and garbage collection.
//
// Write path: Append hands entries to the node's single WAL writer, which
// batches entries of every log into one object per flush — cut before any
// limit of the WAL format is reached (wal.Budget), so no valid append
// sequence breaks a limit or panics —, PUTs it with put-if-absent, and
// commits it with one commit record (a metadata key under commits/rec/
// naming the object and its chunk per log), flushes strictly in order.
// The metadata revision of the record fixes the order of every log's
// entries; every engine watches the records and applies them in revision
// order to the logs it has open, and a fold later writes their effect into
// the logs' head keys and index keys and deletes them (commitlog.go,
// docs/index-format.md "The commit log"). Appends are acknowledged only
// once their record is applied. Any number of engines may append to the
// same logs. Appends made as links of an append chain (chain.go) commit in
// order or not at all: a failed one fails every later one of its chain.
// Staged appends (lakestream.WithStage, stage.go) take the same path but
// are committed as staged records of a staging set instead of as chunks of
// their logs: durable, without offsets, invisible, until CommitStaged
// writes every staged chunk of the set as one kind-3 commit record, so the
// set enters all its logs at one point of the order (docs/transactions.md,
// "Staging (engine)"); a log's ReadStaged reads its entries of an open set
// back (what a deduplicating owner needs to judge a resent staged append). On a store that can append (file://), the flushes
// go into one object, a WAL segment, per node and intent window
// (segment.go): one file create per segment rather than per flush.
//
// Read path: a log's head is its head key plus the records applied after
// it; a ceiling lookup on the index (or on the applied records not folded
// yet) finds the chunk holding an offset; one ranged GET fetches it (or the
// byte-bounded cache has it). A chunk of another index kind (a Parquet
// table file) is decoded by the ChunkDecoder the engine was given. Readers
// at the tail wait until the commit log applies a record for their log.
//
// The engine owns the key layout of docs/index-format.md and the GC rules of
// docs/gc.md. It stores opaque entries and must not know about Pulsar
// (protocol, gateway) or tables (lakehouse, tables): the layer that
// materializes logs into tables reaches it only through the port of
// port.go (reading a committed WAL run, PUTs under pending intents,
// replacing index entries, per-log Attachments that GC honours), which
// that layer declares as the interface tables.Port. The formats it writes
// live in engine/wal and engine/cursor, the store boundaries in objstore
// and meta (the ground floor).
//
// Of lakegate's four "compactions", one is the engine's: WAL repacking
// (RepackWAL, repack.go) merges a log's small WAL chunks into one. Table
// materialization (WAL chunks into Parquet) and bin-packing (small table
// files) are the tables package's, key compaction (Pulsar topic
// compaction) the broker's.
//
// Files:
//
//	engine.go     Engine, its level-1 operations (LogStorage), Close
//	options.go    Options and their defaults
//	keys.go       the metadata key layout (docs/index-format.md)
//	log.go        a log's handle: head, tail of applied records, reads, appends
//	commitlog.go  the commit log: records, their watch, application and fold
//	writer.go     the node's single WAL writer: batching, PUTs, commits
//	chain.go      append chains (ordered appends that fail together)
//	stage.go      staging sets: staged appends, CommitStaged, DiscardStaged, ReadStaged
//	segment.go    WAL segments: flushes appended to one object (file://)
//	putretry.go   the retry schedules of PUTs and metadata operations
//	cache.go      the byte-bounded cache of decoded chunks
//	cursor.go     durable and ephemeral cursors (lakestream.LogCursor)
//	repack.go     WAL repacking (RepackWAL) and the compaction cursor
//	gc.go         garbage collection of WAL objects and orphaned table files
//	port.go       the table port (what the tables layer uses)
//	membership.go cluster membership and ownership over the metadata store
//	metrics.go    counters and Prometheus families (docs/metrics.md)
package engine
