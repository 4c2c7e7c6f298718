package lakestream

import (
	"context"
	"time"
)

// LogID names one log (one stream partition). Ids are allocated by the
// stream catalog and never reused.
type LogID int64

// EntryHeader describes one entry without its payload.
type EntryHeader struct {
	// Offset is the record offset of the entry's first record.
	Offset int64
	// Records is the number of records in the entry (≥ 1).
	Records int32
	// PublishTimeMs is the producer's publish time (Unix ms) given at
	// append, or WriteTimeMs when none was given.
	PublishTimeMs int64
	// WriteTimeMs is when the engine accepted the entry (Unix ms).
	WriteTimeMs int64
	// Size is the payload size in bytes.
	Size int32
	// CumulativeSize is the number of payload bytes in the log up to and
	// including this entry, counted from the log's creation (not its first
	// offset): backlog bytes are differences of it.
	CumulativeSize int64
}

// End returns the offset just past the entry.
func (h EntryHeader) End() int64 { return h.Offset + int64(h.Records) }

// Contains reports whether record offset o belongs to the entry.
func (h EntryHeader) Contains(o int64) bool { return o >= h.Offset && o < h.End() }

// Entry is an entry with its payload. The payload is owned by the caller.
type Entry struct {
	EntryHeader
	Payload []byte
}

// AppendOption adjusts one Append.
type AppendOption func(*AppendOptions)

// AppendOptions are the optional parts of an Append.
type AppendOptions struct {
	// PublishTimeMs is kept per entry for time lookups; 0 = write time.
	PublishTimeMs int64
	// Guard, when set, makes the append conditional on it: the entry is
	// committed only while the guard holds, else the append fails with
	// ErrGuardLost (an owner's producers cannot write after the owner lost the
	// partition).
	Guard Guard
	// Donate hands the payload to the implementation: the caller neither
	// reads nor writes it after the call, so the implementation may keep
	// it instead of copying it. Default false (the payload is copied).
	Donate bool
	// Chain, when set, makes the append one link of an AppendChain of its
	// log (Log.NewAppendChain): it commits only if every earlier append of
	// the chain did. Default nil: the append stands alone.
	Chain AppendChain
	// Stage, when set, stages the append into the staging set of that name
	// (docs/transactions.md, "Staging (engine)"): the entry is stored and
	// made durable like any other, but it takes no offset and no reader
	// sees it until the set is committed (Staging.CommitStaged), when it
	// enters the log with every other entry of the set at one point of the
	// commit order. It is answered with EntryHeader.Offset -1. Fails
	// ErrStageEnded once the set was committed or discarded. A set name is
	// 1–128 bytes without '/' (ErrInvalidArgument). Default "": not staged.
	Stage string
}

// AppendChain orders a sequence of appends to one log as the writes of a
// Pulsar ManagedLedger are ordered: the appends of a chain that commit are
// a prefix of the chain, in the order the chain was given them (the order
// in which Append or AppendAsync was called with it; calls with one chain
// are made one at a time). Once an append of the chain fails, the chain is
// broken: no append made with it after the failed one commits — those in
// flight fail with ErrChainBroken, and so do those made later, at once —
// so a submitter that saw a failure knows that nothing it sent after it
// was stored. To go on, it starts a new chain; if order across the two
// matters, only once every append of the old one has ended.
//
// An append refused for its own arguments (ErrInvalidArgument, ErrTooLarge)
// takes no place in the chain and does not break it. An append whose
// outcome is unknown (ErrIndeterminate) breaks it like a failure: nothing
// after it commits, though it may itself have committed.
//
// The implementation hands chains out (Log.NewAppendChain) and keeps their
// state; a chain belongs to the log that made it (ErrInvalidArgument
// elsewhere). Safe for concurrent use.
type AppendChain interface {
	// Err returns nil while the chain holds; once it is broken, an error
	// wrapping ErrChainBroken and the failure that broke it.
	Err() error
}

// WithAppendChain sets AppendOptions.Chain.
func WithAppendChain(c AppendChain) AppendOption {
	return func(o *AppendOptions) { o.Chain = c }
}

// WithStage sets AppendOptions.Stage.
func WithStage(set string) AppendOption {
	return func(o *AppendOptions) { o.Stage = set }
}

// WithDonatedPayload sets AppendOptions.Donate.
func WithDonatedPayload() AppendOption {
	return func(o *AppendOptions) { o.Donate = true }
}

// WithAppendGuard sets AppendOptions.Guard.
func WithAppendGuard(g Guard) AppendOption {
	return func(o *AppendOptions) { o.Guard = g }
}

// WithPublishTime sets the entry's publish time (Unix ms).
func WithPublishTime(ms int64) AppendOption {
	return func(o *AppendOptions) { o.PublishTimeMs = ms }
}

