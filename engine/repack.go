package engine

// WAL repacking: merging a log's small WAL chunks into one chunk of a new
// object, with the index following (docs/index-format.md, "WAL repacking").

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/lakegate/lakegate/engine/wal"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
)

// CompactStats reports one WAL repack (RepackWAL) or one table
// materialization (tables.Materialize) of one log.
type CompactStats struct {
	Chunks int // chunks replaced
	Files  int // table files written (tables.Materialize)
	// FileBytes is the size of those files (tables.Materialize).
	FileBytes int64
	Records   int64 // records in them
	From      int64 // first offset of the replaced range
	End       int64 // offset just past it
}

// ErrNothingToCompact is returned by RepackWAL when fewer than two chunks
// are eligible (or the first cannot merge with the next within the WAL
// limits; the compaction cursor then moves past it), and by the table
// layer's materialization when none is.
var ErrNothingToCompact = errors.New("engine: nothing to compact")

// RepackWAL repacks up to maxChunks consecutive WAL chunks of a log, from
// its compaction cursor on, into one chunk of a new object and replaces
// their index entries by the leaderless protocol's steps (see
// docs/index-format.md, "WAL repacking"). The records, their offsets,
// payloads and publish times are unchanged; an entry's WriteTimeMs becomes
// the newest write time of the replaced chunks. maxChunks is capped so that
// the replacement fits one metadata transaction. It is WAL repacking, not
// table materialization (tables.Materialize) or key compaction (Pulsar's).
func (e *Engine) RepackWAL(ctx context.Context, id lakestream.LogID, maxChunks int) (CompactStats, error) {
	var st CompactStats
	l, err := e.log(ctx, id)
	if err != nil {
		return st, err
	}
	maxChunks = min(maxChunks, e.meta.MaxTxnOps()-1, wal.MaxEntriesPerChunk)
	if maxChunks < 2 {
		return st, ErrNothingToCompact
	}
	old, revs, err := e.repackCandidates(ctx, l, maxChunks)
	if err != nil {
		return st, err
	}
	// Step 1: the new object, of as many whole index entries (each one
	// chunk, or a run of chunks) as fit one WAL chunk.
	loaded, err := e.repackLoad(ctx, l, old)
	if err != nil {
		return st, err
	}
	if loaded == nil {
		// The first entry cannot take its successor: it is as compact as
		// it gets. The cursor moves past it, so the next call goes on.
		if err := e.advanceCompactCursor(ctx, id, old[0].End()); err != nil {
			return st, err
		}
		return st, ErrNothingToCompact
	}
	old, revs = old[:len(loaded)], revs[:len(loaded)]
	r, err := e.repackPut(ctx, id, old, loaded)
	if err != nil {
		return st, err
	}
	if err := e.repackHook(id, "put"); err != nil {
		return st, err
	}

	// Step 2: replace the index entries in one transaction.
	defer l.dropIdxCache()
	if err := e.repackReplace(ctx, id, old, revs, r); err != nil {
		return st, err
	}
	if err := e.repackHook(id, "replace"); err != nil {
		return st, err
	}

	// Step 3: advance the compaction cursor (never backwards).
	if err := e.advanceCompactCursor(ctx, id, r.entry.End()); err != nil {
		return st, err
	}
	if err := e.repackHook(id, "cursor"); err != nil {
		return st, err
	}
	e.dropIntentKey(ctx, r.intent)
	return CompactStats{Chunks: len(old), Records: r.entry.Records, From: r.entry.First, End: r.entry.End()}, nil
}

// repackCandidates returns the index entries (and their keys' revisions)
// RepackWAL may merge: up to maxChunks contiguous WAL entries of l from its
// compaction cursor on, within one WAL chunk's entry limit; fewer than two
// chunks is ErrNothingToCompact.
func (e *Engine) repackCandidates(ctx context.Context, l *logHandle, maxChunks int) ([]indexEntry, []int64, error) {
	id := l.id
	// Repacking works on index keys: fold the commit log first.
	if err := e.clog.foldNow(ctx); err != nil {
		return nil, nil, err
	}
	h, err := l.refresh(ctx)
	if err != nil {
		return nil, nil, err
	}
	cursorKey := e.keys.log(id) + "compacted"
	kv, found, err := e.meta.Get(ctx, cursorKey)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: compaction cursor: %w", lakestream.ErrUnavailable, err)
	}
	from := h.First
	if found {
		c, err := strconv.ParseInt(string(kv.Value), 10, 64)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: compaction cursor %q", errCorruptMeta, kv.Value)
		}
		from = max(from, c)
	}
	p := e.keys.idxPrefix(id)
	kvs, err := e.meta.Range(ctx, e.keys.idx(id, from), prefixEnd(p), maxChunks)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: log %d index: %w", lakestream.ErrUnavailable, id, err)
	}
	var old []indexEntry
	var revs []int64
	var entries int
	for _, kv := range kvs {
		ie, err := decodeIndexEntry(kv.Value)
		if err != nil {
			return nil, nil, err
		}
		if ie.Joint != nil {
			// A chunk of a joint record keeps its entry (and its mark for
			// the tables): repacking goes around it.
			if len(old) == 0 {
				if err := e.advanceCompactCursor(ctx, id, ie.End()); err != nil {
					return nil, nil, err
				}
				return nil, nil, ErrNothingToCompact
			}
			break
		}
		if ie.Kind != kindWAL || (len(old) > 0 && ie.First != old[len(old)-1].End()) || entries+int(ie.Entries) > wal.MaxEntriesPerChunk {
			break
		}
		old = append(old, ie)
		revs = append(revs, kv.ModRevision)
		entries += int(ie.Entries)
	}
	if len(old) == 0 || (len(old) < 2 && len(old[0].Segments) < 2) {
		return nil, nil, ErrNothingToCompact
	}
	return old, revs, nil
}

