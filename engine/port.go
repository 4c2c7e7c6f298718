package engine

// The table port: what the engine offers a layer above it that keeps a
// log's older ranges in another format (the tables package: Parquet files
// committed to Delta and Iceberg), and what it needs from that layer. The
// engine stores opaque entries; it never decodes a payload, never builds a
// table file and knows no table format. docs/compaction.md says how the
// tables package uses this port; docs/index-format.md and docs/gc.md say
// what the engine guarantees. The tables package declares the part it uses
// as its own interface (tables.Port, in facets); *Engine satisfies it.
//
// From the layer above, given at construction (Options):
//   - a ChunkDecoder, with which the read path rebuilds the entries of an
//     index entry of kind index.KindParquet;
//   - Attachments, the per-log metadata values the layer keeps under the
//     log's key prefix, and the objects each one holds, so that GC keeps
//     them.
//
// To the layer above, methods on *Engine (all safe for concurrent use):
// Store, Meta, MetaRoot, LogKey, Chunks, ChunkEntries, PutPending,
// DropIntent, ReplaceChunks, ReplaceTableChunks, AdvanceCompacted and
// ObserveMaterialization.

import (
	"context"
	"fmt"

	"github.com/lakegate/lakegate/engine/index"
	"github.com/lakegate/lakegate/engine/wal"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
	"github.com/lakegate/lakegate/objstore"
)

// ChunkDecoder decodes chunks the engine does not write itself: the objects
// that index entries of kind index.KindParquet name (table files).
//
// DecodeChunk returns the entries of index entry c, reading what it needs
// of the object c.Object with read (ranged GETs of that object through the
// engine's store, counted in its metrics; a missing object is an error
// wrapping objstore.ErrNotFound). For a Parquet entry c.Length is the
// file's size and c.Offset says which of its row groups hold the entry
// (docs/index-format.md). It must return exactly c.Entries entries holding
// the records [c.First, c.End()) in offset order, each with its record
// count, its publish time as the log recorded it (never 0) and its payload
// byte-identical to what was appended; PayloadSize = len(Payload). The
// returned slices are the engine's from then on (cached and shared by
// readers: the decoder must not keep or modify them). Errors should wrap
// wal.ErrCorrupt for data that does not decode; the engine wraps them with
// the log and object. Safe for concurrent use.
type ChunkDecoder interface {
	DecodeChunk(ctx context.Context, read ReadRange, c index.Entry) ([]wal.DecodedEntry, error)
}

// ReadRange reads the bytes [offset, offset+length) of one object (a
// negative length: to its end), as objstore.Store.GetRange does.
type ReadRange func(ctx context.Context, offset, length int64) ([]byte, error)

// Attachment is a metadata value that a layer above the engine keeps per
// log, at AttachmentKey(id, Name) — the tables package's table claim, Name
// "table" (docs/compaction.md). The engine never writes or deletes it.
// Objects returns the object keys the value holds: CollectGarbage never
// deletes them (docs/gc.md, "Table files"), and fails the pass when
// Objects returns an error. Objects must be pure (no I/O) and safe for
// concurrent use.
type Attachment struct {
	Name    string
	Objects func(value []byte) ([]string, error)
}

// Chunk is one index entry of a log with the revision of its key, for a
// compare in ReplaceChunks.
type Chunk struct {
	index.Entry
	Revision int64 // ModRevision of the index key
	// record is the commit record of a chunk not folded yet (revision 0);
	// the engine's own reads only.
	record string
}

// NewChunk is an index entry that ReplaceChunks puts, with its decoded
// entries to cache (nil: none; read from the store on first use).
type NewChunk struct {
	Entry   index.Entry
	Decoded []wal.DecodedEntry // owned by the engine once passed
}

// PendingObject is an object for PutPending.
type PendingObject struct {
	Key  string
	Data []byte
}