// ApplyAppendOptions folds opts into an AppendOptions value.
func ApplyAppendOptions(opts []AppendOption) AppendOptions {
	var o AppendOptions
	for _, f := range opts {
		f(&o)
	}
	return o
}

// Log is one append-only log of records. Safe for concurrent use; any number
// of Log handles, in any number of processes, may append to the same log:
// order is fixed by the metadata commit. A caller that needs only a part
// takes one of its facets (LogAppender, LogReader, LogControl, LogCursors).
type Log interface {
	LogAppender
	LogStaged
	LogReader
	LogControl
	LogCursors
}

// LogStaged is the facet of a Log that reads back what was staged into it
// (AppendOptions.Stage; docs/transactions.md, "Staging (engine)"): what a
// deduplicating owner needs to judge a resent staged append. Safe for
// concurrent use.
type LogStaged interface {
	ID() LogID

	// ReadStaged calls fn with every entry of this log staged into set and
	// not yet committed or discarded, in the order the set's commit would
	// append them, until fn returns false. Every staged append answered
	// before the call is seen. An entry has Offset -1 (no offset yet); its
	// Payload is the implementation's, valid during the call only and not
	// to be modified. A set nobody staged into reads as empty. Errors:
	// ErrStageEnded when the set was committed (its entries are in the
	// log) or discarded, also when it ends during the read;
	// ErrStageTooLarge when it holds more staged chunks than the
	// implementation bounds a set to; ErrInvalidArgument for an invalid
	// set name; ErrUnavailable (a metadata or object read failed); ctx's
	// error. fn is called on the caller's goroutine.
	ReadStaged(ctx context.Context, set string, fn func(Entry) bool) error

	// OpenStagedSets returns up to limit staging sets holding entries of
	// this log staged and not yet committed or discarded, in name order:
	// every set a staged append into this log was answered for before
	// the call, and not ended before it. A set may end meanwhile (then
	// ReadStaged tells ErrStageEnded). Errors: ErrUnavailable, ErrClosed,
	// ctx's error.
	OpenStagedSets(ctx context.Context, limit int) ([]string, error)
}

// LogAppender is the facet of a Log that appends to it.
type LogAppender interface {
	ID() LogID

	// Append stores one entry of records (1 ≤ records ≤ math.MaxInt32)
	// records and returns its header once it is durable in the object store
	// and committed in metadata. The payload is not retained after Append
	// returns. Errors:
	//   - ErrInvalidArgument (records out of range), ErrTooLarge (payload
	//     over the implementation's entry limit): nothing was stored;
	//   - ErrFenced, ErrNoSuchLog (fenced or deleted log), ErrClosed (the
	//     storage was closed), ErrGuardLost (AppendOptions.Guard lost),
	//     ErrChainBroken (an earlier append of AppendOptions.Chain failed):
	//     nothing was stored;
	//   - ErrUnavailable: the object PUT or the metadata commit failed;
	//     the entry is not committed;
	//   - ErrIndeterminate: the outcome is unknown — the commit's result
	//     was lost and could not be established, or ctx ended after the
	//     entry was handed to the writer (then it wraps ctx's error). The
	//     entry may or may not be committed, and if it was, it is readable
	//     exactly once;
	//   - ctx's error alone (context.Canceled, DeadlineExceeded): ctx ended
	//     before the entry was handed to the writer; nothing was stored.
	Append(ctx context.Context, records int, payload []byte, opts ...AppendOption) (EntryHeader, error)

	// AppendAsync is Append without the wait: it returns once the entry's
	// place in the log's commit order is fixed — an entry appended (by Append
	// or AppendAsync, from any goroutine) after AppendAsync returned gets
	// higher offsets if both commit — and reports the outcome by calling
	// done exactly once, with Append's results, from a goroutine of the
	// implementation. done must not block (hand the result over to a queue
	// of your own). The payload is not retained after AppendAsync returns
	// (unless it is donated: AppendOptions.Donate).
	// AppendAsync blocks while the implementation's bound on bytes in flight
	// is reached (backpressure), until ctx ends; ctx bounds only that wait,
	// not the commit. When it returns an error (validation, ErrFenced known
	// at once, ErrClosed, ctx errors) done is not called and nothing was
	// queued.
	AppendAsync(ctx context.Context, records int, payload []byte, done func(EntryHeader, error), opts ...AppendOption) error

	// NewAppendChain returns a new chain for appends to this log
	// (WithAppendChain).
	NewAppendChain() AppendChain
}

