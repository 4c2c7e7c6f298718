package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/lakegate/lakegate/engine/cursor"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
)

// durableCursor is the engine's lakestream.LogCursor, durable or ephemeral.
// Its acknowledgement state is a cursor.State; durable cursors persist it
// (docs/cursor-format.md) under logs/<log>/cursor/<name> — on MarkDelete,
// every CursorPersistInterval when it changed, and on Close.
//
// Lock order: persistMu before mu. One subscription owns a cursor; the locks
// exist for the engine's background persister.
type durableCursor struct {
	l       *logHandle
	name    string
	durable bool
	// guard, when set, guards every write of the state (lakestream.Guard).
	guard *ownership

	persistMu sync.Mutex // serializes writes of the state, in version order

	mu struct {
		sync.Mutex
		st           *cursor.State
		readOffset   int64
		persistedVer uint64
		persistedMD  int64
		// modRev is the ModRevision of the cursor key this handle last
		// wrote or read: a persist compares it, so a cursor deleted (or
		// taken over) elsewhere is never written back.
		modRev int64
		// unknown holds the values of writes whose outcome was unknown
		// since the last write known to have applied (at most
		// unknownWritesMax, oldest dropped): a later compare that fails
		// because one of them did apply is not a conflict.
		unknown [][]byte
		closed  bool
	}
}

// unknownWritesMax bounds durableCursor.mu.unknown.
const unknownWritesMax = 8

var _ lakestream.LogCursor = (*durableCursor)(nil)

func (l *logHandle) newCursor(name string, st *cursor.State, durable bool, modRev int64, g *ownership) *durableCursor {
	persisted := modRev > 0
	c := &durableCursor{l: l, name: name, durable: durable, guard: g}
	c.mu.modRev = modRev
	c.mu.st = st
	c.mu.readOffset = st.FirstUnacked()
	c.mu.persistedMD = -1
	if persisted {
		c.mu.persistedVer = st.Version()
		c.mu.persistedMD = st.MarkDeleteOffset()
	}
	if durable {
		l.e.mu.Lock()
		l.e.mu.cursors[c] = struct{}{}
		l.e.mu.Unlock()
	}
	return c
}

func checkCursorName(name string) error {
	if name == "" || len(name) > 1024 {
		return fmt.Errorf("%w: cursor name %q", lakestream.ErrInvalidArgument, name)
	}
	return nil
}

// OpenCursor implements lakestream.Log.
func (l *logHandle) OpenCursor(ctx context.Context, name string, initialMarkDelete int64, opts ...lakestream.CursorOption) (lakestream.LogCursor, error) {
	if err := checkCursorName(name); err != nil {
		return nil, err
	}
	g, err := guardOf(lakestream.ApplyCursorOptions(opts).Guard)
	if err != nil {
		return nil, err
	}
	if _, err := l.refresh(ctx); err != nil {
		return nil, err // ErrNoSuchLog for a deleted log
	}
	key := l.e.keys.cursor(l.id, name)
	for {
		c, err := l.LoadCursor(ctx, name, opts...)
		if !errors.Is(err, lakestream.ErrNoSuchCursor) {
			return c, err
		}
		st := cursor.New(max(initialMarkDelete, -1))
		ok, rev, err := l.e.meta.Txn(ctx, g.cmps(meta.Cmp{Key: key}), []meta.Op{meta.Put(key, cursor.Encode(st))})
		if err != nil {
			return nil, fmt.Errorf("%w: create cursor %q: %w", lakestream.ErrUnavailable, name, err)
		}
		if ok {
			return l.newCursor(name, st, true, rev, g), nil
		}
		if err := g.check(ctx, l.e.meta); err != nil {
			return nil, err
		}
		// Created concurrently: load it.
	}
}

// OpenEphemeralCursor implements lakestream.Log.
func (l *logHandle) OpenEphemeralCursor(ctx context.Context, name string, initialReadOffset int64) (lakestream.LogCursor, error) {
	st := cursor.New(max(initialReadOffset, 0) - 1)
	return l.newCursor(name, st, false, 0, nil), nil
}

