package lakestream

// The materialization job: what the broker's materialization worker
// (actors.MaterializationWorker: which log, when) hands the table layer
// (tables.Tables.Materializer(): how), so that neither imports the other.
// Table materialization turns a log's committed WAL chunks into Parquet
// files committed to its stream's Delta and Iceberg tables
// (docs/compaction.md); it is not WAL repacking (the engine), bin-packing
// (small table files) or key compaction (Pulsar topic compaction).

import "context"

// MaterializationJob is one log whose committed WAL chunks are to be
// materialized into its stream's tables.
type MaterializationJob struct {
	Stream    StreamIdentifier
	Partition int // topic partition of Log (-1: not partitioned)
	Log       LogID
	// Logs are every log of the stream, in partition order (shared, not
	// to be modified): what table maintenance needs to know which index
	// entries may name the table's files.
	Logs    []LogID
	Delta   bool // commit the files to the stream's Delta table
	Iceberg bool // and/or to its Iceberg table
	// Schema is the stream's latest value schema (typed columns).
	Schema SchemaConfig
	// Properties are the stream's properties (shared, not to be
	// modified): its schema history among them, so that each row is
	// decoded with the schema version it was written with.
	Properties map[string]string
	// RetentionMs and RetentionBytes are the stream's table retention
	// (its resolved materialization policy; 0: no limit), applied by
	// table maintenance (docs/compaction.md, "Table retention").
	RetentionMs, RetentionBytes int64
}

// MaterializationResult is what one materialization call did.
type MaterializationResult struct {
	Records int64 // records moved into the table (0: nothing was eligible)
	Bytes   int64 // table file bytes written
	// More reports that eligible chunks remain (the call stopped at its
	// size bound): the job is due again at once.
	More bool
}

// Materializer materializes the eligible committed WAL chunks of one log
// into its stream's tables. A call that finds nothing eligible returns a
// zero result and no error. A conflict with another node materializing the
// same log is an error like any other: the job backs off and tries again.
// Safe for concurrent use on different logs.
type Materializer interface {
	MaterializeLog(ctx context.Context, j MaterializationJob) (MaterializationResult, error)
}

// IdleMaterializer is a Materializer that can tell, from memory and at
// once, that a call for j would do nothing now (a zero result, no error):
// a worker then skips the call and counts it done.
type IdleMaterializer interface {
	Materializer
	Idle(j MaterializationJob) bool
}
