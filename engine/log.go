package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/lakegate/lakegate/engine/index"
	"github.com/lakegate/lakegate/engine/wal"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
	"github.com/lakegate/lakegate/objstore"
)

// logHandle is the engine's lakestream.Log. One handle per log per Engine;
// it caches the head (kept fresh by a watch and by local commits) and wakes
// waiting readers when it advances.
type logHandle struct {
	e  *Engine
	id lakestream.LogID

	once    sync.Once
	initErr error

	mu struct {
		sync.Mutex
		head    head
		changed chan struct{} // closed and replaced on every head change
	}
}

var _ lakestream.Log = (*logHandle)(nil)

func newLogHandle(e *Engine, id lakestream.LogID) *logHandle {
	l := &logHandle{e: e, id: id}
	l.mu.changed = make(chan struct{})
	return l
}

// ensure loads (creating if absent) the log's head and starts its watch.
func (l *logHandle) ensure(ctx context.Context) error {
	l.once.Do(func() { l.initErr = l.init(ctx) })
	if l.initErr != nil {
		// Let a later call try again (e.g. the store was briefly down).
		l.e.mu.Lock()
		if l.e.mu.logs[l.id] == l {
			delete(l.e.mu.logs, l.id)
		}
		l.e.mu.Unlock()
		return l.initErr
	}
	if l.snapshot().Deleted {
		return fmt.Errorf("%w: log %d", lakestream.ErrNoSuchLog, l.id)
	}
	return nil
}

func (l *logHandle) init(ctx context.Context) error {
	key := l.e.keys.head(l.id)
	kv, found, err := l.e.meta.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("%w: log %d head: %w", lakestream.ErrUnavailable, l.id, err)
	}
	var h head
	rev := kv.ModRevision
	if found {
		if h, err = decodeHead(kv.Value); err != nil {
			return err
		}
	} else {
		ok, r, err := l.e.meta.Txn(ctx, []meta.Cmp{{Key: key}}, []meta.Op{meta.Put(key, head{}.Encode())})
		if err != nil {
			return fmt.Errorf("%w: create log %d: %w", lakestream.ErrUnavailable, l.id, err)
		}
		rev = r
		if !ok { // created concurrently: read it
			return l.init(ctx)
		}
	}
	l.observeHead(h, rev)
	l.e.bg.Add(1)
	go l.watch(rev)
	return nil
}

// observeHead merges a head seen anywhere into the cached one. Every field
// of a head is monotone (offsets and bytes only grow, flags only get set),
// so merging by maximum is correct in any order of arrival.
func (l *logHandle) observeHead(h head, _ int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.mu.head
	n := head{
		Next: max(c.Next, h.Next), First: max(c.First, h.First), Bytes: max(c.Bytes, h.Bytes),
		Fenced: c.Fenced || h.Fenced, Deleted: c.Deleted || h.Deleted,
	}
	if n != c {
		l.mu.head = n
		close(l.mu.changed)
		l.mu.changed = make(chan struct{})
	}
}

func (l *logHandle) snapshot() head {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.head
}

func (l *logHandle) changed() (head, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.head, l.mu.changed
}

// watch follows the head key until the engine closes, re-reading and
// re-watching whenever the watch stream ends.
func (l *logHandle) watch(afterRev int64) {
	defer l.e.bg.Done()
	ctx := l.e.ctx
	key := l.e.keys.head(l.id)
	for attempt := 0; ctx.Err() == nil; {
		for ev := range l.e.meta.Watch(ctx, key, afterRev) {
			attempt = 0
			afterRev = ev.KV.ModRevision
			if ev.Kind != meta.EventPut || ev.KV.Key != key {
				continue
			}
			if h, err := decodeHead(ev.KV.Value); err == nil {
				l.observeHead(h, ev.KV.ModRevision)
			}
		}
		if ctx.Err() != nil {
			return
		}
		attempt++
		if backoff(ctx, attempt) != nil {
			return
		}
		kv, found, err := l.e.meta.Get(ctx, key)
		if err != nil || !found {
			continue
		}
		if h, err := decodeHead(kv.Value); err == nil {
			l.observeHead(h, kv.ModRevision)
		}
		afterRev = kv.ModRevision
	}
}

