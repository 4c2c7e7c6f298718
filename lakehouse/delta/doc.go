// Package delta writes and reads a Delta Lake transaction log over an
// objstore.Store: our own writer, no Spark and no delta-rs at run time.
//
// It owns the keys under <root>/_delta_log/ of one table: JSON commits
// (created only with PutIfAbsent), single-part checkpoints every 10 commits
// and the _last_checkpoint hint. It never writes, reads or deletes data files:
// callers (the compactor) write Parquet beside the log and pass AddFile
// descriptions to Commit. It knows nothing of topics, messages or actors.
//
// The format written is specified in docs/delta.md (protocol 1/2, metaData
// with a Spark StructType schemaString, add with stats, txn for idempotent
// appends, Spark's checkpoint schema).
//
// Concurrency: a *Table is safe for concurrent use; any number of Tables, in
// any number of processes, may commit to the same table — conflicts are
// resolved by PutIfAbsent on the next version and a retry.
package delta
