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

// Staging commits and discards staging sets: the appends made with
// WithStage(set) (docs/transactions.md, "Staging (engine)"). A set is named
// by its user (the transaction coordinator) and is open until its end is
// decided; the end is kept until ForgetStaged. Safe for concurrent use.
type Staging interface {
	// CommitStaged makes every entry staged into set enter its log, at one
	// point of the commit order for all the set's logs (per log in the
	// order they were staged), and ends the set. It returns once the
	// entries are readable through this implementation. A set already
	// committed returns nil; a discarded one ErrStageEnded; one too large
	// for a single commit ErrStageTooLarge (nothing written, the set stays
	// open). ErrUnavailable / ErrIndeterminate as for Append: calling
	// again settles it.
	CommitStaged(ctx context.Context, set string) error
	// DiscardStaged ends set without committing it: its staged entries
	// are never readable and their storage is reclaimed. A set already
	// discarded returns nil; a committed one ErrStageEnded.
	DiscardStaged(ctx context.Context, set string) error
	// ForgetStaged drops the record of set's end, once nobody will ask for
	// it again and no append to the set can still arrive (an append to a
	// forgotten set would be staged into a new, open set of that name).
	ForgetStaged(ctx context.Context, set string) error
}