// LoadCursor implements lakestream.Log.
func (l *logHandle) LoadCursor(ctx context.Context, name string, opts ...lakestream.CursorOption) (lakestream.LogCursor, error) {
	if err := checkCursorName(name); err != nil {
		return nil, err
	}
	g, err := guardOf(lakestream.ApplyCursorOptions(opts).Guard)
	if err != nil {
		return nil, err
	}
	if _, err := l.refresh(ctx); err != nil {
		return nil, err
	}
	kv, found, err := l.e.meta.Get(ctx, l.e.keys.cursor(l.id, name))
	if err != nil {
		return nil, fmt.Errorf("%w: load cursor %q: %w", lakestream.ErrUnavailable, name, err)
	}
	if !found {
		return nil, fmt.Errorf("%w: %q on log %d", lakestream.ErrNoSuchCursor, name, l.id)
	}
	st, err := cursor.Decode(kv.Value)
	if err != nil {
		return nil, fmt.Errorf("cursor %q on log %d: %w", name, l.id, err)
	}
	return l.newCursor(name, st, true, kv.ModRevision, g), nil
}

// CursorNames implements lakestream.Log.
func (l *logHandle) CursorNames(ctx context.Context) ([]string, error) {
	p := l.e.keys.cursorPrefix(l.id)
	kvs, err := l.e.meta.Range(ctx, p, prefixEnd(p), 0)
	if err != nil {
		return nil, fmt.Errorf("%w: list cursors: %w", lakestream.ErrUnavailable, err)
	}
	names := make([]string, len(kvs))
	for i, kv := range kvs {
		names[i] = kv.Key[len(p):]
	}
	sort.Strings(names)
	return names, nil
}

// DeleteCursor implements lakestream.Log. Open handles of the cursor on this
// engine are closed without persisting.
func (l *logHandle) DeleteCursor(ctx context.Context, name string) error {
	l.e.mu.Lock()
	var open []*durableCursor
	for c := range l.e.mu.cursors {
		if c.l == l && c.name == name {
			open = append(open, c)
		}
	}
	l.e.mu.Unlock()
	for _, c := range open {
		c.markClosed()
	}
	if _, _, err := l.e.meta.Txn(ctx, nil, []meta.Op{meta.Delete(l.e.keys.cursor(l.id, name))}); err != nil {
		return fmt.Errorf("%w: delete cursor %q: %w", lakestream.ErrUnavailable, name, err)
	}
	return nil
}

func (c *durableCursor) markClosed() {
	c.mu.Lock()
	c.mu.closed = true
	c.mu.Unlock()
	c.l.e.mu.Lock()
	delete(c.l.e.mu.cursors, c)
	c.l.e.mu.Unlock()
}

func (c *durableCursor) Name() string  { return c.name }
func (c *durableCursor) Durable() bool { return c.durable }

func (c *durableCursor) ReadOffset() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.readOffset
}

func (c *durableCursor) MarkDeleteOffset() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.st.MarkDeleteOffset()
}

func (c *durableCursor) PersistedMarkDeleteOffset() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.durable {
		return c.mu.st.MarkDeleteOffset()
	}
	return c.mu.persistedMD
}

func (c *durableCursor) Properties() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.st.Properties()
}

// ReadEntries implements lakestream.LogCursor.
func (c *durableCursor) ReadEntries(ctx context.Context, maxEntries int, maxBytes int64) ([]lakestream.Entry, error) {
	if maxEntries < 1 {
		return nil, nil
	}
	h, err := c.l.refresh(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return nil, lakestream.ErrClosed
	}
	start := max(c.mu.readOffset, h.First)
	st := c.mu.st.Clone()
	c.mu.Unlock()

	start = st.NextUnackedFrom(start)
	var out []lakestream.Entry
	var bytes int64
	next := start
	err = c.l.walk(ctx, start, h.Next, true, func(e lakestream.Entry) bool {
		if len(out) > 0 && bytes+int64(e.Size) > maxBytes {
			return false
		}
		next = e.End()
		if st.UnackedIn(e.Offset, e.End()) == 0 {
			return true // every record acknowledged: skip
		}
		out = append(out, e)
		bytes += int64(e.Size)
		return len(out) < maxEntries && bytes < maxBytes
	})
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.mu.readOffset < next {
		c.mu.readOffset = next
	}
	c.mu.Unlock()
	return out, nil
}