// refresh reads the head from the metadata store (linearizable) and merges
// it. Non-waiting reads use it so that a reader never misses an append that
// finished before the read started, on any node.
func (l *logHandle) refresh(ctx context.Context) (head, error) {
	kv, found, err := l.e.meta.Get(ctx, l.e.keys.head(l.id))
	if err != nil {
		return head{}, fmt.Errorf("%w: log %d head: %w", lakestream.ErrUnavailable, l.id, err)
	}
	if found {
		h, err := decodeHead(kv.Value)
		if err != nil {
			return head{}, err
		}
		l.observeHead(h, kv.ModRevision)
	}
	h := l.snapshot()
	if h.Deleted {
		return h, fmt.Errorf("%w: log %d", lakestream.ErrNoSuchLog, l.id)
	}
	return h, nil
}

// ID implements lakestream.Log.
func (l *logHandle) ID() lakestream.LogID { return l.id }

// Append implements lakestream.Log.
func (l *logHandle) Append(ctx context.Context, records int, payload []byte, opts ...lakestream.AppendOption) (lakestream.EntryHeader, error) {
	if err := l.checkAppend(records, payload); err != nil {
		return lakestream.EntryHeader{}, err
	}
	o := lakestream.ApplyAppendOptions(opts)
	g, err := guardOf(o.Guard)
	if err != nil {
		return lakestream.EntryHeader{}, err
	}
	return l.e.writer.append(ctx, l.id, int32(records), payload, o.PublishTimeMs, g)
}

func (l *logHandle) AppendAsync(ctx context.Context, records int, payload []byte, done func(lakestream.EntryHeader, error), opts ...lakestream.AppendOption) error {
	if err := l.checkAppend(records, payload); err != nil {
		return err
	}
	o := lakestream.ApplyAppendOptions(opts)
	g, err := guardOf(o.Guard)
	if err != nil {
		return err
	}
	if !o.Donate {
		payload = append([]byte(nil), payload...)
	}
	return l.e.writer.enqueue(ctx, l.id, int32(records), payload, o.PublishTimeMs, g, func(r appendResult) { done(r.h, r.err) })
}

// checkAppend validates an append and refuses it at once on a log known to
// be deleted or fenced.
func (l *logHandle) checkAppend(records int, payload []byte) error {
	if records < 1 || records > math.MaxInt32 {
		return fmt.Errorf("%w: records %d", lakestream.ErrInvalidArgument, records)
	}
	if len(payload) > l.e.opts.MaxEntryBytes {
		return fmt.Errorf("%w: %d bytes > %d", lakestream.ErrTooLarge, len(payload), l.e.opts.MaxEntryBytes)
	}
	if l.e.closed() {
		return lakestream.ErrClosed
	}
	h := l.snapshot()
	if h.Deleted {
		return fmt.Errorf("%w: log %d", lakestream.ErrNoSuchLog, l.id)
	}
	if h.Fenced {
		return fmt.Errorf("%w: log %d", lakestream.ErrFenced, l.id)
	}
	return nil
}

// loadedChunk is a decoded chunk: its entries in order, payloads aliasing
// one buffer. Immutable once built (it is shared through the cache).
type loadedChunk struct {
	size    int64
	writeMs int64
	entries []wal.DecodedEntry
}

// chunkFromObject decodes one chunk of a just-built object into a private
// copy (so the cache does not pin the whole object).
func chunkFromObject(obj []byte, ref wal.ChunkRef) (*loadedChunk, error) {
	if ref.Offset < 0 || ref.Length < 0 || ref.Offset+ref.Length > int64(len(obj)) {
		return nil, fmt.Errorf("%w: chunk out of object", wal.ErrCorrupt)
	}
	return decodeChunk(append([]byte(nil), obj[ref.Offset:ref.Offset+ref.Length]...))
}

