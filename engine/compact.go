package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/lakegate/lakegate/engine/wal"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
)

// CompactStats reports one compaction of one log.
type CompactStats struct {
	Chunks int // chunks replaced
	Files  int // table files written (tables.CompactToTable)
	// FileBytes is the size of those files (tables.CompactToTable).
	FileBytes int64
	Records   int64 // records in them
	From      int64 // first offset of the replaced range
	End       int64 // offset just past it
}

// ErrNothingToCompact is returned by CompactLog when fewer than two chunks
// are eligible (or the first cannot merge with the next within the WAL
// limits; the compaction cursor then moves past it), and by the table layer's CompactToTable
// when none is.
var ErrNothingToCompact = errors.New("engine: nothing to compact")

// CompactLog repacks up to maxChunks consecutive WAL chunks of a log, from
// its compaction cursor on, into one chunk of a new object and replaces
// their index entries by the leaderless protocol's steps (see
// docs/index-format.md, "Compaction"). The records, their offsets, payloads
// and publish times are unchanged; an entry's WriteTimeMs becomes the
// newest write time of the replaced chunks. maxChunks is capped so that the
// replacement fits one metadata transaction.
func (e *Engine) CompactLog(ctx context.Context, id lakestream.LogID, maxChunks int) (CompactStats, error) {
	var st CompactStats
	l, err := e.log(ctx, id)
	if err != nil {
		return st, err
	}
	maxChunks = min(maxChunks, e.meta.MaxTxnOps()-1, wal.MaxEntriesPerChunk)
	if maxChunks < 2 {
		return st, ErrNothingToCompact
	}
	// Compaction works on index keys: fold the commit log first.
	if err := e.clog.foldNow(ctx); err != nil {
		return st, err
	}
	h, err := l.refresh(ctx)
	if err != nil {
		return st, err
	}
	cursorKey := e.keys.log(id) + "compacted"
	kv, found, err := e.meta.Get(ctx, cursorKey)
	if err != nil {
		return st, fmt.Errorf("%w: compaction cursor: %w", lakestream.ErrUnavailable, err)
	}
	from := h.First
	if found {
		c, err := strconv.ParseInt(string(kv.Value), 10, 64)
		if err != nil {
			return st, fmt.Errorf("%w: compaction cursor %q", errCorruptMeta, kv.Value)
		}
		from = max(from, c)
	}
	p := e.keys.idxPrefix(id)
	kvs, err := e.meta.Range(ctx, e.keys.idx(id, from), prefixEnd(p), maxChunks)
	if err != nil {
		return st, fmt.Errorf("%w: log %d index: %w", lakestream.ErrUnavailable, id, err)
	}
	var old []indexEntry
	var revs []int64
	var entries int
	for _, kv := range kvs {
		ie, err := decodeIndexEntry(kv.Value)
		if err != nil {
			return st, err
		}
		if ie.Kind != kindWAL || (len(old) > 0 && ie.First != old[len(old)-1].End()) || entries+int(ie.Entries) > wal.MaxEntriesPerChunk {
			break
		}
		old = append(old, ie)
		revs = append(revs, kv.ModRevision)
		entries += int(ie.Entries)
	}
	if len(old) == 0 || (len(old) < 2 && len(old[0].Segments) < 2) {
		return st, ErrNothingToCompact
	}

	// Step 1: the new object, of as many whole index entries (each one
	// chunk, or a run of chunks) as fit one WAL chunk (records, bytes: the
	// limits of engine/wal).
	var budget wal.Budget
	var loaded [][]*loadedChunk // per index entry
	segs := 0
entries:
	for _, ie := range old {
		var cs []*loadedChunk
		for _, one := range expand(ie) {
			c, err := l.loadChunk(ctx, one)
			if err != nil {
				return st, err
			}
			for _, de := range c.entries {
				if err := budget.Add(int64(id), wal.Entry{Records: de.Records, Payload: de.Payload}); err != nil {
					break entries // this entry starts the next repack
				}
			}
			cs = append(cs, c)
		}
		loaded = append(loaded, cs)
		segs += len(cs)
	}
	if len(loaded) == 0 || segs < 2 {
		// The first entry cannot take its successor: it is as compact as
		// it gets. The cursor moves past it, so the next call goes on.
		if err := e.advanceCompactCursor(ctx, id, old[0].End()); err != nil {
			return st, err
		}
		return st, ErrNothingToCompact
	}
	old, revs = old[:len(loaded)], revs[:len(loaded)]
	b := wal.NewBuilder()
	var writeMs int64
	for _, cs := range loaded {
		for _, c := range cs {
			writeMs = max(writeMs, c.writeMs)
			for _, de := range c.entries {
				if _, err := b.Add(int64(id), wal.Entry{Records: de.Records, PublishTimeMs: de.PublishTimeMs, Payload: de.Payload}); err != nil {
					return st, fmt.Errorf("engine: log %d: repack: %w", id, err)
				}
			}
		}
	}
	data, refs := b.Build(writeMs)
	object := fmt.Sprintf("wal/%s/%013d-compact-%016x-%016x", e.opts.NodeID, e.opts.Now().UnixMilli(), uint64(id), uint64(old[0].First))
	intent := e.keys.pending(e.opts.NodeID, object)
	if _, _, err := e.meta.Txn(ctx, nil, []meta.Op{meta.Put(intent, fmt.Appendf(nil, `{"created":%d}`, e.opts.Now().UnixMilli()))}); err != nil {
		return st, fmt.Errorf("%w: pending intent: %w", lakestream.ErrUnavailable, err)
	}
	if err := e.store.PutIfAbsent(ctx, object, data); err != nil {
		return st, fmt.Errorf("%w: put %s: %w", lakestream.ErrUnavailable, object, err)
	}
	e.metrics.observePut(len(data), 0)
	if err := e.compactHook(id, "put"); err != nil {
		return st, err
	}
	first, last := old[0], old[len(old)-1]
	ref := refs[0]
	ne := indexEntry{
		Kind: kindWAL, First: first.First, Records: last.End() - first.First, Entries: int64(ref.Entries),
		BytesEnd: last.BytesEnd, PayloadBytes: ref.PayloadBytes,
		MinPublishMs: ref.MinPublishTimeMs, MaxPublishMs: ref.MaxPublishTimeMs, WriteMs: writeMs,
		Object: object, Offset: ref.Offset, Length: ref.Length, CRC: ref.CRC,
	}
	if ne.Records != int64(ref.Records) || ne.PayloadBytes != last.BytesEnd-(first.BytesEnd-first.PayloadBytes) {
		return st, fmt.Errorf("%w: log %d: compacted chunk disagrees with the index it replaces", errCorruptMeta, id)
	}

	// Step 2: replace the index entries in one transaction.
	defer l.dropIdxCache()
	cmps := make([]meta.Cmp, len(old))
	ops := []meta.Op{meta.Put(e.keys.idx(id, last.Last()), ne.Encode())}
	for i, ie := range old {
		cmps[i] = meta.Cmp{Key: e.keys.idx(id, ie.Last()), ModRevision: revs[i]}
		if i < len(old)-1 {
			ops = append(ops, meta.Delete(e.keys.idx(id, ie.Last())))
		}
	}
	ok, _, err := e.meta.Txn(ctx, cmps, ops)
	if err != nil {
		return st, fmt.Errorf("%w: replace index: %w", lakestream.ErrUnavailable, err)
	}
	if !ok {
		// A concurrent compaction or trim changed the range: leave the new
		// object to GC and let the caller try again.
		e.dropIntentKey(ctx, intent)
		return st, fmt.Errorf("%w: log %d index changed during compaction", lakestream.ErrConflict, id)
	}
	if chunk, err := chunkFromObject(data, ref); err == nil {
		e.cache.put(chunkLoc{object, ref.Offset}, chunk)
	}
	if err := e.compactHook(id, "replace"); err != nil {
		return st, err
	}

	// Step 3: advance the compaction cursor (never backwards).
	if err := e.advanceCompactCursor(ctx, id, ne.End()); err != nil {
		return st, err
	}
	if err := e.compactHook(id, "cursor"); err != nil {
		return st, err
	}
	e.dropIntentKey(ctx, intent)
	return CompactStats{Chunks: len(old), Records: ne.Records, From: ne.First, End: ne.End()}, nil
}

