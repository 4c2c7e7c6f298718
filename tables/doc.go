// Package tables materializes logs into tables: the layer above the
// storage engine that turns committed WAL chunks into Parquet files (one
// row per message, typed value columns), commits them to a stream's Delta
// table and Iceberg table with the claim protocol, and makes those files
// the log's storage for their offsets — one copy of the data
// (docs/compaction.md, docs/iceberg.md, docs/table-schema.md). This is
// table materialization (Materialize); the package also owns the table
// view of a stream (View: Stream.Table(), ScanTable) and the
// materialization worker's job runner (Materializer: a
// lakestream.Materializer), and keeps the tables bounded: maintenance
// (Maintain), bin-packing of a log's small files with the index following
// the new file (Binpack), table retention by time and size that trims the
// logs behind the files it removes (ApplyRetention) and orphan removal
// after a safety window (RemoveOrphans). WAL repacking (the engine's) and
// key compaction (Pulsar topic compaction, the broker's) are not here.
//
// It reaches the engine only through the table port, which it declares
// itself (Port, port.go, in facets; *engine.Engine satisfies it and
// engine/port.go documents its guarantees): it gives the engine a Decoder
// for the Parquet index kind and the claims as Attachments
// (EngineOptions), and uses the port to read a committed WAL run (Chunks,
// ChunkEntries), to PUT its files under pending intents (PutPending), to
// replace index entries atomically with its claim (ReplaceChunks,
// ReplaceTableChunks) and to advance the compaction cursor. It owns its
// metadata keys — the claims at logs/<log>/table and logs/<log>/repack
// (the bin-packing claim), typed schemas at table-schemas/<root> and the
// last retention run at table-retention/<root> (docs/index-format.md) —
// and the table files under tables/ in the object store, which it keeps in
// the stores the node gives it (Stores: the engine's counted stores; the
// claims at the port's AttachmentKey, so that ReplaceChunks compares
// them). It never touches WAL objects or writes heads or cursors: table
// retention only reads the logs' durable cursors and hard-trims a log
// below the trim floor
// (lakestream.TrimFloor, the rule Pulsar retention uses too).
//
// Dependencies point down: tables → engine, lakehouse (Arrow/Parquet,
// Delta, Iceberg), meta, objstore, lakestream. It does not import actors:
// the job's types, the internal cursor names and the trim floor are the
// contract's (TestLayers). Nothing below imports it; node and
// cmd/lakegate wire it.
//
// Files:
//
//	tables.go       Tables, Options, New, EngineOptions
//	port.go         the table port this layer declares (Port and its facets)
//	materialize.go  table materialization (Materialize) and the claim protocol
//	iceberg.go      the Iceberg side of materialization (step 3b)
//	joint.go        the joint job: a transaction's chunks in a table's logs together
//	parquet.go      building and decoding Parquet table files (Decoder)
//	typed.go        typed value columns and the tables' schemas
//	binpack.go      bin-packing of small table files (Binpack)
//	maintain.go     table maintenance (Maintain) and when it is due
//	retention.go    table retention (ApplyRetention, RecordRetention)
//	orphans.go      orphan removal (RemoveOrphans)
//	jobs.go         the materialization job runner (Materializer)
//	view.go         the table view of a stream (View, ScanTable)
//	view_iceberg.go the Iceberg side of the view, Iceberg identifiers
package tables