func decodeChunk(b []byte) (*loadedChunk, error) {
	c, err := wal.DecodeChunk(b)
	if err != nil {
		return nil, err
	}
	return &loadedChunk{size: int64(len(b)), writeMs: c.WriteTimeMs, entries: c.Entries}, nil
}

// loadChunk returns the decoded chunk an index entry points at, from the
// cache or with one ranged GET (a whole-object GET for a Parquet file).
func (l *logHandle) loadChunk(ctx context.Context, ie indexEntry) (*loadedChunk, error) {
	if ie.Kind == index.KindParquet {
		return l.loadDecodedChunk(ctx, ie)
	}
	if ie.Kind != kindWAL {
		return nil, fmt.Errorf("engine: log %d offsets %d..%d are in a %v chunk this engine cannot read", l.id, ie.First, ie.Last(), ie.Kind)
	}
	loc := chunkLoc{ie.Object, ie.Offset}
	if c := l.e.cache.get(loc); c != nil {
		l.e.metrics.cacheHits.Add(1)
		return c, nil
	}
	b, err := l.e.store.GetRange(ctx, ie.Object, ie.Offset, ie.Length)
	if err != nil {
		if errors.Is(err, objstore.ErrNotFound) {
			return nil, fmt.Errorf("engine: log %d chunk %s@%d missing: %w", l.id, ie.Object, ie.Offset, err)
		}
		return nil, fmt.Errorf("%w: get %s: %w", lakestream.ErrUnavailable, ie.Object, err)
	}
	l.e.metrics.gets.Add(1)
	l.e.metrics.getBytes.Add(int64(len(b)))
	if int64(len(b)) != ie.Length {
		return nil, fmt.Errorf("%w: log %d chunk %s@%d: got %d bytes, want %d", wal.ErrCorrupt, l.id, ie.Object, ie.Offset, len(b), ie.Length)
	}
	c, err := decodeChunk(b)
	if err != nil {
		return nil, fmt.Errorf("log %d chunk %s@%d: %w", l.id, ie.Object, ie.Offset, err)
	}
	if int64(len(c.entries)) != ie.Entries {
		return nil, fmt.Errorf("%w: log %d chunk %s@%d: %d entries, index says %d", wal.ErrCorrupt, l.id, ie.Object, ie.Offset, len(c.entries), ie.Entries)
	}
	l.e.cache.put(loc, c)
	return c, nil
}

// loadDecodedChunk is loadChunk for an index entry of a kind the engine
// does not write (KindParquet): Options.ChunkDecoder reads what it needs of
// the object with ranged GETs and decodes it (port.go).
func (l *logHandle) loadDecodedChunk(ctx context.Context, ie indexEntry) (*loadedChunk, error) {
	loc := chunkLoc{ie.Object, ie.Offset}
	if c := l.e.cache.get(loc); c != nil {
		l.e.metrics.cacheHits.Add(1)
		return c, nil
	}
	dec := l.e.opts.ChunkDecoder
	if dec == nil {
		return nil, fmt.Errorf("engine: log %d offsets %d..%d are in a %v chunk and no ChunkDecoder is configured", l.id, ie.First, ie.Last(), ie.Kind)
	}
	read := func(ctx context.Context, offset, length int64) ([]byte, error) {
		b, err := l.e.store.GetRange(ctx, ie.Object, offset, length)
		if err != nil {
			if errors.Is(err, objstore.ErrNotFound) {
				return nil, fmt.Errorf("engine: log %d file %s missing: %w", l.id, ie.Object, err)
			}
			return nil, fmt.Errorf("%w: get %s: %w", lakestream.ErrUnavailable, ie.Object, err)
		}
		l.e.metrics.gets.Add(1)
		l.e.metrics.getBytes.Add(int64(len(b)))
		return b, nil
	}
	ents, err := dec.DecodeChunk(ctx, read, ie)
	if err != nil {
		return nil, fmt.Errorf("log %d file %s: %w", l.id, ie.Object, err)
	}
	if int64(len(ents)) != ie.Entries {
		return nil, fmt.Errorf("%w: log %d file %s: %d entries, index says %d", wal.ErrCorrupt, l.id, ie.Object, len(ents), ie.Entries)
	}
	c := &loadedChunk{writeMs: ie.WriteMs, entries: ents}
	for _, de := range ents {
		c.size += int64(len(de.Payload))
	}
	l.e.cache.put(loc, c)
	return c, nil
}

