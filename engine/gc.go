package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/lakegate/lakegate/engine/index"
	"github.com/lakegate/lakegate/meta"
	"github.com/lakegate/lakegate/objstore"
)

// GCStats reports one garbage-collection pass.
type GCStats struct {
	Listed     int // WAL objects in the store
	Referenced int // of those, referenced by an index entry
	Protected  int // of those, protected by a live pending intent
	Deleted    int // deleted by this pass
	Intents    int // dead intents removed
	// TableOrphans are objects outside wal/ (table files) that a layer
	// above PUT through PutPending and never made referenced: deleted
	// (docs/gc.md, "Table files").
	TableOrphans int
}

// CollectGarbage runs one mark-and-sweep pass over WAL objects (docs/gc.md):
//
//  1. list the objects under wal/ (only objects PUT before this step count);
//  2. read the pending intents — an object whose writer has not finished
//     committing is protected while its intent is younger than
//     PendingIntentTTL;
//  3. read the staged records, the commit records, then every index entry
//     — referenced objects stay;
//  4. delete the rest, then the dead intents of deleted objects.
//
// A writer writes its intent before its PUT and deletes it only after all
// its commits, so an object listed in step 1 is either protected in step 2
// or its index entries are visible in step 3. Concurrent passes (on other
// nodes) are safe.
func (e *Engine) CollectGarbage(ctx context.Context) (GCStats, error) {
	var st GCStats
	var objects []string
	err := e.store.List(ctx, "wal/", func(oi objstore.ObjectInfo) error {
		objects = append(objects, oi.Key)
		return nil
	})
	if err != nil {
		return st, fmt.Errorf("engine: gc list: %w", err)
	}
	st.Listed = len(objects)
	// The intents are read after the listing, the references after the
	// intents: an object PUT meanwhile is either not listed or protected.
	in, err := e.gcIntents(ctx)
	if err != nil {
		return st, err
	}
	for _, obj := range objects {
		for _, w := range in.liveWindows {
			if w.protects(obj) {
				in.live[obj] = true
				break
			}
		}
	}
	refs, held, err := e.gcReferences(ctx)
	if err != nil {
		return st, err
	}
	if err := e.gcTableOrphans(ctx, in.dead, refs, held, &st); err != nil {
		return st, err
	}
	if err := e.gcWAL(ctx, objects, in, refs, &st); err != nil {
		return st, err
	}
	for _, k := range in.deadWindows {
		if _, _, err := e.meta.Txn(ctx, nil, []meta.Op{meta.Delete(k)}); err == nil {
			st.Intents++
		}
	}
	return st, nil
}

// gcIntentSet is what the pending intents say, as one GC pass reads them.
type gcIntentSet struct {
	live        map[string]bool   // objects a live intent protects
	dead        map[string]string // object → key of its expired intent
	liveWindows []liveWindow      // WAL writers' live window intents
	deadWindows []string          // keys of expired window intents
}

// gcIntents reads the pending intents: an intent younger than
// PendingIntentTTL protects its object (a window intent, the node's
// objects in its window); an older one is dead.
func (e *Engine) gcIntents(ctx context.Context) (gcIntentSet, error) {
	in := gcIntentSet{live: map[string]bool{}, dead: map[string]string{}}
	now := e.opts.Now().UnixMilli()
	pp := e.keys.pendingPrefix()
	err := e.scan(ctx, pp, func(key string, value []byte) error {
		rest := key[len(pp):]
		i := strings.IndexByte(rest, '/')
		if i < 0 {
			return nil
		}
		obj := rest[i+1:]
		var v struct {
			Created  int64 `json:"created"`
			From, To int64
			Done     uint64
		}
		ok := json.Unmarshal(value, &v) == nil && now-v.Created < e.opts.PendingIntentTTL.Milliseconds()
		if strings.HasPrefix(obj, windowIntentPrefix) {
			// A WAL writer's window intent: it protects the node's objects
			// named in [from, to).
			if ok {
				w := liveWindow{node: rest[:i], from: v.From, to: v.To, done: v.Done}
				if w.node == e.opts.NodeID {
					// This engine's own writer knows better than its last
					// published value (read after the objects were listed).
					w.done = max(w.done, e.writer.committed.Load())
				}
				in.liveWindows = append(in.liveWindows, w)
			} else {
				in.deadWindows = append(in.deadWindows, key)
			}
			return nil
		}
		if ok {
			in.live[obj] = true
		} else {
			in.dead[obj] = key
		}
		return nil
	})
	return in, err
}

