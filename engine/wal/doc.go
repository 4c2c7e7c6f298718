// Package wal owns the byte format of WAL objects: the objects one gateway
// node's WAL writer puts to object storage, each holding the freshly appended
// entries of any number of logs, one chunk per log. The specification is
// docs/wal-format.md; this package is its only implementation.
//
// The package is pure: it encodes ([Builder]) and decodes ([DecodeChunk],
// [DecodeChunkHeaders], [DecodeObject], [ObjectChunk], [ChunkRef.Decode])
// byte slices and does no I/O, keeps no global state and starts no
// goroutines. It knows nothing of offsets (the etcd commit assigns them after
// the object is written), object keys, the index, flush policy, retries or
// garbage collection: the WAL writer and committer live in package engine,
// which stores each [ChunkRef] returned by [Builder.Build] in the index, and
// readers fetch one chunk with a ranged GET and decode it with
// [ChunkRef.Decode] or [DecodeChunk].
//
// Decoders never panic and never allocate from a length they have not checked
// against the input size; they report failures with the sentinel errors
// [ErrCorrupt], [ErrUnsupportedVersion] and [ErrTooLarge], wrapped with
// detail. Decoded payloads alias the input.
//
// A [Builder] is not safe for concurrent use; decoders are.
package wal
