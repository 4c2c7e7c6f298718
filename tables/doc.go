// Package tables materializes logs into tables: the layer above the
// storage engine that turns committed WAL chunks into Parquet files (one
// row per message, typed value columns), commits them to a stream's Delta
// table and Iceberg table with the claim protocol, and makes those files
// the log's storage for their offsets — one copy of the data
// (docs/compaction.md, docs/iceberg.md, docs/table-schema.md). It also
// owns the table view of a stream (View: Stream.Table(), ScanTable) and
// the compaction worker's job runner (Compactor: actors.TableCompactor),
// and keeps the tables bounded: maintenance (Maintain), bin-packing of a
// log's small files with the index following the new file (Binpack),
// table retention by time and size that trims the logs behind the files it
// removes (ApplyRetention) and orphan removal after a safety window
// (RemoveOrphans).
//
// It reaches the engine only through the engine's table port
// (engine/port.go): it gives the engine a Decoder for the Parquet index
// kind and the claims as Attachments (EngineOptions), and uses the
// engine's methods to read a committed WAL run (Chunks, ChunkEntries), to
// PUT its files under pending intents (PutPending), to replace index
// entries atomically with its claim (ReplaceChunks, ReplaceTableChunks)
// and to advance the compaction cursor. It owns its metadata keys — the
// claims at logs/<log>/table and logs/<log>/repack, typed schemas at
// table-schemas/<root> and the last retention run at table-retention/<root>
// (docs/index-format.md) — and the table files under tables/ in the
// object store. It never touches WAL objects or writes heads or cursors:
// table retention only reads the logs' durable cursors and hard-trims a
// log (Engine.HardTrim, as the gateway's message retention does) below
// what the tables and those cursors still hold.
//
// Dependencies point down: tables → engine, lakehouse (Arrow/Parquet,
// Delta, Iceberg), meta, objstore, lakestream; and → actors for the job
// runner's interface. Nothing below imports it; node and cmd/lakegate wire
// it.
package tables
