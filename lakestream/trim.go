package lakestream

// The trim floor: the one rule of how far a log may be trimmed, shared by
// the two layers that trim logs — Pulsar retention (the gateway's
// policies, docs/policies.md) and table retention (the tables package,
// docs/compaction.md "Table retention"). Each reads the holds it knows of
// its own way (a running subscription's actor, a table claim) and asks
// TrimFloor where the trim must stop.

import (
	"math"
	"strings"
)

const (
	// InternalCursorPrefix starts the names of the log cursors the broker
	// keeps for itself; they are not subscriptions (listings skip them,
	// SUBSCRIBE refuses the names, and only CompactionCursor among them
	// holds a trim).
	InternalCursorPrefix = "__lakegate."
	// CompactionCursor is the internal cursor of a key-compacted topic
	// (docs/compacted-topics.md): with a "generation" property > 0, the
	// log from its mark-delete offset + 1 on is what the next key
	// compaction reads, so no trim goes past it.
	CompactionCursor = InternalCursorPrefix + "compaction"
)

// IsInternalCursor reports whether a log cursor is the broker's own, not a
// subscription.
func IsInternalCursor(name string) bool { return strings.HasPrefix(name, InternalCursorPrefix) }

// NoHold is the value of a TrimHolds field that holds nothing.
const NoHold int64 = math.MaxInt64

// TrimHolds are what a log still needs, each as the first offset it keeps
// (NoHold: nothing). The zero value holds everything from offset 0: start
// from NoHolds.
type TrimHolds struct {
	// Subscriptions are the first offsets the log's durable subscriptions
	// have not acknowledged as persisted (persisted mark-delete offset +
	// 1: what a restarted node resumes from). Not retained after the call.
	Subscriptions []int64
	// KeyCompaction is what the next key compaction of a compacted topic
	// reads from (CompactionCursor's mark-delete + 1 when its generation
	// is > 0).
	KeyCompaction int64
	// UnfinishedClaim is the start of the range of a table claim that is
	// not finished yet (its files not yet the log's storage).
	UnfinishedClaim int64
	// TableEnd is the table's compacted end for a materialized log: the
	// offset just past what its table holds.
	TableEnd int64
}

// NoHolds is a TrimHolds that holds nothing.
func NoHolds() TrimHolds {
	return TrimHolds{KeyCompaction: NoHold, UnfinishedClaim: NoHold, TableEnd: NoHold}
}

// AddCursor adds to h the hold of the durable cursor name (mark-delete
// markDelete, persisted mark-delete persisted, properties props): a
// subscription holds from its persisted position + 1 on, CompactionCursor
// from its mark-delete + 1 on while its generation is > 0, any other
// internal cursor nothing.
func (h *TrimHolds) AddCursor(name string, markDelete, persisted int64, props map[string]int64) {
	switch {
	case name == CompactionCursor:
		if props["generation"] > 0 {
			h.KeyCompaction = min(h.KeyCompaction, markDelete+1)
		}
	case IsInternalCursor(name):
	default:
		h.Subscriptions = append(h.Subscriptions, persisted+1)
	}
}

// TrimFloor returns the offset a log may be trimmed below: want (what
// retention would let go), lowered to the first offset any hold keeps —
// never below a durable subscription's persisted position, a compacted
// topic's key-compaction cursor, an unfinished table claim or the table's
// compacted end. The caller still rounds it down to an entry boundary.
func TrimFloor(want int64, h TrimHolds) int64 {
	cut := min(want, h.KeyCompaction, h.UnfinishedClaim, h.TableEnd)
	for _, s := range h.Subscriptions {
		cut = min(cut, s)
	}
	return cut
}