// advanceCompactCursor moves the log's compaction cursor to end unless it
// is there or beyond already (it never moves backwards).
func (e *Engine) advanceCompactCursor(ctx context.Context, id lakestream.LogID, end int64) error {
	cursorKey := e.keys.log(id) + "compacted"
	for attempt := 0; ; attempt++ {
		kv, found, err := e.meta.Get(ctx, cursorKey)
		if err != nil {
			return fmt.Errorf("%w: compaction cursor: %w", lakestream.ErrUnavailable, err)
		}
		if found {
			if c, err := strconv.ParseInt(string(kv.Value), 10, 64); err == nil && c >= end {
				return nil
			}
		}
		ok, _, err := e.meta.Txn(ctx, []meta.Cmp{{Key: cursorKey, ModRevision: kv.ModRevision}},
			[]meta.Op{meta.Put(cursorKey, strconv.AppendInt(nil, end, 10))})
		if err != nil {
			return fmt.Errorf("%w: compaction cursor: %w", lakestream.ErrUnavailable, err)
		}
		if ok {
			return nil
		}
		if err := backoff(ctx, attempt+1); err != nil {
			return err
		}
	}
}

func (e *Engine) compactHook(id lakestream.LogID, step string) error {
	if h := e.opts.hooks.compactStep; h != nil {
		return h(int64(id), step)
	}
	return nil
}

// dropIntentKey deletes a pending intent, retrying a few times. An intent
// that stays only delays GC of an unreferenced object until
// PendingIntentTTL.
func (e *Engine) dropIntentKey(ctx context.Context, key string) {
	var err error
	for attempt := 1; attempt <= 4; attempt++ {
		if _, _, err = e.meta.Txn(ctx, nil, []meta.Op{meta.Delete(key)}); err == nil {
			return
		}
		if backoff(ctx, attempt*3) != nil {
			break
		}
	}
	e.opts.Logger.Warn("engine: drop pending intent", "key", key, "err", err)
}