// prefixEnd is the smallest key greater than every key with prefix p.
func prefixEnd(p string) string { return p[:len(p)-1] + string(p[len(p)-1]+1) }

// chunks returns up to limit index entries whose ranges end at or after
// offset from, in offset order, with their keys' revisions.
func (l *logHandle) chunks(ctx context.Context, from int64, limit int) ([]Chunk, error) {
	return l.chunksIn(ctx, from, prefixEnd(l.e.keys.idxPrefix(l.id)), limit)
}

// chunksIn is chunks up to (excluding) the index key endKey.
func (l *logHandle) chunksIn(ctx context.Context, from int64, endKey string, limit int) ([]Chunk, error) {
	if from < 0 {
		from = 0
	}
	p := l.e.keys.idxPrefix(l.id)
	kvs, err := l.e.meta.Range(ctx, l.e.keys.idx(l.id, from), endKey, limit)
	if err != nil {
		return nil, fmt.Errorf("%w: log %d index: %w", lakestream.ErrUnavailable, l.id, err)
	}
	out := make([]Chunk, 0, len(kvs))
	for _, kv := range kvs {
		last, err := parseIdxLast(kv.Key, p)
		if err != nil {
			return nil, err
		}
		ie, err := decodeIndexEntry(kv.Value)
		if err != nil {
			return nil, err
		}
		if ie.Last() != last {
			return nil, fmt.Errorf("%w: index key %q holds %d..%d", errCorruptMeta, kv.Key, ie.First, ie.Last())
		}
		out = append(out, Chunk{Entry: ie, Revision: kv.ModRevision})
	}
	return out, nil
}

// walk calls fn for every entry from the one containing start, in order,
// until fn returns false, the head is reached or an error occurs. It
// checks that consecutive chunks tile the log without gaps.
func (l *logHandle) walk(ctx context.Context, start, next int64, withPayload bool, fn func(lakestream.Entry) bool) error {
	pos := start
	missing := 0 // consecutive chunks found missing (replaced by compaction, then collected)
	for pos < next {
		ies, err := l.chunks(ctx, pos, 8)
		if err != nil {
			return err
		}
		if len(ies) == 0 {
			return l.gapError(ctx, pos, next)
		}
	chunks:
		for _, ie := range ies {
			if ie.First > pos {
				return l.gapError(ctx, pos, ie.First)
			}
			c, err := l.loadChunk(ctx, ie.Entry)
			if errors.Is(err, objstore.ErrNotFound) && missing < 3 {
				// The index entry we read was replaced and its object
				// deleted since: read the index again from pos.
				missing++
				break chunks
			}
			if err != nil {
				return err
			}
			missing = 0
			off := ie.First
			bytes := ie.BytesEnd - ie.PayloadBytes
			from := pos // entries ending at or before from were delivered already
			for _, de := range c.entries {
				bytes += int64(len(de.Payload))
				h := lakestream.EntryHeader{
					Offset:         off,
					Records:        de.Records,
					PublishTimeMs:  de.PublishTimeMs,
					WriteTimeMs:    c.writeMs,
					Size:           int32(len(de.Payload)),
					CumulativeSize: bytes,
				}
				if h.PublishTimeMs == 0 {
					h.PublishTimeMs = c.writeMs
				}
				off += int64(de.Records)
				if h.End() <= from {
					continue
				}
				ent := lakestream.Entry{EntryHeader: h}
				if withPayload {
					ent.Payload = append([]byte(nil), de.Payload...)
				}
				if !fn(ent) {
					return nil
				}
			}
			if off != ie.End() {
				return fmt.Errorf("%w: log %d chunk %s@%d holds %d records, index says %d", wal.ErrCorrupt, l.id, ie.Object, ie.Offset, off-ie.First, ie.Records)
			}
			pos = ie.End()
			if pos >= next {
				break
			}
		}
	}
	return nil
}