// Store is the engine's object store, counted in the engine's metrics
// (lakegate_object_requests_total): the layer above keeps its own objects
// (table files, the Delta log) in it, outside wal/.
func (e *Engine) Store() objstore.Store { return e.store }

// Meta is the engine's metadata store, counted in the engine's metrics
// (lakegate_etcd_txns_total): the layer above keeps its own keys in it,
// under AttachmentKey(id, name) for its Attachments and under MetaRoot for the
// rest, never under a prefix docs/index-format.md gives the engine.
func (e *Engine) Meta() meta.Store { return e.meta }

// MetaRoot is the prefix of every metadata key of this engine (Options.MetaRoot).
func (e *Engine) MetaRoot() string { return e.keys.root }

// AttachmentKey is the metadata key of the value name keeps for log id:
// <root>logs/<id:016x>/<name>. name must be an Attachment's Name.
func (e *Engine) AttachmentKey(id lakestream.LogID, name string) string { return e.keys.log(id) + name }

// Chunks returns up to limit index entries of log id, from the one that
// holds offset from (or the first after it) on, in offset order, with the
// revisions of their keys. The entries it returns tile a prefix of
// [from's entry, head) unless a trim or a compaction changed the index
// meanwhile (a later ReplaceChunks compare catches that).
//
// Only index keys are listed: the commit log is folded first when the log
// has chunks not folded yet (docs/index-format.md, "The commit log"). A
// run (a version-2 or -4 entry) is listed as its chunks; Entry.Joint is
// set on each chunk that a kind-3 record applied to more than one log
// (docs/index-format.md, "Versions 3 and 4"): the Joint value is shared,
// the caller must not modify it.
func (e *Engine) Chunks(ctx context.Context, id lakestream.LogID, from int64, limit int) ([]Chunk, error) {
	l, err := e.log(ctx, id)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	unfolded := len(l.mu.tail) > 0
	l.mu.Unlock()
	if unfolded {
		if err := e.clog.foldNow(ctx); err != nil {
			return nil, err
		}
	}
	cs, err := l.chunksIn(ctx, from, prefixEnd(e.keys.idxPrefix(id)), limit)
	if err != nil {
		return nil, err
	}
	// A run of chunks (a version-2 entry) is listed as its chunks, each
	// with the run key's revision.
	out := make([]Chunk, 0, len(cs))
	for _, c := range cs {
		for _, one := range expand(c.Entry) {
			if len(out) < limit && one.End() > from {
				out = append(out, Chunk{Entry: one, Revision: c.Revision})
			}
		}
	}
	return out, nil
}

// ChunkEntries returns the entries of one chunk of log id (an entry that
// Chunks returned), with their headers as reads report them (offsets,
// publish time — the write time where none was given —, write time,
// cumulative size). Payloads alias the engine's cache: the caller must not
// modify them. It checks that the chunk holds exactly what its index entry
// says (records, payload bytes).
func (e *Engine) ChunkEntries(ctx context.Context, id lakestream.LogID, c index.Entry) ([]lakestream.Entry, error) {
	l, err := e.log(ctx, id)
	if err != nil {
		return nil, err
	}
	out := make([]lakestream.Entry, 0, c.Entries)
	off, bytes := c.First, c.BytesEnd-c.PayloadBytes
	for _, one := range expand(c) {
		lc, err := l.loadChunk(ctx, one)
		if err != nil {
			return nil, err
		}
		for _, de := range lc.entries {
			bytes += int64(len(de.Payload))
			h := lakestream.EntryHeader{
				Offset: off, Records: de.Records, PublishTimeMs: de.PublishTimeMs, WriteTimeMs: lc.writeMs,
				Size: int32(len(de.Payload)), CumulativeSize: bytes,
			}
			if h.PublishTimeMs == 0 {
				h.PublishTimeMs = lc.writeMs
			}
			out = append(out, lakestream.Entry{EntryHeader: h, Payload: de.Payload})
			off += int64(de.Records)
		}
	}
	if off != c.End() || bytes != c.BytesEnd {
		return nil, fmt.Errorf("%w: log %d chunk %s@%d disagrees with its index entry", errCorruptMeta, id, c.Object, c.Offset)
	}
	return out, nil
}

