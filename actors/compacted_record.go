package actors

// The compaction record (docs/compacted-topics.md, "The compaction
// record"): what a topic-partition keeps of its compactions, stored as the
// state of its internal durable cursor CompactionCursor — mark-delete =
// horizon − 1 and these int64 properties (docs/cursor-format.md):
//
//	generation       the current compacted log (0: no compacted view)
//	triedGeneration  the highest generation a compaction created a log for
//	                 (absent: generation); a dropped stream's name is never
//	                 reused, so the next compaction starts above it
//	kept             records in the current view
//	removed          records the last successful compaction removed
//	status           the last finished compaction: 0 none, 1 SUCCESS, 2 ERROR
//	                 (absent: 1 when generation > 0, else 0 — a record
//	                 written before this property existed)
//	succeededMs      when the last successful compaction ended (Unix ms; 0: never)
//	durationMs       how long it took (ms)
//	failedMs         when the last failed compaction ended (Unix ms; 0: never)
//	error:<reason>   the last failure's reason, in the key (value 0), at
//	                 most CompactionErrorBytesMax bytes (cut at a UTF-8
//	                 boundary, "…" marking the cut); only while status is 2
//
// The record is written by the partition's owner only (a guarded cursor),
// so every later owner reads the outcome of the last finished compaction.

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrCompactionRecord: a compaction cursor's properties that do not form a
// compaction record (DecodeCompactionRecord; the gateway then cannot read
// the topic's compacted view).
var ErrCompactionRecord = errors.New("actors: malformed compaction record")

// CompactionOutcome is how the last finished compaction of a partition
// ended (Pulsar's LongRunningProcessStatus, without RUNNING: a running
// compaction is known only to the owner running it).
type CompactionOutcome uint8

const (
	// CompactionNotRun: no compaction finished (NOT_RUN).
	CompactionNotRun CompactionOutcome = iota
	// CompactionSucceeded: the last one succeeded (SUCCESS).
	CompactionSucceeded
	// CompactionFailed: the last one failed (ERROR, with its reason).
	CompactionFailed
)

// String is the outcome as Pulsar's LongRunningProcessStatus names it.
func (o CompactionOutcome) String() string {
	switch o {
	case CompactionSucceeded:
		return "SUCCESS"
	case CompactionFailed:
		return "ERROR"
	default:
		return "NOT_RUN"
	}
}

const (
	// CompactionErrorBytesMax bounds the reason of a failure a record
	// keeps (bytes, "…" included); the cursor format allows property keys
	// of 256 bytes.
	CompactionErrorBytesMax = 200

	compactionErrorKeyPrefix = "error:"
	compactionStatusProperty = "status"
)

// CompactionRecord is a partition's compaction record.
type CompactionRecord struct {
	// Generation names the current compacted log (0: none) and Horizon
	// the first offset after the compacted view.
	Generation, Horizon int64
	// Tried is the highest generation a compaction created (or tried to
	// create) a compacted log for, ≥ Generation.
	Tried int64
	// Kept is the number of records in the view; Removed the records the
	// last successful compaction removed.
	Kept, Removed int64
	// Outcome is how the last finished compaction ended.
	Outcome CompactionOutcome
	// SucceededMs and FailedMs are when the last successful and the last
	// failed compaction ended (Unix ms, 0: never); DurationMs is how long
	// the last successful one took (ms).
	SucceededMs, DurationMs, FailedMs int64
	// Error is the last failure's reason (at most CompactionErrorBytesMax
	// bytes: see TruncateCompactionError), kept while Outcome is
	// CompactionFailed.
	Error string
}

// Succeed records a successful compaction that ended at endMs, took
// durationMs, made generation gen with horizon, keeping kept records and
// removing removed.
func (r *CompactionRecord) Succeed(gen, horizon, kept, removed, endMs, durationMs int64) {
	r.Generation, r.Horizon, r.Kept, r.Removed, r.Tried = gen, horizon, kept, removed, max(r.Tried, gen)
	r.Outcome, r.SucceededMs, r.DurationMs, r.Error = CompactionSucceeded, endMs, durationMs, ""
}

