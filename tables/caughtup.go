package tables

import (
	"fmt"
	"time"

	"github.com/lakegate/lakegate/engine"
	"github.com/lakegate/lakegate/lakestream"
)

// An idle log costs the materialization worker a call every few seconds,
// each reading the log's head and the table's claim from the metadata
// store: with a thousand idle topics, most of an idle node's CPU. A log
// the table held whole is skipped instead until its engine reports a new
// commit record for it (a changed LogRevision) — or for at most
// caughtUpRecheck, a bound on what a missed change could cost.

// caughtUpRecheck is the longest a caught-up log goes without a call.
const caughtUpRecheck = 5 * time.Minute

var (
	// errCaughtUp: no chunk past the table's end; the table holds the
	// whole log (a kind of ErrNothingToCompact).
	errCaughtUp = fmt.Errorf("%w: the table holds the whole log", engine.ErrNothingToCompact)
	// errNothingNew: the call was skipped; nothing was committed since
	// the table last held the whole log.
	errNothingNew = fmt.Errorf("%w: nothing committed since the table held the whole log", engine.ErrNothingToCompact)
)

type caughtUpAt struct {
	rev int64
	at  time.Time
}

// logRevisions is the engine's LogRevision (an optional capability of
// the Port: without it no call is skipped).
type logRevisions interface {
	LogRevision(id lakestream.LogID) int64
}

// unchanged returns log id's revision now and whether the table held the
// whole log at that same revision less than caughtUpRecheck ago.
func (t *Tables) unchanged(id lakestream.LogID) (rev int64, skip bool) {
	lr, ok := t.e.(logRevisions)
	if !ok {
		return 0, false
	}
	rev = lr.LogRevision(id)
	t.caughtUp.Lock()
	defer t.caughtUp.Unlock()
	c, ok := t.caughtUp.m[id]
	return rev, ok && c.rev == rev && t.opts.Now().Sub(c.at) < caughtUpRecheck
}

// markCaughtUp records that the table held the whole of log id at rev,
// the revision read before the call that found it so (a record applied
// during the call changes the revision: the next call runs).
func (t *Tables) markCaughtUp(id lakestream.LogID, rev int64) {
	if _, ok := t.e.(logRevisions); !ok {
		return
	}
	t.caughtUp.Lock()
	defer t.caughtUp.Unlock()
	if t.caughtUp.m == nil {
		t.caughtUp.m = map[lakestream.LogID]caughtUpAt{}
	}
	t.caughtUp.m[id] = caughtUpAt{rev: rev, at: t.opts.Now()}
}