// gcReferences returns the objects the metadata references — named by a
// commit record not folded yet or by an index entry — and those the logs'
// Attachments hold (table claims).
func (e *Engine) gcReferences(ctx context.Context) (refs, held map[string]bool, _ error) {
	// The staged records are read before the commit records, and those
	// before the index: a staging set committed meanwhile created its
	// kind-3 record in the transaction that deleted its staged records,
	// and a record folded meanwhile has its index keys written before it
	// was deleted. So every reference is seen in one place or the next.
	refs = map[string]bool{}
	sp := e.keys.stagePrefix()
	if err := e.scan(ctx, sp, func(key string, value []byte) error {
		if !isStagedChunkKey(key[len(sp):]) || index.IsVoid(value) {
			return nil
		}
		r, err := index.DecodeRecord(value)
		if err != nil {
			return fmt.Errorf("engine: gc: %s: %w", key, err)
		}
		refs[r.Object] = true
		return nil
	}); err != nil {
		return nil, nil, err
	}
	if err := e.scan(ctx, e.keys.recordPrefix(), func(key string, value []byte) error {
		if index.IsVoid(value) {
			return nil
		}
		r, err := index.DecodeRecord(value)
		if err != nil {
			return fmt.Errorf("engine: gc: %s: %w", key, err)
		}
		if r.Object != "" {
			refs[r.Object] = true
		}
		for _, ch := range r.Chunks {
			if ch.Object != "" { // kind 3: each chunk names its object
				refs[ch.Object] = true
			}
		}
		return nil
	}); err != nil {
		return nil, nil, err
	}

	held = map[string]bool{}
	lp := e.keys.logsPrefix()
	if err := e.scan(ctx, lp, func(key string, value []byte) error {
		// logs/<16 hex>/idx/<16 hex>; anything else (heads, cursors whose
		// names contain "/idx/") is not an index entry.
		rest := key[len(lp):]
		if objs, ok, err := e.attachmentObjects(rest, value); ok {
			if err != nil {
				return fmt.Errorf("engine: gc: %s: %w", key, err)
			}
			for _, o := range objs {
				held[o] = true
			}
			return nil
		}
		if len(rest) != 16+5+16 || rest[16:21] != "/idx/" {
			return nil
		}
		ie, err := decodeIndexEntry(value)
		if err != nil {
			return fmt.Errorf("engine: gc: %s: %w", key, err)
		}
		for _, sg := range ie.Segs() {
			refs[sg.Object] = true
		}
		return nil
	}); err != nil {
		return nil, nil, err
	}
	return refs, held, nil
}

// gcTableOrphans deletes the objects outside wal/ (table files) that a
// dead intent names and nothing references or holds. Such objects are
// never listed: the layer above owns them. One with a dead intent that no
// index entry and no Attachment names was PUT by a materialization that
// died (or lost its claim) before it claimed it, so no table references
// it: an orphan.
func (e *Engine) gcTableOrphans(ctx context.Context, dead map[string]string, refs, held map[string]bool, st *GCStats) error {
	for obj, k := range dead {
		if strings.HasPrefix(obj, "wal/") || refs[obj] || held[obj] {
			continue
		}
		if err := e.store.Delete(ctx, obj); err != nil && !errors.Is(err, objstore.ErrNotFound) {
			return fmt.Errorf("engine: gc delete %s: %w", obj, err)
		}
		st.TableOrphans++
		e.metrics.gcDeleted.Add(1)
		if _, _, err := e.meta.Txn(ctx, nil, []meta.Op{meta.Delete(k)}); err == nil {
			st.Intents++
		}
	}
	return nil
}

// gcWAL deletes the listed WAL objects that nothing references and no
// live intent protects, with their dead intents.
func (e *Engine) gcWAL(ctx context.Context, objects []string, in gcIntentSet, refs map[string]bool, st *GCStats) error {
	for _, obj := range objects {
		switch {
		case refs[obj]:
			st.Referenced++
		case in.live[obj]:
			st.Protected++
		default:
			if err := e.store.Delete(ctx, obj); err != nil && !errors.Is(err, objstore.ErrNotFound) {
				return fmt.Errorf("engine: gc delete %s: %w", obj, err)
			}
			st.Deleted++
			e.metrics.gcDeleted.Add(1)
			if k, ok := in.dead[obj]; ok {
				if _, _, err := e.meta.Txn(ctx, nil, []meta.Op{meta.Delete(k)}); err == nil {
					st.Intents++
				}
			}
		}
	}
	return nil
}

// liveWindow is a live window intent: node's WAL objects named with a
// write time in [from, to) and a flush seq above done are protected (those
// up to done are committed or failed: referenced through the commit log
// and the index, or orphans).
type liveWindow struct {
	node     string
	from, to int64
	done     uint64
}

// protects parses wal/<node>/<ms:013d>-<seq:08x>-<random>.
func (w liveWindow) protects(obj string) bool {
	p := "wal/" + w.node + "/"
	if !strings.HasPrefix(obj, p) || len(obj) < len(p)+15 {
		return false
	}
	name := obj[len(p):]
	ms, err := strconv.ParseInt(name[:13], 10, 64)
	if err != nil || ms < w.from || ms >= w.to || name[13] != '-' {
		return false
	}
	rest := name[14:]
	if i := strings.IndexByte(rest, '-'); i > 0 {
		rest = rest[:i]
	}
	seq, err := strconv.ParseUint(rest, 16, 64)
	return err != nil || seq > w.done // an unparsable name stays protected
}

// scan calls fn for every key under prefix, paging through the store.
func (e *Engine) scan(ctx context.Context, prefix string, fn func(key string, value []byte) error) error {
	start, end := prefix, prefixEnd(prefix)
	for {
		kvs, err := e.meta.Range(ctx, start, end, 1000)
		if err != nil {
			return fmt.Errorf("engine: scan %s: %w", prefix, err)
		}
		for _, kv := range kvs {
			if err := fn(kv.Key, kv.Value); err != nil {
				return err
			}
		}
		if len(kvs) < 1000 {
			return nil
		}
		start = kvs[len(kvs)-1].Key + "\x00"
	}
}
