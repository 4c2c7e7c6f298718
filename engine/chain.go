package engine

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/lakegate/lakegate/lakestream"
)

// appendChain implements lakestream.AppendChain: appends of one log that
// commit in order or not at all.
//
// How the writer keeps the promise (writer.go): a chain is broken — first
// failure wins — before the failed append's done is called, by every path
// that fails an append after it took its place in the order (enqueue's
// own errors, a failed PUT, a log that cannot take the chunk, a lost
// guard, a commit that timed out or whose outcome is unknown, a chunk void
// at apply time). The commit loop handles flushes one at a time in order,
// and decides every failure but the apply-time ones while it handles the
// failing flush; it checks the chains of a log's chunk just before that
// chunk's commit transaction (commitFlush) and fails the whole chunk when
// one is broken. So when an append fails, every later append of its chain
// is either in the same chunk (which fails with it) or in a later flush
// (which has not been sent, and finds the chain broken). The failures
// decided at apply time are a fenced or deleted log (every later chunk of
// the log is void too) and a record applied whose offsets were lost
// (ErrIndeterminate: it did commit), so they keep the promise as well. A
// void of a record key answers nothing from the watch: the commit loop
// settles it (commitRecord, watchedThrough) before it moves on.
type appendChain struct {
	e   *Engine // the engine whose writer orders it
	log lakestream.LogID
	err atomic.Pointer[error]
}

var _ lakestream.AppendChain = (*appendChain)(nil)

// Err implements lakestream.AppendChain.
func (c *appendChain) Err() error {
	if p := c.err.Load(); p != nil {
		return *p
	}
	return nil
}

// breakWith breaks the chain with cause (a no-op for a nil chain or a
// chain broken already: the first failure stays).
func (c *appendChain) breakWith(cause error) {
	if c == nil || cause == nil {
		return
	}
	if errors.Is(cause, lakestream.ErrChainBroken) {
		// Refused because this chain (or another sharing the chunk)
		// broke: keep the cause, not a chain of chain errors.
		err := cause
		c.err.CompareAndSwap(nil, &err)
		return
	}
	err := fmt.Errorf("%w: %w", lakestream.ErrChainBroken, cause)
	c.err.CompareAndSwap(nil, &err)
}

// refusedArgs reports whether an append was refused, before it took a place
// in any order, for its own arguments: such a refusal does not break its
// chain (lakestream.AppendChain).
func refusedArgs(err error) bool {
	return errors.Is(err, lakestream.ErrInvalidArgument) || errors.Is(err, lakestream.ErrTooLarge)
}

// chainOf converts a lakestream.AppendChain handed to log id of engine e:
// nil, or a chain e made for that log (the order is one writer's).
func chainOf(c lakestream.AppendChain, e *Engine, id lakestream.LogID) (*appendChain, error) {
	if c == nil {
		return nil, nil
	}
	ac, ok := c.(*appendChain)
	if !ok || ac.e != e {
		return nil, fmt.Errorf("%w: append chain %T was not made by this engine", lakestream.ErrInvalidArgument, c)
	}
	if ac.log != id {
		return nil, fmt.Errorf("%w: append chain of log %d used on log %d", lakestream.ErrInvalidArgument, ac.log, id)
	}
	return ac, nil
}

// brokenChain returns the error of the first broken chain among reqs.
func brokenChain(reqs []*appendReq) error {
	for _, r := range reqs {
		if err := r.chain.errOrNil(); err != nil {
			return err
		}
	}
	return nil
}

// errOrNil is Err for a possibly nil chain.
func (c *appendChain) errOrNil() error {
	if c == nil {
		return nil
	}
	return c.Err()
}
