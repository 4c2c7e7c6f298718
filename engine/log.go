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
// its state (the head, and the chunks of commit records not folded yet: the
// tail of its index) is computed by the commit log (commitlog.go) from the
// log's head key and the records after it, and kept current by the commit
// log's watch, which also wakes waiting readers.
type logHandle struct {
	e  *Engine
	id lakestream.LogID

	once    sync.Once
	initErr error

	mu struct {
		sync.Mutex
		loaded  bool
		head    head
		rev     int64         // commit records with a revision ≤ rev are in head
		tail    []tailChunk   // applied, not folded: in offset order
		changed chan struct{} // closed and replaced on every head change
		// idx is the last run of index keys read (contiguous, in offset
		// order): sequential reads of folded ranges do not query the
		// metadata store per read. An entry replaced since (compaction) holds
		// the same records; one whose object is gone makes walk re-read
		// the index. Dropped by this engine's own index changes.
		idx []Chunk
	}
}

// idxCacheChunks bounds one index read (and the cached run).
const idxCacheChunks = 32

// tailChunk is a chunk of a commit record applied to the log and not yet
// folded into its index keys.
type tailChunk struct {
	rev       int64
	key       string // the record's
	prevBytes int64
	entry     indexEntry // a single chunk
}

var _ lakestream.Log = (*logHandle)(nil)

func newLogHandle(e *Engine, id lakestream.LogID) *logHandle {
	l := &logHandle{e: e, id: id}
	l.mu.changed = make(chan struct{})
	return l
}

// ensure loads (creating if absent) the log's state.
func (l *logHandle) ensure(ctx context.Context) error {
	l.once.Do(func() { l.initErr = l.e.clog.load(ctx, l, true) })
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

// readHead reads the log's head key.
func (l *logHandle) readHead(ctx context.Context) (head, bool, error) {
	kv, found, err := l.e.meta.Get(ctx, l.e.keys.head(l.id))
	if err != nil {
		return head{}, false, fmt.Errorf("%w: log %d head: %w", lakestream.ErrUnavailable, l.id, err)
	}
	if !found {
		return head{}, false, nil
	}
	h, err := decodeHead(kv.Value)
	return h, true, err
}

func (l *logHandle) loaded() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.loaded
}

// resetState sets the state from head h (read after every record it
// folded was applied here or is in held) and the held records after it.
// Called with commitLog.mu held.
func (l *logHandle) resetState(h head, applied int64, held []*heldRecord) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.head = h
	l.mu.head.Rev = 0
	l.mu.rev = h.Rev
	l.mu.tail = nil
	l.mu.loaded = true
	for _, hr := range held {
		if hr.rev <= l.mu.rev {
			continue
		}
		for _, ch := range hr.rec.Chunks {
			if lakestream.LogID(ch.Log) == l.id {
				l.applyChunkLocked(hr, ch)
			}
		}
		for _, op := range hr.rec.Controls {
			if lakestream.LogID(op.Log) == l.id {
				applyControlOp(&l.mu.head, op)
			}
		}
	}
	l.mu.rev = max(l.mu.rev, applied)
	l.changedLocked()
}

func (l *logHandle) changedLocked() {
	close(l.mu.changed)
	l.mu.changed = make(chan struct{})
}

// applyChunks applies the log's chunks of record hr (commit log order): one
// in a kind-1 record, any number in a kind-3 one. The result is the first
// chunk's. ok is false when the log is not loaded here, or the record is
// folded into the head already and its chunks no longer in the tail.
func (l *logHandle) applyChunks(hr *heldRecord, chs []index.RecordChunk) (chunkResult, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.mu.loaded {
		return chunkResult{}, false
	}
	if hr.rev <= l.mu.rev {
		return l.resultOfLocked(hr.rev)
	}
	var r chunkResult
	for i, ch := range chs {
		if ri := l.applyChunkLocked(hr, ch); i == 0 {
			r = ri
		}
	}
	l.mu.rev = hr.rev
	l.changedLocked()
	return r, true
}

