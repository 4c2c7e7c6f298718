// Package engine is lakegate's storage engine: it implements the lakestream
// contract (levels 0 and 1 here, level 2 in engine/catalog) on an object
// store (data: WAL objects) and a metadata store (order: log heads, a sparse
// index, cursors).
//
// Write path: Append hands entries to the node's single WAL writer, which
// batches entries of every log into one object per flush, PUTs it with
// put-if-absent, and commits it with metadata transactions that, per log,
// compare the head's revision, advance the head and put one index key at the
// chunk's last offset. Appends are acknowledged only after both. Any number
// of engines may append to the same logs: order is fixed by the commit.
//
// Read path: a ceiling lookup on the index finds the chunk holding an
// offset; one ranged GET fetches it (or the byte-bounded cache has it).
// Readers at the tail wait on a watch of the log's head.
//
// The engine owns the key layout of docs/index-format.md and the GC rules of
// docs/gc.md. It must not know about Pulsar (protocol, gateway) or tables
// (lakehouse); the formats it writes live in engine/wal and engine/cursor,
// the store boundaries in objstore and meta.
package engine