// PutPending stores objects, each with put-if-absent under a pending intent
// of this node (docs/gc.md): first every intent in one transaction, then
// the objects. It returns the intent keys, in the order of objects. Until
// an intent is dropped (DropIntent, or a transaction of the caller's that
// deletes the key) and for PendingIntentTTL at most, GC keeps the object;
// after that it keeps it only while an index entry or an Attachment names
// it. Errors wrap lakestream.ErrUnavailable; objects already PUT stay (GC
// collects them once their intent is dead).
func (e *Engine) PutPending(ctx context.Context, objects []PendingObject) ([]string, error) {
	intents := make([]string, len(objects))
	ops := make([]meta.Op, len(objects))
	created := fmt.Appendf(nil, `{"created":%d}`, e.opts.Now().UnixMilli())
	for i, o := range objects {
		intents[i] = e.keys.pending(e.opts.NodeID, o.Key)
		ops[i] = meta.Put(intents[i], created)
	}
	if _, _, err := e.meta.Txn(ctx, nil, ops); err != nil {
		return nil, fmt.Errorf("%w: pending intents: %w", lakestream.ErrUnavailable, err)
	}
	for _, o := range objects {
		if err := e.store.PutIfAbsent(ctx, o.Key, o.Data); err != nil {
			return nil, fmt.Errorf("%w: put %s: %w", lakestream.ErrUnavailable, o.Key, err)
		}
		e.metrics.observePut(len(o.Data), 0) // counted, not timed: the PUT time metric is the WAL's
	}
	return intents, nil
}

// DropIntent deletes a pending intent that PutPending returned, retrying a
// few times; an intent that stays only delays GC of an unreferenced object
// until PendingIntentTTL.
func (e *Engine) DropIntent(ctx context.Context, key string) { e.dropIntentKey(ctx, key) }

// ReplaceChunks makes news the storage of log id's offsets [from, end): in
// one metadata transaction it compares the revision of every index entry of
// [from, end) and cmps (the caller's), deletes those entries, puts news (at
// their last offsets) and applies ops (the caller's). news must tile
// [from, end) and hold the same entries as the chunks they replace (the
// caller's promise: readers are served from them from then on).
//
// When the index entries of [from, end) are not WAL chunks that tile the
// range exactly (the log was trimmed, or RepackWAL merged them with chunks
// beyond end), the index is left as it is and only cmps and ops are
// applied: replaced is then 0. A failed compare returns
// lakestream.ErrConflict (nothing applied); a store error
// lakestream.ErrUnavailable (outcome unknown: read the index again).
// Readers never see two entries for an offset nor a gap (S5, S7, S8).
func (e *Engine) ReplaceChunks(ctx context.Context, id lakestream.LogID, from, end int64, news []NewChunk, cmps []meta.Cmp, ops []meta.Op) (replaced int, err error) {
	old, tiled, rest, err := e.walRun(ctx, id, from, end)
	if err != nil {
		return 0, err
	}
	cmps = append([]meta.Cmp(nil), cmps...)
	ops = append([]meta.Op(nil), ops...)
	if tiled {
		newKeys := map[string]bool{}
		for _, n := range news {
			k := e.keys.idx(id, n.Entry.Last())
			newKeys[k] = true
			ops = append(ops, meta.Put(k, n.Entry.Encode()))
		}
		for i, c := range old {
			k := e.keys.idx(id, c.Last())
			cmps = append(cmps, meta.Cmp{Key: k, ModRevision: c.Revision})
			switch {
			case rest != nil && i == len(old)-1:
				// The run goes on past end: its remaining chunks stay, under its key.
				ops = append(ops, meta.Put(k, rest.Encode()))
			case !newKeys[k]:
				ops = append(ops, meta.Delete(k))
			}
		}
	} else {
		e.opts.Logger.Warn("engine: compacted range no longer tiled by WAL chunks; index left as is",
			"log", id, "from", from, "end", end)
	}
	if l := e.openLog(id); l != nil {
		defer l.dropIdxCache()
	}
	ok, _, err := e.meta.Txn(ctx, cmps, ops)
	if err != nil {
		return 0, fmt.Errorf("%w: replace index: %w", lakestream.ErrUnavailable, err)
	}
	if !ok {
		return 0, fmt.Errorf("%w: log %d index changed during compaction", lakestream.ErrConflict, id)
	}
	if !tiled {
		return 0, nil
	}
	for _, n := range news {
		if n.Decoded == nil {
			continue
		}
		c := &loadedChunk{writeMs: n.Entry.WriteMs, entries: n.Decoded}
		for _, de := range n.Decoded {
			c.size += int64(len(de.Payload))
		}
		e.cache.put(chunkLoc{n.Entry.Object, n.Entry.Offset}, c)
	}
	n := 0 // chunks replaced
	for _, c := range old {
		for _, one := range expand(c.Entry) {
			if one.End() <= end {
				n++
			}
		}
	}
	return n, nil
}