// Fail records a compaction that failed at endMs with reason (truncated),
// having tried generations up to tried; the view stays.
func (r *CompactionRecord) Fail(endMs, tried int64, reason string) {
	r.Outcome, r.FailedMs, r.Error = CompactionFailed, endMs, TruncateCompactionError(reason)
	r.Tried = max(r.Tried, tried)
}

// TruncateCompactionError returns reason cut to CompactionErrorBytesMax
// bytes at a UTF-8 boundary, "…" marking a cut. It is idempotent.
func TruncateCompactionError(reason string) string {
	if len(reason) <= CompactionErrorBytesMax {
		return reason
	}
	const mark = "…"
	cut := CompactionErrorBytesMax - len(mark)
	for cut > 0 && !utf8.RuneStart(reason[cut]) {
		cut--
	}
	return reason[:cut] + mark
}

// MarkDelete is the compaction cursor's mark-delete offset for r.
func (r CompactionRecord) MarkDelete() int64 { return r.Horizon - 1 }

// Properties are the compaction cursor's properties for r (a new map).
func (r CompactionRecord) Properties() map[string]int64 {
	p := map[string]int64{
		"generation":             r.Generation,
		"triedGeneration":        max(r.Tried, r.Generation),
		"kept":                   r.Kept,
		"removed":                r.Removed,
		compactionStatusProperty: int64(r.Outcome),
		"succeededMs":            r.SucceededMs,
		"durationMs":             r.DurationMs,
		"failedMs":               r.FailedMs,
	}
	if r.Error != "" && r.Outcome == CompactionFailed {
		p[compactionErrorKeyPrefix+TruncateCompactionError(r.Error)] = 0
	}
	return p
}

// DecodeCompactionRecord reads a compaction record from the compaction
// cursor's mark-delete offset and properties. Properties it does not know
// are ignored; a status it does not know reads as CompactionNotRun. It
// fails (ErrCompactionRecord) on a negative generation, count or time, a
// mark-delete below −1, or more than one reason.
func DecodeCompactionRecord(markDelete int64, props map[string]int64) (CompactionRecord, error) {
	if markDelete < -1 {
		return CompactionRecord{}, fmt.Errorf("%w: mark-delete %d", ErrCompactionRecord, markDelete)
	}
	r := CompactionRecord{
		Generation:  props["generation"],
		Tried:       props["triedGeneration"],
		Horizon:     markDelete + 1,
		Kept:        props["kept"],
		Removed:     props["removed"],
		SucceededMs: props["succeededMs"],
		DurationMs:  props["durationMs"],
		FailedMs:    props["failedMs"],
	}
	for name, v := range map[string]int64{"generation": r.Generation, "triedGeneration": r.Tried, "kept": r.Kept, "removed": r.Removed,
		"succeededMs": r.SucceededMs, "durationMs": r.DurationMs, "failedMs": r.FailedMs} {
		if v < 0 {
			return CompactionRecord{}, fmt.Errorf("%w: %s %d", ErrCompactionRecord, name, v)
		}
	}
	r.Tried = max(r.Tried, r.Generation)
	status, ok := props[compactionStatusProperty]
	switch {
	case !ok && r.Generation > 0:
		r.Outcome = CompactionSucceeded
	case status == int64(CompactionSucceeded), status == int64(CompactionFailed):
		r.Outcome = CompactionOutcome(status)
	}
	reasons := 0
	for k := range props {
		if reason, ok := strings.CutPrefix(k, compactionErrorKeyPrefix); ok {
			if reasons++; reasons > 1 {
				return CompactionRecord{}, fmt.Errorf("%w: more than one reason", ErrCompactionRecord)
			}
			if r.Outcome == CompactionFailed {
				r.Error = TruncateCompactionError(reason)
			}
		}
	}
	return r, nil
}