// gapError explains a hole in the index at pos: a trim that happened while
// reading (ErrOffsetTrimmed), or corrupt metadata.
func (l *logHandle) gapError(ctx context.Context, pos, upTo int64) error {
	if h, err := l.refresh(ctx); err == nil && pos < h.First {
		return fmt.Errorf("%w: log %d offset %d < first %d (trimmed while reading)", lakestream.ErrOffsetTrimmed, l.id, pos, h.First)
	}
	return fmt.Errorf("%w: log %d: no index entry for offsets %d..%d", errCorruptMeta, l.id, pos, upTo)
}

// ReadEntries implements lakestream.Log.
func (l *logHandle) ReadEntries(ctx context.Context, start int64, maxRecords int, maxBytes int64) ([]lakestream.Entry, error) {
	h, err := l.refresh(ctx)
	if err != nil {
		return nil, err
	}
	return l.readEntries(ctx, h, start, maxRecords, maxBytes)
}

func (l *logHandle) readEntries(ctx context.Context, h head, start int64, maxRecords int, maxBytes int64) ([]lakestream.Entry, error) {
	if start < h.First {
		return nil, fmt.Errorf("%w: log %d offset %d < first %d", lakestream.ErrOffsetTrimmed, l.id, start, h.First)
	}
	var out []lakestream.Entry
	var recs, bytes int64
	err := l.walk(ctx, start, h.Next, true, func(e lakestream.Entry) bool {
		if len(out) > 0 && (recs+int64(e.Records) > int64(maxRecords) || bytes+int64(e.Size) > maxBytes) {
			return false
		}
		out = append(out, e)
		recs += int64(e.Records)
		bytes += int64(e.Size)
		return recs < int64(maxRecords) && bytes < maxBytes
	})
	return out, err
}

// WaitForEntries implements lakestream.Log.
func (l *logHandle) WaitForEntries(ctx context.Context, offset int64) (int64, error) {
	for {
		h, ch := l.changed()
		if h.Deleted {
			return h.Next, fmt.Errorf("%w: log %d", lakestream.ErrNoSuchLog, l.id)
		}
		if h.Next > offset {
			return h.Next, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return h.Next, ctx.Err()
		case <-l.e.ctx.Done():
			return h.Next, lakestream.ErrClosed
		}
	}
}

// ReadEntry implements lakestream.Log.
func (l *logHandle) ReadEntry(ctx context.Context, offset int64) (lakestream.Entry, error) {
	return l.entryAt(ctx, offset, true)
}

// EntryHeader implements lakestream.Log.
func (l *logHandle) EntryHeader(ctx context.Context, offset int64) (lakestream.EntryHeader, error) {
	e, err := l.entryAt(ctx, offset, false)
	return e.EntryHeader, err
}

func (l *logHandle) entryAt(ctx context.Context, offset int64, withPayload bool) (lakestream.Entry, error) {
	h, err := l.refresh(ctx)
	if err != nil {
		return lakestream.Entry{}, err
	}
	if offset < h.First {
		return lakestream.Entry{}, fmt.Errorf("%w: log %d offset %d < first %d", lakestream.ErrOffsetTrimmed, l.id, offset, h.First)
	}
	if offset >= h.Next {
		return lakestream.Entry{}, fmt.Errorf("%w: log %d offset %d ≥ head %d", lakestream.ErrOffsetOutOfRange, l.id, offset, h.Next)
	}
	var got lakestream.Entry
	err = l.walk(ctx, offset, h.Next, withPayload, func(e lakestream.Entry) bool { got = e; return false })
	return got, err
}

// IndexRange implements lakestream.Log.
func (l *logHandle) IndexRange(ctx context.Context, start, endExcl int64) ([]lakestream.EntryHeader, error) {
	h, err := l.refresh(ctx)
	if err != nil {
		return nil, err
	}
	start = max(start, h.First)
	endExcl = min(endExcl, h.Next)
	var out []lakestream.EntryHeader
	if start >= endExcl {
		return out, nil
	}
	err = l.walk(ctx, start, endExcl, false, func(e lakestream.Entry) bool {
		out = append(out, e.EntryHeader)
		return e.End() < endExcl
	})
	return out, err
}

