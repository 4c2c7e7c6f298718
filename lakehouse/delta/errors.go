package delta

import "errors"

// Sentinel errors; compare with errors.Is. They are wrapped with the table
// root and details.
var (
	// ErrNoTable is returned by Snapshot and Commit when <root>/_delta_log/
	// holds no commit.
	ErrNoTable = errors.New("delta: no table")
	// ErrTableExists is returned by Create when a table exists with a
	// different schema or partition columns.
	ErrTableExists = errors.New("delta: table exists with a different definition")
	// ErrUnsupportedProtocol is returned by Snapshot (minReaderVersion > 1)
	// and by Create/Commit (also minWriterVersion > 2): the table was
	// upgraded beyond what this writer implements.
	ErrUnsupportedProtocol = errors.New("delta: unsupported table protocol")
	// ErrCorruptLog is returned when a commit or checkpoint cannot be parsed
	// or versions are not contiguous. The message names the object.
	ErrCorruptLog = errors.New("delta: corrupt log")
	// ErrInvalid is returned for invalid arguments (bad schema, add without
	// its partition values, empty AppID with a TxnVersion…). A caller bug.
	ErrInvalid = errors.New("delta: invalid argument")
	// ErrUnsupportedType is returned by FromArrow for an Arrow type Delta
	// (protocol 1/2) cannot hold: unsigned ints, ns or zone-less timestamps…
	ErrUnsupportedType = errors.New("delta: unsupported type")
	// ErrTooManyConflicts is returned by Commit after maxCommitAttempts
	// versions were taken by other writers in a row.
	ErrTooManyConflicts = errors.New("delta: too many commit conflicts")
	// ErrCheckpoint is returned by Commit together with a valid version when
	// the commit succeeded but writing its checkpoint failed. The commit
	// stands; the next checkpoint will cover it.
	ErrCheckpoint = errors.New("delta: checkpoint failed")
	// ErrConflict is returned by Commit when a file it should remove is not
	// live in the table the commit would land on (another writer removed
	// it), or when some of its txns are recorded already and some not
	// (CommitRequest.MoreTxns): nothing is written.
	ErrConflict = errors.New("delta: conflicting commit")
)