func (l *logHandle) applyChunkLocked(hr *heldRecord, ch index.RecordChunk) chunkResult {
	h := &l.mu.head
	switch {
	case h.Deleted:
		return chunkResult{err: fmt.Errorf("%w: log %d", lakestream.ErrNoSuchLog, l.id)}
	case h.Fenced:
		return chunkResult{err: fmt.Errorf("%w: log %d", lakestream.ErrFenced, l.id)}
	}
	r := chunkResult{first: h.Next, prevBytes: h.Bytes}
	object, writeMs := hr.rec.ChunkObject(ch)
	h.Next += ch.Records
	h.Bytes += ch.PayloadBytes
	l.mu.tail = append(l.mu.tail, tailChunk{rev: hr.rev, key: hr.key, prevBytes: r.prevBytes, entry: indexEntry{
		Kind: kindWAL, First: r.first, Records: ch.Records, Entries: ch.Entries, BytesEnd: h.Bytes,
		PayloadBytes: ch.PayloadBytes, MinPublishMs: ch.MinPublishMs, MaxPublishMs: ch.MaxPublishMs,
		WriteMs: writeMs, Object: object, Offset: ch.Offset, Length: ch.Length, CRC: ch.CRC, Joint: hr.joint,
	}})
	return r
}

// resultOf returns the result of the log's chunk of the record at rev, if
// its chunk is still in the tail (or the log is fenced or deleted).
func (l *logHandle) resultOf(rev int64) (chunkResult, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.resultOfLocked(rev)
}

func (l *logHandle) resultOfLocked(rev int64) (chunkResult, bool) {
	for _, t := range l.mu.tail {
		if t.rev == rev {
			return chunkResult{first: t.entry.First, prevBytes: t.prevBytes}, true
		}
	}
	return chunkResult{}, false
}

// applyControl applies a control operation of the record at rev.
func (l *logHandle) applyControl(rev int64, op index.Control) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.mu.loaded || rev <= l.mu.rev {
		return
	}
	applyControlOp(&l.mu.head, op)
	l.mu.rev = rev
	l.changedLocked()
}