// SeekOffset implements lakestream.LogCursor.
func (c *durableCursor) SeekOffset(offset int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.readOffset = max(offset, 0)
}

// MarkDelete implements lakestream.LogCursor.
func (c *durableCursor) MarkDelete(ctx context.Context, inclusive int64, properties map[string]int64) error {
	if err := cursor.CheckProperties(properties); err != nil {
		return fmt.Errorf("%w: %w", lakestream.ErrInvalidArgument, err)
	}
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return lakestream.ErrClosed
	}
	c.mu.st.MarkDelete(inclusive, properties)
	if c.mu.readOffset <= c.mu.st.MarkDeleteOffset() {
		c.mu.readOffset = c.mu.st.MarkDeleteOffset() + 1
	}
	c.mu.Unlock()
	return c.persist(ctx)
}

// IndividualDelete implements lakestream.LogCursor.
func (c *durableCursor) IndividualDelete(offset int64, records int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return lakestream.ErrClosed
	}
	if err := c.mu.st.Ack(offset, records); err != nil {
		if errors.Is(err, cursor.ErrStateTooLarge) {
			return fmt.Errorf("%w: %w", lakestream.ErrCursorStateTooLarge, err)
		}
		return fmt.Errorf("%w: %w", lakestream.ErrInvalidArgument, err)
	}
	return nil
}

func (c *durableCursor) IsIndividuallyDeleted(offset int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.st.IsAcked(offset)
}

func (c *durableCursor) IndividualDeleteCount() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.st.AckedCount()
}

func (c *durableCursor) AckedRanges() [][2]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.st.Ranges()
}

func (c *durableCursor) FirstNonDeletedOffset() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.st.FirstUnacked()
}

// PersistState implements lakestream.LogCursor.
func (c *durableCursor) PersistState(ctx context.Context) error { return c.persist(ctx) }

// persist writes the state if it changed since the last write.
func (c *durableCursor) persist(ctx context.Context) error {
	if !c.durable {
		return nil
	}
	c.persistMu.Lock()
	defer c.persistMu.Unlock()
	c.mu.Lock()
	if c.mu.closed || c.mu.st.Version() == c.mu.persistedVer {
		c.mu.Unlock()
		return nil
	}
	b := cursor.Encode(c.mu.st)
	ver, md, modRev := c.mu.st.Version(), c.mu.st.MarkDeleteOffset(), c.mu.modRev
	c.mu.Unlock()
	key := c.l.e.keys.cursor(c.l.id, c.name)
	for {
		if err := c.guard.held(); err != nil {
			c.markClosed()
			return fmt.Errorf("persist cursor %q: %w", c.name, err)
		}
		ok, rev, err := c.l.e.meta.Txn(ctx, c.guard.cmps(meta.Cmp{Key: key, ModRevision: modRev}), []meta.Op{meta.Put(key, b)})
		if err != nil {
			// Unknown outcome: re-read the key's revision before the next
			// try, and remember the value in case the write applied
			// unseen (a reply lost in an etcd leader change, the re-read
			// failing too).
			c.mu.Lock()
			c.mu.unknown = append(c.mu.unknown, b)
			if len(c.mu.unknown) > unknownWritesMax {
				c.mu.unknown = c.mu.unknown[1:]
			}
			c.mu.Unlock()
			if kv, found, gerr := c.l.e.meta.Get(ctx, key); gerr == nil && found {
				c.mu.Lock()
				if sameCursorValue(kv.Value, b) {
					c.mu.modRev = kv.ModRevision
				}
				c.mu.Unlock()
			}
			return fmt.Errorf("%w: persist cursor %q: %w", lakestream.ErrUnavailable, c.name, err)
		}
		if !ok {
			if err := c.guard.check(ctx, c.l.e.meta); err != nil {
				c.markClosed()
				return fmt.Errorf("persist cursor %q: %w", c.name, err)
			}
			// The key moved: by an earlier write of this handle whose
			// outcome was unknown (then write again after it), or
			// elsewhere (deleted, rewritten by another owner: this handle
			// is stale).
			kv, found, gerr := c.l.e.meta.Get(ctx, key)
			if gerr != nil {
				return fmt.Errorf("%w: persist cursor %q: %w", lakestream.ErrUnavailable, c.name, gerr)
			}
			c.mu.Lock()
			own := found && slices.ContainsFunc(c.mu.unknown, func(u []byte) bool { return sameCursorValue(kv.Value, u) })
			if own {
				c.mu.modRev, c.mu.unknown = kv.ModRevision, nil
				modRev = kv.ModRevision
			}
			c.mu.Unlock()
			if own {
				continue
			}
			c.markClosed()
			return fmt.Errorf("%w: cursor %q on log %d was deleted or changed elsewhere", lakestream.ErrConflict, c.name, c.l.id)
		}
		c.l.e.metrics.cursorPersists.Add(1)
		c.mu.Lock()
		c.mu.persistedVer, c.mu.persistedMD, c.mu.modRev, c.mu.unknown = ver, md, rev, nil
		c.mu.Unlock()
		return nil
	}
}

