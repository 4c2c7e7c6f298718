package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/lakegate/lakegate/objstore"
)

// walObjectName names a WAL object: wal/<node>/<ms:013d>-<seq:08x>-<random>
// (docs/index-format.md), ms being when the name was made.
func walObjectName(node string, ms int64, seq uint64) string {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	return fmt.Sprintf("wal/%s/%013d-%08x-%s", node, ms, seq, hex.EncodeToString(rnd[:]))
}

// segmentSeq is the seq in the name of a WAL segment: above every "done"
// a window intent can carry, so that while its window's intent lives
// garbage collection keeps the segment whatever its flushes came to.
const segmentSeq = ^uint64(0)

// walSegments appends the WAL writer's flushes to one open object per node
// — a WAL segment — on a store that can (objstore.Appender, file:// only):
// one create and directory sync per segment instead of per flush
// (docs/index-format.md, "WAL segments"; docs/storage.md, "Appended
// objects"). A flush's WAL object is then a byte range of the segment;
// the commit record names the segment and the chunks' offsets in it, so
// readers and garbage collection see an object with many chunks.
//
// A segment is named in its window like any WAL object and counts one
// flush in that window from its create until it is closed, and every
// flush appended to it counts one more until it is answered, so the
// window's intent (docs/gc.md) outlives the last append. A segment takes
// appends until its window is over (and for at most maxAge after its name
// was made: the intent is then at most three windows old, far below
// PendingIntentTTL) and up to maxBytes; then, or after a failed append,
// it is retired: closed once its appends in flight are done, so that the
// window's intent goes soon after the window.
type walSegments struct {
	w        *walWriter
	store    objstore.Appender // nil: off, every flush is its own object
	maxAge   time.Duration
	maxBytes int64
	mu       struct {
		sync.Mutex
		cur *walSegment
	}
}

type walSegment struct {
	key     string
	window  int64 // start of the window intent it is counted in
	made    time.Time
	obj     objstore.Appendable
	users   int  // flushes appending to it now (under walSegments.mu)
	retired bool // takes no more flushes; closed when users is 0
}

func (s *walSegments) init(w *walWriter, store objstore.Appender) {
	s.w = w
	if w.opts.WALSegmentBytes > 0 {
		s.store = store
	}
	s.maxAge = min(w.opts.PendingWindow, w.opts.PendingIntentTTL/4)
	s.maxBytes = w.opts.WALSegmentBytes
}

// append writes f's object at the end of the current segment, making one
// if there is none or it is full or old. ok false: the flush is to be its
// own object (segments are off, or making or appending failed — that
// segment is retired); nothing of the flush is then counted in a window.
func (s *walSegments) append(ctx context.Context, f *flush) (ok bool) {
	if s.store == nil {
		return false
	}
	seg, err := s.acquire(ctx, int64(len(f.data)))
	if err != nil {
		s.w.e.metrics.segmentFallbacks.Add(1)
		s.w.opts.Logger.Warn("engine: no WAL segment, the flush is its own object", "err", err)
		return false
	}
	start := time.Now()
	off, err := seg.obj.Append(ctx, f.data)
	s.w.e.metrics.observeObject("append", start, err)
	s.done(seg, err != nil)
	if err != nil {
		s.w.windows.release(seg.window, 1)
		s.w.e.metrics.segmentFallbacks.Add(1)
		s.w.opts.Logger.Warn("engine: appending to a WAL segment failed; the flush is its own object", "segment", seg.key, "err", err)
		return false
	}
	f.object, f.window = seg.key, seg.window
	for i := range f.refs {
		f.refs[i].Offset += off
	}
	return true
}

// acquire returns the segment for n more bytes with the flush counted in
// its window and among its users.
func (s *walSegments) acquire(ctx context.Context, n int64) (*walSegment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.mu.cur; c != nil && (s.expired(c) || (c.obj.Size() > 0 && c.obj.Size()+n > s.maxBytes)) {
		s.retire(c)
	}
	if s.mu.cur == nil {
		made := s.w.opts.Now() // the clock of the window intents and of GC
		ms := made.UnixMilli()
		// Counted in the window before the file exists: GC lists an
		// object only while its intent protects it (docs/gc.md).
		window, err := s.w.windows.protect(ctx, ms, 1)
		if err != nil {
			return nil, err
		}
		key := walObjectName(s.w.opts.NodeID, ms, segmentSeq)
		start := time.Now()
		obj, err := s.store.Create(ctx, key)
		s.w.e.metrics.observeObject("segment", start, err)
		if err != nil {
			s.w.windows.release(window, 1)
			return nil, err
		}
		s.mu.cur = &walSegment{key: key, window: window, made: made, obj: obj}
	}
	c := s.mu.cur
	// The window's intent is written (the segment holds a count in it):
	// this returns at once.
	if _, err := s.w.windows.protect(ctx, c.made.UnixMilli(), 1); err != nil {
		return nil, err
	}
	c.users++
	return c, nil
}

// done ends a flush's use of seg; failed retires it.
func (s *walSegments) done(seg *walSegment, failed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seg.users--
	switch {
	case failed && !seg.retired:
		s.retire(seg) // closes it if no other flush uses it
	case seg.retired && seg.users == 0:
		s.closeSeg(seg)
	}
}

// retire takes seg out of use; it is closed now if no flush uses it.
// Called under mu.
func (s *walSegments) retire(seg *walSegment) {
	if seg.retired {
		return
	}
	seg.retired = true
	if s.mu.cur == seg {
		s.mu.cur = nil
	}
	if seg.users == 0 {
		s.closeSeg(seg)
	}
}

// closeSeg closes seg (no append is in flight) and releases its own count
// in its window. Called under mu, once per segment.
func (s *walSegments) closeSeg(seg *walSegment) {
	if err := seg.obj.Close(); err != nil {
		s.w.opts.Logger.Warn("engine: closing a WAL segment", "segment", seg.key, "err", err)
	}
	s.w.windows.release(seg.window, 1)
}

// retireOld retires the current segment once it is too old to take
// appends (expired), so that an idle writer holds no open segment and its window's
// intent can go (called by the window intents' loop, before the sweep).
func (s *walSegments) retireOld() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.mu.cur; c != nil && s.expired(c) {
		s.retire(c)
	}
}

// expired: seg's window is over, or seg is older than maxAge.
func (s *walSegments) expired(seg *walSegment) bool {
	now := s.w.opts.Now()
	ms := now.UnixMilli()
	return ms-ms%s.w.windows.span() != seg.window || now.Sub(seg.made) > s.maxAge
}

// close retires the current segment (the writer has stopped: no flush
// uses it).
func (s *walSegments) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.mu.cur; c != nil {
		s.retire(c)
	}
}