// FirstOffset implements lakestream.Log.
func (l *logHandle) FirstOffset(ctx context.Context) (int64, error) {
	h, err := l.refresh(ctx)
	return h.First, err
}

// NextOffset implements lakestream.Log.
func (l *logHandle) NextOffset(ctx context.Context) (int64, error) {
	h, err := l.refresh(ctx)
	return h.Next, err
}

// Fenced implements lakestream.Log.
func (l *logHandle) Fenced(ctx context.Context) (bool, error) {
	h, err := l.refresh(ctx)
	return h.Fenced, err
}

// LastOffset implements lakestream.Log.
func (l *logHandle) LastOffset(ctx context.Context) (int64, error) {
	h, err := l.refresh(ctx)
	return h.Next - 1, err
}

// MessageCount implements lakestream.Log.
func (l *logHandle) MessageCount(ctx context.Context, start, endExcl int64) (int64, error) {
	h, err := l.refresh(ctx)
	if err != nil {
		return 0, err
	}
	start, endExcl = max(start, h.First), min(endExcl, h.Next)
	return max(0, endExcl-start), nil
}

// updateHead applies change to the head with compare-and-swap retries. The
// change may return errNoChange to stop without writing. extra ops ride in
// the same transaction.
func (l *logHandle) updateHead(ctx context.Context, change func(*head) ([]meta.Op, error)) (head, error) {
	key := l.e.keys.head(l.id)
	for attempt := 0; ; attempt++ {
		kv, found, err := l.e.meta.Get(ctx, key)
		if err != nil {
			return head{}, fmt.Errorf("%w: log %d head: %w", lakestream.ErrUnavailable, l.id, err)
		}
		var h head
		if found {
			if h, err = decodeHead(kv.Value); err != nil {
				return head{}, err
			}
		}
		if h.Deleted {
			return h, fmt.Errorf("%w: log %d", lakestream.ErrNoSuchLog, l.id)
		}
		n := h
		extra, err := change(&n)
		if errors.Is(err, errNoChange) {
			l.observeHead(h, kv.ModRevision)
			return h, nil
		}
		if err != nil {
			return h, err
		}
		ops := append([]meta.Op{meta.Put(key, n.Encode())}, extra...)
		ok, rev, err := l.e.meta.Txn(ctx, []meta.Cmp{{Key: key, ModRevision: kv.ModRevision}}, ops)
		if err != nil {
			return h, fmt.Errorf("%w: log %d head update: %w", lakestream.ErrUnavailable, l.id, err)
		}
		if ok {
			l.observeHead(n, rev)
			return n, nil
		}
		if err := backoff(ctx, attempt+1); err != nil {
			return h, err
		}
	}
}

var errNoChange = errors.New("engine: no change")

// Fence implements lakestream.Log.
func (l *logHandle) Fence(ctx context.Context) error {
	_, err := l.updateHead(ctx, func(h *head) ([]meta.Op, error) {
		if h.Fenced {
			return nil, errNoChange
		}
		h.Fenced = true
		return nil, nil
	})
	return err
}

// SoftTrim implements lakestream.Log.
func (l *logHandle) SoftTrim(ctx context.Context, inclusive int64) (int64, error) {
	h, err := l.refresh(ctx)
	if err != nil {
		return 0, err
	}
	target := inclusive + 1
	if target <= h.First {
		return h.First, nil
	}
	if target < h.Next {
		// Round up to the end of the entry containing inclusive.
		e, err := l.EntryHeader(ctx, inclusive)
		if err != nil {
			return 0, err
		}
		target = e.End()
	} else {
		// Beyond the head we saw: trim to that head, not to entries
		// appended since (they were not asked for).
		target = h.Next
	}
	n, err := l.updateHead(ctx, func(h *head) ([]meta.Op, error) {
		t := target
		if t <= h.First {
			return nil, errNoChange
		}
		h.First = t
		return nil, nil
	})
	return n.First, err
}