// repackLoad loads the chunks of the leading entries of old that fit one
// WAL chunk together (records, bytes: the limits of engine/wal), per index
// entry; nil when fewer than two chunks fit.
func (e *Engine) repackLoad(ctx context.Context, l *logHandle, old []indexEntry) ([][]*loadedChunk, error) {
	var budget wal.Budget
	var loaded [][]*loadedChunk // per index entry
	segs := 0
entries:
	for _, ie := range old {
		var cs []*loadedChunk
		for _, one := range expand(ie) {
			c, err := l.loadChunk(ctx, one)
			if err != nil {
				return nil, err
			}
			for _, de := range c.entries {
				if err := budget.Add(int64(l.id), wal.Entry{Records: de.Records, Payload: de.Payload}); err != nil {
					break entries // this entry starts the next repack
				}
			}
			cs = append(cs, c)
		}
		loaded = append(loaded, cs)
		segs += len(cs)
	}
	if len(loaded) == 0 || segs < 2 {
		return nil, nil
	}
	return loaded, nil
}

// repacked is the new object of a repack, written under its pending intent.
type repacked struct {
	object, intent string
	data           []byte
	ref            wal.ChunkRef
	entry          indexEntry // the index entry replacing old
}

// repackPut builds the object holding the loaded chunks of old as one WAL
// chunk and PUTs it under a pending intent (so that GC removes it if the
// repack goes no further).
func (e *Engine) repackPut(ctx context.Context, id lakestream.LogID, old []indexEntry, loaded [][]*loadedChunk) (repacked, error) {
	var r repacked
	b := wal.NewBuilder()
	var writeMs int64
	for _, cs := range loaded {
		for _, c := range cs {
			writeMs = max(writeMs, c.writeMs)
			for _, de := range c.entries {
				if _, err := b.Add(int64(id), wal.Entry{Records: de.Records, PublishTimeMs: de.PublishTimeMs, Payload: de.Payload}); err != nil {
					return r, fmt.Errorf("engine: log %d: repack: %w", id, err)
				}
			}
		}
	}
	data, refs := b.Build(writeMs)
	object := fmt.Sprintf("wal/%s/%013d-compact-%016x-%016x", e.opts.NodeID, e.opts.Now().UnixMilli(), uint64(id), uint64(old[0].First))
	intent := e.keys.pending(e.opts.NodeID, object)
	if _, _, err := e.meta.Txn(ctx, nil, []meta.Op{meta.Put(intent, fmt.Appendf(nil, `{"created":%d}`, e.opts.Now().UnixMilli()))}); err != nil {
		return r, fmt.Errorf("%w: pending intent: %w", lakestream.ErrUnavailable, err)
	}
	if err := e.store.PutIfAbsent(ctx, object, data); err != nil {
		return r, fmt.Errorf("%w: put %s: %w", lakestream.ErrUnavailable, object, err)
	}
	e.metrics.observePut(len(data), 0)
	first, last := old[0], old[len(old)-1]
	ref := refs[0]
	ne := indexEntry{
		Kind: kindWAL, First: first.First, Records: last.End() - first.First, Entries: int64(ref.Entries),
		BytesEnd: last.BytesEnd, PayloadBytes: ref.PayloadBytes,
		MinPublishMs: ref.MinPublishTimeMs, MaxPublishMs: ref.MaxPublishTimeMs, WriteMs: writeMs,
		Object: object, Offset: ref.Offset, Length: ref.Length, CRC: ref.CRC,
	}
	if ne.Records != int64(ref.Records) || ne.PayloadBytes != last.BytesEnd-(first.BytesEnd-first.PayloadBytes) {
		return r, fmt.Errorf("%w: log %d: repacked chunk disagrees with the index it replaces", errCorruptMeta, id)
	}
	return repacked{object: object, intent: intent, data: data, ref: ref, entry: ne}, nil
}

// repackReplace replaces the index entries old (at revisions revs) by r's
// in one transaction, and caches r's chunk. A changed range is
// lakestream.ErrConflict.
func (e *Engine) repackReplace(ctx context.Context, id lakestream.LogID, old []indexEntry, revs []int64, r repacked) error {
	last := old[len(old)-1]
	cmps := make([]meta.Cmp, len(old))
	ops := []meta.Op{meta.Put(e.keys.idx(id, last.Last()), r.entry.Encode())}
	for i, ie := range old {
		cmps[i] = meta.Cmp{Key: e.keys.idx(id, ie.Last()), ModRevision: revs[i]}
		if i < len(old)-1 {
			ops = append(ops, meta.Delete(e.keys.idx(id, ie.Last())))
		}
	}
	ok, _, err := e.meta.Txn(ctx, cmps, ops)
	if err != nil {
		return fmt.Errorf("%w: replace index: %w", lakestream.ErrUnavailable, err)
	}
	if !ok {
		// A concurrent repack or trim changed the range: leave the new
		// object to GC and let the caller try again.
		e.dropIntentKey(ctx, r.intent)
		return fmt.Errorf("%w: log %d index changed during compaction", lakestream.ErrConflict, id)
	}
	if chunk, err := chunkFromObject(r.data, r.ref); err == nil {
		e.cache.put(chunkLoc{r.object, r.ref.Offset}, chunk)
	}
	return nil
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

func (e *Engine) repackHook(id lakestream.LogID, step string) error {
	if h := e.opts.hooks.repackStep; h != nil {
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
