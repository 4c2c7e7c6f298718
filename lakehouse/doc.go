// Package lakehouse turns log entries into the message table and back: one
// row per Pulsar message, in Parquet files that Delta Lake and Iceberg
// tables share. The table format is specified in docs/table-schema.md; this
// package implements exactly that.
//
// Pipeline (pure code: no I/O beyond the io.Writer / ReaderAt it is handed,
// no goroutines, no sockets, no actors, no clocks):
//
//	lakestream.Entry ──DecodeEntry──▶ []Message ──RecordBuilder──▶ arrow.RecordBatch
//	      ▲                                                            │
//	RebuildEntry ◀── SplitEntries ◀── ReadParquet ◀──── file ◀── WriteParquet (+ FileStats)
//
// Files:
//
//   - decode.go: DecodeEntry (metadata, decompression, unbatching; opaque
//     rows for encrypted and chunked entries), OpaqueEntry, RebuildEntry,
//     SplitEntries. The rebuild contract: every row set that DecodeEntry
//     produced rebuilds to the stored entry byte-for-byte (fuzzed).
//   - arrow.go: Schema (system columns with Parquet field ids, µs UTC
//     timestamps, typed columns), RecordBuilder (records bounded by rows
//     and bytes).
//   - typed.go: TypedSchema — typed value columns for primitive, JSON and
//     AVRO topic schemas, with stable field ids across evolution.
//   - nested.go: nested typed columns — Avro records, arrays and maps as
//     structs, lists and maps (to MaxNestedDepth levels), their field ids
//     and evolution, and JSON/Avro values decoded into them.
//   - parquet.go: WriteParquet (zstd, row groups cut by bytes, bounded
//     files, one table partition per file), FooterStats (Delta stats and
//     Iceberg metrics), ReadParquet and MessagesFromRecord.
//   - scan.go: ScanParquet — a file's rows as Arrow record batches of at
//     most 16 Ki rows, every column (the table view's scans).
//   - schemas.go: SchemaHistory — a topic's Avro schema versions from its
//     stream properties, as the gateway's schema registry writes them
//     (what TypedSchema.WithWriters takes).
//
// Owns: the table schema and the Parquet data files' contents. Does not
// touch: the Delta log (subpackage delta), Iceberg catalogs, object stores,
// the engine's index keys or compaction scheduling — callers write the file
// bytes where they belong and commit them.
//
// Bounds: DecodeEntry decompresses at most its maxUncompressed bytes per
// entry; RecordBuilder emits records of at most RecordLimits; WriteParquet
// holds one row group (≤ WriteOptions.RowGroupBytes plus one record) in
// memory and stops a file at WriteOptions.MaxFileBytes.
//
// Concurrency: TypedSchema and the Schema results are immutable and safe to
// share; RecordBuilder is not safe for concurrent use; the functions are.
package lakehouse
