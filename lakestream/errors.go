package lakestream

import "errors"

// Sentinel errors returned by implementations of this package's interfaces.
// Compare with errors.Is; implementations wrap them with context.
var (
	// ErrAlreadyExists is returned by create operations (namespaces,
	// streams, table catalogs) when the name is taken.
	ErrAlreadyExists = errors.New("lakestream: already exists")
	// ErrNoSuchNamespace is returned when a namespace does not exist.
	ErrNoSuchNamespace = errors.New("lakestream: no such namespace")
	// ErrNamespaceNotEmpty is returned by DropNamespace when streams remain.
	ErrNamespaceNotEmpty = errors.New("lakestream: namespace not empty")
	// ErrNoSuchStream is returned when a stream does not exist.
	ErrNoSuchStream = errors.New("lakestream: no such stream")
	// ErrStreamDeleted is returned (wrapping ErrNoSuchStream) when the stream
	// existed and was dropped: its name is tombstoned and cannot come back.
	ErrStreamDeleted = errors.New("lakestream: stream permanently deleted")
	// ErrNoSuchTableCatalog is returned when a table catalog is not registered.
	ErrNoSuchTableCatalog = errors.New("lakestream: no such table catalog")
	// ErrNoSuchLog is returned when a log id is unknown or was deleted.
	ErrNoSuchLog = errors.New("lakestream: no such log")
	// ErrNoSuchCursor is returned by LoadCursor for an unknown cursor.
	ErrNoSuchCursor = errors.New("lakestream: no such cursor")
	// ErrFenced is returned by Append on a fenced log (and forever after).
	ErrFenced = errors.New("lakestream: log fenced")
	// ErrGuardLost is returned by a guarded write (WithGuard,
	// WithAppendGuard) once its guard no longer holds: the writer lost the
	// ownership the guard stands for. Nothing was written.
	ErrGuardLost = errors.New("lakestream: guard lost")
	// ErrChainBroken is returned by an append made with an AppendChain
	// (WithAppendChain) once an earlier append of the chain failed; it
	// wraps that failure. Nothing was stored.
	ErrChainBroken = errors.New("lakestream: append chain broken")
	// ErrStageEnded is returned by a staged append (WithStage) whose
	// staging set was committed or discarded before the append could be
	// staged (nothing was stored), and by Staging.CommitStaged of a
	// discarded set or Staging.DiscardStaged of a committed one.
	ErrStageEnded = errors.New("lakestream: staging set ended")
	// ErrStageTooLarge is returned by Staging.CommitStaged when the set
	// holds more staged chunks (or a larger commit record) than one
	// metadata write can carry. Nothing was written: the set is still
	// open and can only be discarded.
	ErrStageTooLarge = errors.New("lakestream: staging set too large")
	// ErrOffsetTrimmed is returned when reading below the first offset.
	ErrOffsetTrimmed = errors.New("lakestream: offset trimmed")
	// ErrOffsetOutOfRange is returned when reading at or beyond the head of a
	// log by a call that does not wait (ReadEntry, EntryHeader).
	ErrOffsetOutOfRange = errors.New("lakestream: offset out of range")
	// ErrNotMaterialized is returned by Table().Scan when a stream has no
	// table (materialization disabled or nothing compacted yet).
	ErrNotMaterialized = errors.New("lakestream: not materialized")
	// ErrTooLarge is returned by Append when an entry exceeds the
	// implementation's maximum entry size.
	ErrTooLarge = errors.New("lakestream: entry too large")
	// ErrCursorStateTooLarge is returned when a cursor's individually
	// deleted ranges exceed the bound the implementation keeps.
	ErrCursorStateTooLarge = errors.New("lakestream: cursor state too large")
	// ErrClosed is returned by any call on a closed handle or engine.
	ErrClosed = errors.New("lakestream: closed")
	// ErrInvalidArgument is returned for arguments outside the documented
	// domain (records < 1, negative sizes, malformed names).
	ErrInvalidArgument = errors.New("lakestream: invalid argument")
	// ErrConflict is returned when an optimistic update lost a race that the
	// implementation does not retry itself (stale revisions).
	ErrConflict = errors.New("lakestream: conflict")
	// ErrIndeterminate is returned by Append when the entry may or may not
	// have been committed (the metadata store failed after the request was
	// sent and the outcome could not be established). The entry is not
	// acknowledged; if it was committed it is readable exactly once.
	ErrIndeterminate = errors.New("lakestream: append outcome unknown")
	// ErrUnavailable is returned when the metadata or object store cannot be
	// reached within the call's deadline; the operation did not take effect
	// or its outcome is unknown (appends: not acknowledged).
	ErrUnavailable = errors.New("lakestream: storage unavailable")
)