// hardTrim soft-trims below exclusive and deletes the index entries wholly
// below the new first offset. Objects are deleted by GC once unreferenced.
func (l *logHandle) hardTrim(ctx context.Context, exclusive int64) error {
	first, err := l.SoftTrim(ctx, exclusive-1)
	if err != nil {
		return err
	}
	p := l.e.keys.idxPrefix(l.id)
	for {
		// Keys are last offsets: everything below idx(first) ends before first.
		kvs, err := l.e.meta.Range(ctx, p, l.e.keys.idx(l.id, first), l.e.meta.MaxTxnOps())
		if err != nil {
			return fmt.Errorf("%w: log %d index: %w", lakestream.ErrUnavailable, l.id, err)
		}
		if len(kvs) == 0 {
			return nil
		}
		ops := make([]meta.Op, len(kvs))
		for i, kv := range kvs {
			ops[i] = meta.Delete(kv.Key)
		}
		if _, _, err := l.e.meta.Txn(ctx, nil, ops); err != nil {
			return fmt.Errorf("%w: log %d trim: %w", lakestream.ErrUnavailable, l.id, err)
		}
	}
}

// delete tombstones the log and removes its index and cursors.
func (l *logHandle) delete(ctx context.Context) error {
	_, err := l.updateHead(ctx, func(h *head) ([]meta.Op, error) {
		h.Deleted = true
		h.Fenced = true
		h.First = h.Next
		return []meta.Op{
			meta.DeletePrefix(l.e.keys.idxPrefix(l.id)),
			meta.DeletePrefix(l.e.keys.cursorPrefix(l.id)),
		}, nil
	})
	return err
}

func (l *logHandle) prefetch(ctx context.Context, start, endExcl int64) error {
	h, err := l.refresh(ctx)
	if err != nil {
		return err
	}
	start, endExcl = max(start, h.First), min(endExcl, h.Next)
	for pos := start; pos < endExcl; {
		ies, err := l.chunks(ctx, pos, 16)
		if err != nil || len(ies) == 0 {
			return err
		}
		for _, ie := range ies {
			if _, err := l.loadChunk(ctx, ie.Entry); err != nil {
				return err
			}
			pos = ie.End()
		}
	}
	return nil
}

// FindOffsetByTime implements lakestream.Log: chunks whose newest publish
// time is before t are skipped using the index alone.
func (l *logHandle) FindOffsetByTime(ctx context.Context, t time.Time) (int64, error) {
	ms := t.UnixMilli()
	h, err := l.refresh(ctx)
	if err != nil {
		return 0, err
	}
	pos := h.First
	for pos < h.Next {
		ies, err := l.chunks(ctx, pos, 64)
		if err != nil {
			return 0, err
		}
		if len(ies) == 0 {
			break
		}
		for _, ie := range ies {
			if ie.MaxPublishMs >= ms {
				c, err := l.loadChunk(ctx, ie.Entry)
				if err != nil {
					return 0, err
				}
				off := ie.First
				for _, de := range c.entries {
					pub := de.PublishTimeMs
					if pub == 0 {
						pub = c.writeMs
					}
					if pub >= ms && off+int64(de.Records) > h.First {
						return max(off, h.First), nil
					}
					off += int64(de.Records)
				}
			}
			pos = ie.End()
		}
	}
	return h.Next, nil
}

// SearchOffset implements lakestream.Log by binary search over the headers
// of [min, max).
func (l *logHandle) SearchOffset(ctx context.Context, lo, hi int64, pred func(lakestream.EntryHeader) bool) (int64, error) {
	hs, err := l.IndexRange(ctx, lo, hi)
	if err != nil {
		return 0, err
	}
	i, j := 0, len(hs)
	for i < j {
		m := int(uint(i+j) >> 1)
		if !pred(hs[m]) {
			i = m + 1
		} else {
			j = m
		}
	}
	if i == len(hs) {
		return hi, nil
	}
	return hs[i].Offset, nil
}