// ReplaceTableChunks makes news the storage of the offsets that olds hold:
// olds are consecutive index entries of kind index.KindParquet of log id,
// as Chunks returned them (with their revisions); news must tile
// [olds[0].First, olds[len(olds)-1].End()) and hold the same entries (the
// caller's promise: readers are served from them from then on). In one
// metadata transaction it compares the revision of every old entry's key
// and cmps (the caller's), deletes the old keys that no new entry
// overwrites, puts news (at their last offsets) and applies ops (the
// caller's). The objects the old entries name are not deleted: they are
// the layer above's (docs/index-format.md, "Bin-packing").
//
// It returns lakestream.ErrInvalidArgument when olds are not consecutive
// Parquet entries, news do not tile their range, or the transaction would
// exceed the store's MaxTxnOps; lakestream.ErrConflict when a compare
// fails (nothing applied); lakestream.ErrUnavailable on a store error
// (outcome unknown: read the index again). Readers never see two entries
// for an offset nor a gap (S5, S7, S8).
func (e *Engine) ReplaceTableChunks(ctx context.Context, id lakestream.LogID, olds []Chunk, news []NewChunk, cmps []meta.Cmp, ops []meta.Op) error {
	if len(olds) == 0 || len(news) == 0 {
		return fmt.Errorf("%w: log %d: nothing to replace", lakestream.ErrInvalidArgument, id)
	}
	pos := olds[0].First
	for _, c := range olds {
		if c.Kind != index.KindParquet || c.First != pos || c.Records < 1 {
			return fmt.Errorf("%w: log %d: entries to replace are not consecutive table files at %d", lakestream.ErrInvalidArgument, id, pos)
		}
		pos = c.End()
	}
	end := pos
	pos = olds[0].First
	for _, n := range news {
		if n.Entry.Kind != index.KindParquet || n.Entry.First != pos || n.Entry.Records < 1 {
			return fmt.Errorf("%w: log %d: new entries do not tile %d..%d", lakestream.ErrInvalidArgument, id, olds[0].First, end)
		}
		pos = n.Entry.End()
	}
	if pos != end {
		return fmt.Errorf("%w: log %d: new entries end at %d, not %d", lakestream.ErrInvalidArgument, id, pos, end)
	}
	if max(len(olds)+len(cmps), len(olds)+len(news)+len(ops)) > e.meta.MaxTxnOps() {
		return fmt.Errorf("%w: log %d: replacing %d entries by %d exceeds %d operations", lakestream.ErrInvalidArgument, id, len(olds), len(news), e.meta.MaxTxnOps())
	}
	cmps = append([]meta.Cmp(nil), cmps...)
	ops = append([]meta.Op(nil), ops...)
	newKeys := map[string]bool{}
	for _, n := range news {
		k := e.keys.idx(id, n.Entry.Last())
		newKeys[k] = true
		ops = append(ops, meta.Put(k, n.Entry.Encode()))
	}
	if l := e.openLog(id); l != nil {
		defer l.dropIdxCache()
	}
	for _, c := range olds {
		k := e.keys.idx(id, c.Last())
		cmps = append(cmps, meta.Cmp{Key: k, ModRevision: c.Revision})
		if !newKeys[k] {
			ops = append(ops, meta.Delete(k))
		}
	}
	ok, _, err := e.meta.Txn(ctx, cmps, ops)
	if err != nil {
		return fmt.Errorf("%w: replace index: %w", lakestream.ErrUnavailable, err)
	}
	if !ok {
		return fmt.Errorf("%w: log %d index changed during bin-packing", lakestream.ErrConflict, id)
	}
	for _, n := range news {
		if n.Decoded == nil {
			continue
		}
		c := &loadedChunk{writeMs: n.Entry.WriteMs, entries: n.Decoded}
		for _, de := range n.Decoded {
			c.size += int64(len(de.Payload))
		}
		e.cache.put(chunkLoc{n.Entry.Object, n.Entry.Offset}, c)
	}
	return nil
}