// sameCursorValue reports whether a stored cursor value is the state
// encoded as b.
func sameCursorValue(v, b []byte) bool {
	st, err := cursor.Decode(v)
	return err == nil && bytes.Equal(cursor.Encode(st), b)
}

// HasMoreEntries implements lakestream.LogCursor.
func (c *durableCursor) HasMoreEntries(ctx context.Context) (bool, error) {
	h, err := c.l.refresh(ctx)
	if err != nil {
		return false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.st.NextUnackedFrom(max(c.mu.readOffset, h.First)) < h.Next, nil
}

// Backlog implements lakestream.LogCursor.
func (c *durableCursor) Backlog(ctx context.Context) (lakestream.Backlog, error) {
	h, err := c.l.refresh(ctx)
	if err != nil {
		return lakestream.Backlog{}, err
	}
	c.mu.Lock()
	from := max(c.mu.st.MarkDeleteOffset()+1, h.First)
	recs := c.mu.st.UnackedIn(from, h.Next)
	c.mu.Unlock()
	if from >= h.Next {
		return lakestream.Backlog{}, nil
	}
	e, err := c.l.EntryHeader(ctx, from)
	if err != nil {
		return lakestream.Backlog{Records: recs}, err
	}
	return lakestream.Backlog{Records: recs, Bytes: h.Bytes - (e.CumulativeSize - int64(e.Size))}, nil
}

// Delete implements lakestream.LogCursor.
func (c *durableCursor) Delete(ctx context.Context) error {
	c.markClosed()
	if !c.durable {
		return nil
	}
	return c.l.DeleteCursor(ctx, c.name)
}

// Close implements lakestream.LogCursor.
func (c *durableCursor) Close(ctx context.Context) error {
	err := c.persist(ctx)
	c.markClosed()
	return err
}

// persistLoop writes dirty durable cursors every CursorPersistInterval.
func (e *Engine) persistLoop() {
	defer e.bg.Done()
	t := time.NewTicker(e.opts.CursorPersistInterval)
	defer t.Stop()
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-t.C:
		}
		e.mu.Lock()
		cs := make([]*durableCursor, 0, len(e.mu.cursors))
		for c := range e.mu.cursors {
			cs = append(cs, c)
		}
		e.mu.Unlock()
		for _, c := range cs {
			if err := c.persist(e.ctx); err != nil && e.ctx.Err() == nil {
				e.opts.Logger.Warn("engine: persist cursor", "cursor", c.name, "log", c.l.id, "err", err)
			}
		}
	}
}