// LogReader is the facet of a Log that reads it: entries, offsets and
// searches by time or header. Safe for concurrent use.
type LogReader interface {
	ID() LogID

	// ReadEntries returns whole entries starting with the one that contains
	// start, up to maxRecords records and maxBytes payload bytes (at least
	// one entry is returned when one exists, even if it alone exceeds the
	// limits). It does not wait: at the head it returns an empty slice.
	// Errors: ErrOffsetTrimmed when start is below FirstOffset.
	ReadEntries(ctx context.Context, start int64, maxRecords int, maxBytes int64) ([]Entry, error)

	// WaitForEntries blocks until the log's head is beyond offset, ctx ends
	// or the log is deleted. It returns the head it saw.
	WaitForEntries(ctx context.Context, offset int64) (int64, error)

	// ReadEntry returns the entry containing offset (ErrOffsetOutOfRange at
	// or beyond the head, ErrOffsetTrimmed below the first offset).
	ReadEntry(ctx context.Context, offset int64) (Entry, error)
	// EntryHeader is ReadEntry without the payload.
	EntryHeader(ctx context.Context, offset int64) (EntryHeader, error)
	// IndexRange returns the headers of the entries that overlap
	// [start, endExcl).
	IndexRange(ctx context.Context, start, endExcl int64) ([]EntryHeader, error)

	// FirstOffset is the lowest readable offset (= NextOffset when empty).
	FirstOffset(ctx context.Context) (int64, error)
	// NextOffset is the offset the next appended record will get (the head).
	NextOffset(ctx context.Context) (int64, error)
	// LastOffset is NextOffset-1 (-1 for a log that never had a record).
	LastOffset(ctx context.Context) (int64, error)
	// MessageCount is the number of records in [start, endExcl) that are
	// still readable.
	MessageCount(ctx context.Context, start, endExcl int64) (int64, error)

	// FindOffsetByTime returns the offset of the first entry whose publish
	// time is ≥ t, or NextOffset when there is none.
	FindOffsetByTime(ctx context.Context, t time.Time) (int64, error)
	// SearchOffset binary-searches entries in [min, max) for the first whose
	// header satisfies pred (pred must be monotone: false… then true…). It
	// returns max when none does.
	SearchOffset(ctx context.Context, min, max int64, pred func(EntryHeader) bool) (int64, error)
}

// LogControl is the facet of a Log that trims and fences it.
type LogControl interface {
	ID() LogID

	// SoftTrim makes every offset ≤ inclusive unreadable (the data may be
	// deleted later) and returns the new first offset. The trim point is
	// rounded up to an entry boundary. Trimming never goes backwards.
	SoftTrim(ctx context.Context, inclusive int64) (int64, error)
	// Fence makes every later Append fail with ErrFenced, from any process.
	Fence(ctx context.Context) error
	// Fenced reports whether the log was fenced: it then never grows, and
	// its end is NextOffset (a terminated topic's end).
	Fenced(ctx context.Context) (bool, error)
}

// LogCursors is the facet of a Log that opens, lists and deletes its
// cursors.
type LogCursors interface {
	// OpenCursor opens (creating if absent) a durable cursor. A new cursor
	// starts with mark-delete initialMarkDelete (-1 = nothing consumed) and
	// read offset initialMarkDelete+1.
	OpenCursor(ctx context.Context, name string, initialMarkDelete int64, opts ...CursorOption) (LogCursor, error)
	// OpenEphemeralCursor opens a cursor kept in memory only, reading from
	// initialReadOffset.
	OpenEphemeralCursor(ctx context.Context, name string, initialReadOffset int64) (LogCursor, error)
	// LoadCursor opens an existing durable cursor (ErrNoSuchCursor).
	LoadCursor(ctx context.Context, name string, opts ...CursorOption) (LogCursor, error)
	// CursorNames lists the durable cursors of the log, sorted.
	CursorNames(ctx context.Context) ([]string, error)
	// DeleteCursor removes a durable cursor's state.
	DeleteCursor(ctx context.Context, name string) error
}

// CursorOption adjusts the opening of a durable cursor.
type CursorOption func(*CursorOptions)

// CursorOptions are the optional parts of OpenCursor and LoadCursor.
type CursorOptions struct {
	// Guard, when set, guards every write of the cursor's state: once the
	// guard is lost the write fails with ErrGuardLost and the handle is
	// closed (see Guard).
	Guard Guard
}

// WithGuard sets CursorOptions.Guard.
func WithGuard(g Guard) CursorOption {
	return func(o *CursorOptions) { o.Guard = g }
}

// ApplyCursorOptions folds opts into a CursorOptions value.
func ApplyCursorOptions(opts []CursorOption) CursorOptions {
	var o CursorOptions
	for _, f := range opts {
		f(&o)
	}
	return o
}

// Backlog is what a cursor has not acknowledged.
type Backlog struct {
	// Records not acknowledged from mark-delete+1 to the head.
	Records int64
	// Bytes of payload of the entries those records are in (approximate for
	// partially acknowledged entries).
	Bytes int64
}

