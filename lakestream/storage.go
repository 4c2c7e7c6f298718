package lakestream

import "context"

// LogStorage is level 1: logs addressed by id. Safe for concurrent use.
type LogStorage interface {
	// Log returns a handle for the log, creating the log's metadata on first
	// use. ErrNoSuchLog if the log was deleted.
	Log(ctx context.Context, id LogID) (Log, error)
	// Append is Log.Append on log id (same limits and errors).
	Append(ctx context.Context, id LogID, records int, payload []byte, opts ...AppendOption) (EntryHeader, error)
	ReadEntries(ctx context.Context, id LogID, start int64, maxRecords int, maxBytes int64) ([]Entry, error)
	FirstOffset(ctx context.Context, id LogID) (int64, error)
	LastOffset(ctx context.Context, id LogID) (int64, error)
	IndexRange(ctx context.Context, id LogID, start, endExcl int64) ([]EntryHeader, error)
	SoftTrim(ctx context.Context, id LogID, inclusive int64) (int64, error)
	// HardTrim deletes the data of every entry wholly below exclusive (after
	// soft-trimming it); object deletion happens when no log references the
	// object any more.
	HardTrim(ctx context.Context, id LogID, exclusive int64) error
	// DeleteLog removes the log, its index and cursors. Later calls return
	// ErrNoSuchLog.
	DeleteLog(ctx context.Context, id LogID) error
	// Prefetch warms the read cache for [start, endExcl).
	Prefetch(ctx context.Context, id LogID, start, endExcl int64) error
}