// dropTail forgets the tail chunks of records up to rev (they are folded
// into index keys).
func (l *logHandle) dropTail(rev int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := 0
	for i < len(l.mu.tail) && l.mu.tail[i].rev <= rev {
		i++
	}
	if i > 0 {
		// Resliced, not shifted: a tail of many small chunks is dropped
		// from the front at every fold, and append reallocates it to its
		// live part when it grows.
		clear(l.mu.tail[:i])
		l.mu.tail = l.mu.tail[i:]
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

// refresh waits until every commit record committed before the call (on any
// node) is applied, and returns the head. Reads that must not miss an
// append that finished before they started use it.
func (l *logHandle) refresh(ctx context.Context) (head, error) {
	if err := l.e.clog.sync(ctx); err != nil {
		return head{}, err
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
	o := lakestream.ApplyAppendOptions(opts)
	g, ch, err := l.prepareAppend(records, payload, o)
	if err != nil {
		return lakestream.EntryHeader{}, err
	}
	return l.e.writer.append(ctx, l.id, int32(records), payload, o.PublishTimeMs, g, ch, o.Stage)
}

// AppendAsync implements lakestream.Log.
func (l *logHandle) AppendAsync(ctx context.Context, records int, payload []byte, done func(lakestream.EntryHeader, error), opts ...lakestream.AppendOption) error {
	o := lakestream.ApplyAppendOptions(opts)
	g, ch, err := l.prepareAppend(records, payload, o)
	if err != nil {
		return err
	}
	if !o.Donate {
		payload = append([]byte(nil), payload...)
	}
	return l.e.writer.enqueue(ctx, l.id, int32(records), payload, o.PublishTimeMs, g, ch, o.Stage, func(r appendResult) { done(r.h, r.err) })
}

// NewAppendChain implements lakestream.Log.
func (l *logHandle) NewAppendChain() lakestream.AppendChain { return &appendChain{e: l.e, log: l.id} }

// prepareAppend checks an append and converts its guard and chain. A
// refusal breaks the chain unless it is about the append's own arguments;
// an append of a broken chain is refused with the chain's error.
func (l *logHandle) prepareAppend(records int, payload []byte, o lakestream.AppendOptions) (*ownership, *appendChain, error) {
	ch, err := chainOf(o.Chain, l.e, l.id)
	if err != nil {
		return nil, nil, err
	}
	if err := ch.errOrNil(); err != nil {
		return nil, nil, err
	}
	g, err := guardOf(o.Guard)
	if err == nil {
		err = checkStageName(o.Stage, true)
	}
	if err == nil {
		err = l.checkAppend(records, payload)
	}
	if err != nil {
		if !refusedArgs(err) {
			ch.breakWith(err)
		}
		return nil, nil, err
	}
	return g, ch, nil
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
	if len(ie.Segments) >= 2 {
		return nil, fmt.Errorf("engine: log %d: loadChunk of a run of %d chunks (expand it)", l.id, len(ie.Segments))
	}
	if ie.Kind == index.KindParquet {
		return l.loadDecodedChunk(ctx, ie)
	}
	if ie.Kind != kindWAL {
		return nil, fmt.Errorf("engine: log %d offsets %d..%d are in a %v chunk this engine cannot read", l.id, ie.First, ie.Last(), ie.Kind)
	}
	loc := chunkLoc{ie.Object, ie.Offset}
	c, release, err := l.e.cachedOrSlot(ctx, loc)
	if c != nil || err != nil {
		return c, err
	}
	defer release()
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
	c, err = decodeChunk(b)
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
	c, release, err := l.e.cachedOrSlot(ctx, loc)
	if c != nil || err != nil {
		return c, err
	}
	defer release()
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
	c = &loadedChunk{writeMs: ie.WriteMs, entries: ents}
	for _, de := range ents {
		c.size += int64(len(de.Payload))
	}
	l.e.cache.put(loc, c)
	return c, nil
}

// cachedOrSlot returns loc's chunk from the cache, or else a load slot
// (Options.MaxConcurrentLoads): the caller reads and decodes the chunk,
// puts it in the cache and calls release. While it waited for the slot
// another reader may have loaded the chunk: the cache is asked again.
func (e *Engine) cachedOrSlot(ctx context.Context, loc chunkLoc) (*loadedChunk, func(), error) {
	if c := e.cache.get(loc); c != nil {
		e.metrics.cacheHits.Add(1)
		return c, nil, nil
	}
	select {
	case e.loads <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	if c := e.cache.get(loc); c != nil {
		<-e.loads
		e.metrics.cacheHits.Add(1)
		return c, nil, nil
	}
	return nil, func() { <-e.loads }, nil
}

// prefixEnd is the smallest key greater than every key with prefix p.
func prefixEnd(p string) string { return p[:len(p)-1] + string(p[len(p)-1]+1) }

// chunks returns up to limit index entries whose ranges end at or after
// offset from, in offset order: the folded ones from the index keys (with
// their keys' revisions), then the tail's (revision 0). A read of the tail
// makes no metadata round trip.
func (l *logHandle) chunks(ctx context.Context, from int64, limit int) ([]Chunk, error) {
	if from < 0 {
		from = 0
	}
	for attempt := 0; ; attempt++ {
		l.mu.Lock()
		if len(l.mu.tail) > 0 && from >= l.mu.tail[0].entry.First {
			out := l.tailFromLocked(from, limit)
			l.mu.Unlock()
			return out, nil
		}
		if out := l.cachedIdxLocked(from, limit); len(out) > 0 {
			l.mu.Unlock()
			return out, nil
		}
		l.mu.Unlock()
		out, err := l.chunksIn(ctx, from, prefixEnd(l.e.keys.idxPrefix(l.id)), max(limit, idxCacheChunks))
		if err != nil {
			return nil, err
		}
		if len(out) > 0 {
			l.mu.Lock()
			l.mu.idx = out
			l.mu.Unlock()
		}
		if len(out) >= limit {
			return out[:limit], nil
		}
		end := from
		if len(out) > 0 {
			end = out[len(out)-1].End()
		}
		l.mu.Lock()
		next := l.mu.head.Next
		if len(l.mu.tail) == 0 || l.mu.tail[0].entry.First <= end || end >= next {
			out = append(out, l.tailFromLocked(end, limit-len(out))...)
			l.mu.Unlock()
			return out, nil
		}
		l.mu.Unlock()
		// The chunks between end and the tail were folded while we read
		// the index: read it again.
		if attempt >= 8 {
			return out, nil
		}
	}
}

// cachedIdxLocked returns up to limit cached index entries from the one
// holding from, if the cache holds it.
func (l *logHandle) cachedIdxLocked(from int64, limit int) []Chunk {
	c := l.mu.idx
	if len(c) == 0 || from < c[0].First || from >= c[len(c)-1].End() {
		return nil
	}
	i := 0
	for c[i].End() <= from {
		i++
	}
	return c[i:min(len(c), i+limit)]
}

// dropIdxCache forgets the cached index entries (after this engine changed
// the index: trims, compactions).
func (l *logHandle) dropIdxCache() {
	l.mu.Lock()
	l.mu.idx = nil
	l.mu.Unlock()
}

// tailFromLocked returns up to limit tail chunks ending after from.
func (l *logHandle) tailFromLocked(from int64, limit int) []Chunk {
	var out []Chunk
	for _, t := range l.mu.tail {
		if len(out) >= limit {
			break
		}
		if t.entry.End() > from {
			out = append(out, Chunk{Entry: t.entry, record: t.key})
		}
	}
	return out
}

// chunksIn returns up to limit index-key entries from the one holding from
// up to (excluding) the index key endKey, with their keys' revisions.
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

// expand returns the single chunks of an index entry, each as an entry of
// its own (a version-2 entry holds several), in offset order.
func expand(ie indexEntry) []indexEntry {
	if len(ie.Segments) < 2 {
		return []indexEntry{ie}
	}
	out := make([]indexEntry, 0, len(ie.Segments))
	first, bytes := ie.First, ie.BytesEnd-ie.PayloadBytes
	for _, sg := range ie.Segments {
		bytes += sg.PayloadBytes
		out = append(out, indexEntry{Kind: ie.Kind, First: first, Records: sg.Records, Entries: sg.Entries,
			BytesEnd: bytes, PayloadBytes: sg.PayloadBytes, MinPublishMs: sg.MinPublishMs, MaxPublishMs: sg.MaxPublishMs,
			WriteMs: sg.WriteMs, Object: sg.Object, Offset: sg.Offset, Length: sg.Length, CRC: sg.CRC, Joint: ie.Joint})
		first += sg.Records
	}
	return out
}

// walk calls fn for every entry from the one containing start, in order,
// until fn returns false, the head is reached or an error occurs. It
// checks that consecutive chunks tile the log without gaps.
func (l *logHandle) walk(ctx context.Context, start, next int64, withPayload bool, fn func(lakestream.Entry) bool) error {
	pos := start
	missing := 0 // consecutive chunks found missing (replaced by compaction, then collected)
	for pos < next {
		ies, err := l.chunks(ctx, pos, idxCacheChunks)
		if err != nil {
			return err
		}
		if len(ies) == 0 {
			return l.gapError(ctx, pos, next)
		}
	chunks:
		for _, ie := range expandAll(ies) {
			rec := ie.record
			if ie.First > pos {
				return l.gapError(ctx, pos, ie.First)
			}
			if ie.End() <= pos {
				continue
			}
			c, err := l.loadChunk(ctx, ie.indexEntry)
			if errors.Is(err, objstore.ErrNotFound) && missing < 3 {
				// The index entry we read (or cached) was replaced and
				// its object deleted since, or the record of a tail chunk
				// was folded (and its chunk compacted away) before this
				// engine's watch said so: read the index again from pos.
				missing++
				l.dropIdxCache()
				if rec != "" {
					if err := l.e.clog.forgetIfFolded(ctx, rec); err != nil {
						return err
					}
				}
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

// segmentOf is the segment of a single-chunk entry.
func segmentOf(e indexEntry) index.Segment {
	return index.Segment{Object: e.Object, Offset: e.Offset, Length: e.Length, CRC: e.CRC, Records: e.Records,
		Entries: e.Entries, PayloadBytes: e.PayloadBytes, WriteMs: e.WriteMs, MinPublishMs: e.MinPublishMs, MaxPublishMs: e.MaxPublishMs}
}

// runOf is the index entry of consecutive single chunks (a version-2 run,
// or the chunk itself when there is one). The chunks share one Joint (the
// fold never mixes them), which the run keeps.
func runOf(parts []indexEntry) indexEntry {
	if len(parts) == 1 {
		return parts[0]
	}
	n := parts[0]
	n.Records, n.Entries, n.PayloadBytes = 0, 0, 0
	n.Segments = nil
	for _, k := range parts {
		n.Records += k.Records
		n.Entries += k.Entries
		n.PayloadBytes += k.PayloadBytes
		n.MinPublishMs = min(n.MinPublishMs, k.MinPublishMs)
		n.MaxPublishMs = max(n.MaxPublishMs, k.MaxPublishMs)
		n.WriteMs = max(n.WriteMs, k.WriteMs)
		n.Segments = append(n.Segments, segmentOf(k))
	}
	n.BytesEnd = parts[len(parts)-1].BytesEnd
	return n
}

// expandedChunk is one chunk of an index entry (or of a tail chunk's
// record).
type expandedChunk struct {
	indexEntry
	record string
}

// expandAll expands every entry of cs (expand).
func expandAll(cs []Chunk) []expandedChunk {
	out := make([]expandedChunk, 0, len(cs))
	for _, c := range cs {
		for _, e := range expand(c.Entry) {
			out = append(out, expandedChunk{indexEntry: e, record: c.record})
		}
	}
	return out
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
// Below the head this engine knows, it reads without a metadata round trip
// (the entries exist); at or past it, it first syncs with the commit log
// so that it never misses an append that finished before the call.
func (l *logHandle) ReadEntries(ctx context.Context, start int64, maxRecords int, maxBytes int64) ([]lakestream.Entry, error) {
	h := l.snapshot()
	if h.Deleted || start >= h.Next || start < h.First {
		var err error
		if h, err = l.refresh(ctx); err != nil {
			return nil, err
		}
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

// Bounds returns the first and the next offset from one linearizable read
// of the head (FirstOffset and NextOffset read it once each).
func (l *logHandle) Bounds(ctx context.Context) (first, next int64, err error) {
	h, err := l.refresh(ctx)
	return h.First, h.Next, err
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

// Fence implements lakestream.Log: a control record, so it takes effect at
// one point of the commit order on every node; it returns once applied here.
func (l *logHandle) Fence(ctx context.Context) error {
	if l.snapshot().Deleted {
		return fmt.Errorf("%w: log %d", lakestream.ErrNoSuchLog, l.id)
	}
	return l.e.clog.commitControl(ctx, index.Control{Op: index.OpFence, Log: int64(l.id)})
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
	if err := l.e.clog.commitControl(ctx, index.Control{Op: index.OpTrim, Log: int64(l.id), First: target}); err != nil {
		return 0, err
	}
	return l.snapshot().First, nil
}

// hardTrim soft-trims below exclusive and deletes the index entries wholly
// below the new first offset. Objects are deleted by GC once unreferenced.
func (l *logHandle) hardTrim(ctx context.Context, exclusive int64) error {
	first, err := l.SoftTrim(ctx, exclusive-1)
	if err != nil {
		return err
	}
	// The records of the trimmed range go into the index (chunks wholly
	// below first are never indexed), so only index keys remain to delete.
	if err := l.e.clog.foldNow(ctx); err != nil {
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
			break
		}
		ops := make([]meta.Op, len(kvs))
		for i, kv := range kvs {
			ops[i] = meta.Delete(kv.Key)
		}
		if _, _, err := l.e.meta.Txn(ctx, nil, ops); err != nil {
			return fmt.Errorf("%w: log %d trim: %w", lakestream.ErrUnavailable, l.id, err)
		}
	}
	defer l.dropIdxCache()
	return l.trimRun(ctx, first)
}

// trimRun drops, from the run of chunks (a version-2 index entry) that
// holds first, the chunks that end at or before first, so that their
// objects are no longer referenced.
func (l *logHandle) trimRun(ctx context.Context, first int64) error {
	for attempt := 1; ; attempt++ {
		cs, err := l.chunksIn(ctx, first, prefixEnd(l.e.keys.idxPrefix(l.id)), 1)
		if err != nil || len(cs) == 0 || len(cs[0].Segments) < 2 {
			return err
		}
		c := cs[0]
		parts := expand(c.Entry)
		i := 0
		for i < len(parts) && parts[i].End() <= first {
			i++
		}
		if i == 0 {
			return nil
		}
		n := runOf(parts[i:])
		key := l.e.keys.idx(l.id, c.Last())
		ok, _, err := l.e.meta.Txn(ctx, []meta.Cmp{{Key: key, ModRevision: c.Revision}}, []meta.Op{meta.Put(key, n.Encode())})
		if err != nil {
			return fmt.Errorf("%w: log %d trim: %w", lakestream.ErrUnavailable, l.id, err)
		}
		if ok {
			return nil
		}
		if err := backoff(ctx, attempt); err != nil { // replaced meanwhile (compaction): look again
			return err
		}
	}
}

// delete tombstones the log and removes its index, cursors and the
// listing of its open staging sets.
// The delete is a control record; its transaction also puts the tombstone
// head (so a fold racing it fails its compare) and deletes the index and
// cursor keys.
func (l *logHandle) delete(ctx context.Context) error {
	h, err := l.refresh(ctx)
	if err != nil {
		return err
	}
	kh, _, err := l.readHead(ctx)
	if err != nil {
		return err
	}
	t := head{Next: h.Next, First: h.Next, Bytes: h.Bytes, Fenced: true, Deleted: true, Rev: kh.Rev}
	if err := l.e.clog.commitControlWith(ctx, []meta.Op{
		meta.Put(l.e.keys.head(l.id), t.Encode()),
		meta.DeletePrefix(l.e.keys.idxPrefix(l.id)),
		meta.DeletePrefix(l.e.keys.cursorPrefix(l.id)),
		meta.DeletePrefix(l.e.keys.logStagedPrefix(l.id)),
	}, index.Control{Op: index.OpDelete, Log: int64(l.id)}); err != nil {
		return err
	}
	// Its records not folded yet stop referencing its objects.
	return l.e.clog.foldNow(ctx)
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
		for _, ie := range expandAll(ies) {
			if _, err := l.loadChunk(ctx, ie.indexEntry); err != nil {
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
		for _, ie := range expandAll(ies) {
			if ie.End() <= pos {
				continue
			}
			if ie.MaxPublishMs >= ms {
				c, err := l.loadChunk(ctx, ie.indexEntry)
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

var _ lakestream.LogLayout = (*logHandle)(nil)

// Layout implements lakestream.LogLayout: the index keys' chunks from the
// one holding from (a run of chunks listed as its chunks), then the chunks
// applied and not folded yet (the commit log's), up to limit in all.
func (l *logHandle) Layout(ctx context.Context, from int64, limit int) ([]lakestream.StoredChunk, error) {
	if _, err := l.refresh(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	cs, err := l.chunksIn(ctx, from, prefixEnd(l.e.keys.idxPrefix(l.id)), limit)
	if err != nil {
		return nil, err
	}
	out := make([]lakestream.StoredChunk, 0, min(limit, len(cs)+idxCacheChunks))
	end := from
	for _, c := range cs {
		for _, one := range expand(c.Entry) {
			if len(out) < limit && one.End() > from {
				out = append(out, storedChunk(one, true))
				end = one.End()
			}
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, t := range l.mu.tail {
		if len(out) < limit && t.entry.End() > end {
			out = append(out, storedChunk(t.entry, false))
		}
	}
	return out, nil
}

func storedChunk(ie indexEntry, folded bool) lakestream.StoredChunk {
	kind := "wal"
	if ie.Kind == index.KindParquet {
		kind = "parquet"
	}
	return lakestream.StoredChunk{Kind: kind, First: ie.First, End: ie.End(), Entries: ie.Entries,
		PayloadBytes: ie.PayloadBytes, Object: ie.Object, MinPublishMs: ie.MinPublishMs, MaxPublishMs: ie.MaxPublishMs, Folded: folded}
}
