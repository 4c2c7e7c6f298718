// Package engine is lakegate's storage engine: it implements the lakestream
// contract (levels 0 and 1 here, level 2 in engine/catalog) on an object
// store (data: WAL objects) and a metadata store (order: log heads, a sparse
// index, cursors). It is log storage: logs, the WAL, the index, cursors, the
// catalog and garbage collection.
//
// Write path: Append hands entries to the node's single WAL writer, which
// batches entries of every log into one object per flush — cut before any
// limit of the WAL format is reached (wal.Budget), so no valid append
// sequence breaks a limit or panics —, PUTs it with put-if-absent, and
// commits it with metadata transactions that, per log, compare the head's
// revision, advance the head and put one index key at the chunk's last
// offset. Appends are acknowledged only after both. Any number of engines
// may append to the same logs: order is fixed by the commit. Appends made
// as links of an append chain (chain.go) commit in order or not at all: a
// failed one fails every later one of its chain. On a store
// that can (file://), the objects of the next flushes are created ahead of
// time under their window intent (prepare.go), so that a flush's PUT only
// writes into its file.
//
// Read path: a ceiling lookup on the index finds the chunk holding an
// offset; one ranged GET fetches it (or the byte-bounded cache has it).
// A chunk of another index kind (a Parquet table file) is decoded by the
// ChunkDecoder the engine was given. Readers at the tail wait on a watch of
// the log's head.
//
// The engine owns the key layout of docs/index-format.md and the GC rules of
// docs/gc.md. It stores opaque entries and must not know about Pulsar
// (protocol, gateway) or tables (lakehouse, tables): the layer that
// materializes logs into tables reaches it only through the port of
// port.go (reading a committed WAL run, PUTs under pending intents,
// replacing index entries, per-log Attachments that GC honours). The
// formats it writes live in engine/wal and engine/cursor, the store
// boundaries in objstore and meta (the ground floor).
package engine