// AdvanceCompacted moves log id's compaction cursor (logs/<id>/compacted)
// to end unless it is there or beyond already: it never moves backwards
// (S6).
func (e *Engine) AdvanceCompacted(ctx context.Context, id lakestream.LogID, end int64) error {
	return e.advanceCompactCursor(ctx, id, end)
}

// walRun returns the index entries of [from, end) with their revisions;
// tiled reports whether they are WAL chunks that tile the range exactly.
// When the range ends inside a run of chunks (a version-2 entry) at one of
// its chunk boundaries, that run is returned last and rest holds the run
// of its chunks after end (to be written back under the run's key).
func (e *Engine) walRun(ctx context.Context, id lakestream.LogID, from, end int64) (cs []Chunk, tiled bool, rest *indexEntry, err error) {
	l, err := e.log(ctx, id)
	if err != nil {
		return nil, false, nil, err
	}
	cs, err = l.chunksIn(ctx, from, e.keys.idx(id, end), e.meta.MaxTxnOps())
	if err != nil {
		return nil, false, nil, err
	}
	pos := from
	for _, c := range cs {
		if c.Kind != kindWAL || c.First != pos {
			return nil, false, nil, nil
		}
		pos = c.End()
	}
	if pos == end {
		return cs, len(cs) > 0, nil, nil
	}
	// The entry holding end-1 may be a run that goes on past end.
	next, err := l.chunksIn(ctx, end, prefixEnd(e.keys.idxPrefix(id)), 1)
	if err != nil || len(next) == 0 || next[0].Kind != kindWAL || next[0].First != pos || len(next[0].Segments) < 2 {
		return nil, false, nil, err
	}
	parts := expand(next[0].Entry)
	i := 0
	for i < len(parts) && parts[i].End() <= end {
		i++
	}
	if i == 0 || parts[i-1].End() != end {
		return nil, false, nil, nil // end is not a chunk boundary of the run
	}
	r := runOf(parts[i:])
	return append(cs, next[0]), true, &r, nil
}

// attachmentObjects returns, for a key under logs/ that is an Attachment's
// (logs/<16 hex>/<name>), the objects its value holds; ok is false for any
// other key.
func (e *Engine) attachmentObjects(rest string, value []byte) (objects []string, ok bool, err error) {
	if len(rest) <= 17 || rest[16] != '/' {
		return nil, false, nil
	}
	for _, a := range e.opts.Attachments {
		if rest[17:] == a.Name {
			objects, err = a.Objects(value)
			return objects, true, err
		}
	}
	return nil, false, nil
}