// LogCursor is a position in a log with acknowledgement state. A cursor handle
// is not safe for concurrent use: one subscription actor owns it. Durable
// cursor state survives restarts once persisted; closing never deletes it.
// A caller that needs only a part takes one of its facets (CursorPosition,
// CursorReader, CursorAcker).
type LogCursor interface {
	CursorPosition
	CursorReader
	CursorAcker

	// Delete removes the cursor's durable state and closes it.
	Delete(ctx context.Context) error
	// Close persists pending state (durable cursors) and releases the handle.
	Close(ctx context.Context) error
}

// CursorPosition is the facet of a LogCursor that tells where it stands.
type CursorPosition interface {
	Name() string
	// Durable reports whether the cursor is persisted (false for ephemeral).
	Durable() bool

	// ReadOffset is the next offset ReadEntries reads from.
	ReadOffset() int64
	// MarkDeleteOffset is the offset at or below which every record is
	// acknowledged (-1 when none).
	MarkDeleteOffset() int64
	// PersistedMarkDeleteOffset is the mark-delete offset last persisted.
	PersistedMarkDeleteOffset() int64
	// Properties are the properties given with the last MarkDelete.
	Properties() map[string]int64
}

// CursorReader is the facet of a LogCursor that reads from its read offset.
type CursorReader interface {
	// ReadEntries reads whole entries from ReadOffset (skipping entries
	// whose every record is acknowledged) and advances ReadOffset past them.
	// It does not wait; see Log.WaitForEntries.
	ReadEntries(ctx context.Context, maxEntries int, maxBytes int64) ([]Entry, error)
	// SeekOffset sets ReadOffset (the API's Seek; renamed so it is not
	// mistaken for io.Seeker).
	SeekOffset(offset int64)
	// HasMoreEntries reports whether records exist at or beyond ReadOffset.
	HasMoreEntries(ctx context.Context) (bool, error)
	// Backlog counts unacknowledged records and bytes up to the head.
	Backlog(ctx context.Context) (Backlog, error)
}

// CursorAcker is the facet of a LogCursor that acknowledges records and
// persists its state.
type CursorAcker interface {
	// MarkDelete acknowledges every record ≤ inclusive and records the
	// properties. It returns once the state is persisted (durable cursors)
	// — implementations may batch concurrent persists. Never moves back.
	MarkDelete(ctx context.Context, inclusive int64, properties map[string]int64) error
	// IndividualDelete acknowledges the records [offset, offset+records).
	// Acknowledging the record just above mark-delete advances mark-delete
	// over every contiguous acknowledged record. The state is persisted in
	// batches (call PersistState to force). ErrCursorStateTooLarge when the
	// number of acknowledged ranges above mark-delete would exceed the bound.
	IndividualDelete(offset int64, records int64) error
	// IsIndividuallyDeleted reports whether a record is acknowledged (true for
	// every record ≤ MarkDeleteOffset).
	IsIndividuallyDeleted(offset int64) bool
	// IndividualDeleteCount is the number of acknowledged records above
	// mark-delete.
	IndividualDeleteCount() int64
	// AckedRanges returns the acknowledged ranges above mark-delete as
	// half-open [start, end) pairs, in order.
	AckedRanges() [][2]int64
	// FirstNonDeletedOffset is the lowest record offset not acknowledged.
	FirstNonDeletedOffset() int64
	// PersistState writes the state now (no-op for ephemeral cursors).
	PersistState(ctx context.Context) error
}

// StoredChunk is one stored piece of a log: a WAL chunk (a range of a WAL
// object) or a table file (Parquet), as the log's index lists it.
type StoredChunk struct {
	// Kind is "wal" or "parquet".
	Kind string
	// First is the offset of the chunk's first record; End is just past its
	// last (half-open [First, End)).
	First, End int64
	// Entries is the number of entries (Pulsar SENDs) in the chunk.
	Entries int64
	// PayloadBytes is the payload bytes of its entries.
	PayloadBytes int64
	// Object is the key of the object holding it in the object store.
	Object string
	// MinPublishMs and MaxPublishMs bound the publish times of its entries
	// (Unix ms).
	MinPublishMs, MaxPublishMs int64
	// Folded reports that the chunk is in the log's index keys; a chunk
	// not folded yet is committed in the commit log only
	// (docs/index-format.md, "The commit log").
	Folded bool
}

// LogLayout is implemented by logs that can list where their records are
// stored (the admin's internal stats read it; a log without it answers no
// layout).
type LogLayout interface {
	// Layout returns up to limit chunks of the log in offset order, from
	// the one holding offset from (or the first after it). It reads the
	// index; it changes nothing. The slice is the caller's.
	Layout(ctx context.Context, from int64, limit int) ([]StoredChunk, error)
}
