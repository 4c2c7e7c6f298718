// Package delta writes and reads a Delta Lake transaction log over an
// objstore.Store: our own writer, no Spark and no delta-rs at run time.
//
// It owns the keys under <root>/_delta_log/ of one table: JSON commits
// (created only with PutIfAbsent), single-part checkpoints every 10 commits
// (WithCheckpointInterval), the _last_checkpoint hint, and their expiry
// (CleanLog). It never writes or deletes data files: callers (the table
// layer's materialization, bin-packing and retention) write Parquet beside
// the log and pass the files added and removed to Commit. StatsFromParquet
// reads the footer of file bytes it is handed, nothing from the store. It
// knows nothing of topics, messages or actors.
//
// The format written is specified in docs/delta.md (protocol 1/2, metaData
// with a Spark StructType schemaString, add with stats, txn for idempotent
// appends, Spark's checkpoint schema).
//
// Concurrency: a *Table is safe for concurrent use; any number of Tables, in
// any number of processes, may commit to the same table — conflicts are
// resolved by PutIfAbsent on the next version and a retry.
//
// Files:
//
//	table.go       Table: Open, Create, Snapshot, Commit (idempotent by
//	               txn, adds, removes, schema changes), Checkpoint, options
//	log.go         Snapshot, the replayed state and the log's keys (commits
//	               after the newest checkpoint)
//	actions.go     the JSON actions (protocol, metaData, add, remove, txn,
//	               commitInfo) and ParseStats
//	checkpoint.go  writing and reading checkpoints (Spark's classic
//	               schema) and the _last_checkpoint hint
//	cleanup.go     CleanLog: log files expired behind the newest checkpoint
//	schema.go      Delta schemas (StructType JSON), FromArrow, ParseSchema
//	stats.go       per-file stats from a Parquet footer (StatsFromParquet)
//	errors.go      the sentinel errors
package delta
