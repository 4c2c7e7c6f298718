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
//  3. read every index entry — referenced objects stay;
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

	live := map[string]bool{}
	dead := map[string]string{} // object → intent key
	var liveWindows []liveWindow
	var deadWindows []string
	now := e.opts.Now().UnixMilli()
	pp := e.keys.pendingPrefix()
	if err := e.scan(ctx, pp, func(key string, value []byte) error {
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
				liveWindows = append(liveWindows, w)
			} else {
				deadWindows = append(deadWindows, key)
			}
			return nil
		}
		if ok {
			live[obj] = true
		} else {
			dead[obj] = key
		}
		return nil
	}); err != nil {
		return st, err
	}
	for _, obj := range objects {
		for _, w := range liveWindows {
			if w.protects(obj) {
				live[obj] = true
				break
			}
		}
	}

	// Objects named by commit records not folded yet are referenced. The
	// records are read before the index: a record folded meanwhile has
	// its index keys written before it was deleted.
	refs := map[string]bool{}
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
		return nil
	}); err != nil {
		return st, err
	}

	held := map[string]bool{} // objects the logs' Attachments hold (table claims)
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
		return st, err
	}

	// Objects outside wal/ (table files) are never listed: the layer
	// above owns them. One with a dead intent that no index entry and no
	// Attachment names was PUT by a compaction that died (or lost its
	// claim) before it claimed it, so no table references it: an orphan.
	for obj, k := range dead {
		if strings.HasPrefix(obj, "wal/") || refs[obj] || held[obj] {
			continue
		}
		if err := e.store.Delete(ctx, obj); err != nil && !errors.Is(err, objstore.ErrNotFound) {
			return st, fmt.Errorf("engine: gc delete %s: %w", obj, err)
		}
		st.TableOrphans++
		e.metrics.gcDeleted.Add(1)
		if _, _, err := e.meta.Txn(ctx, nil, []meta.Op{meta.Delete(k)}); err == nil {
			st.Intents++
		}
	}

	for _, obj := range objects {
		switch {
		case refs[obj]:
			st.Referenced++
		case live[obj]:
			st.Protected++
		default:
			if err := e.store.Delete(ctx, obj); err != nil && !errors.Is(err, objstore.ErrNotFound) {
				return st, fmt.Errorf("engine: gc delete %s: %w", obj, err)
			}
			st.Deleted++
			e.metrics.gcDeleted.Add(1)
			if k, ok := dead[obj]; ok {
				if _, _, err := e.meta.Txn(ctx, nil, []meta.Op{meta.Delete(k)}); err == nil {
					st.Intents++
				}
			}
		}
	}
	for _, k := range deadWindows {
		if _, _, err := e.meta.Txn(ctx, nil, []meta.Op{meta.Delete(k)}); err == nil {
			st.Intents++
		}
	}
	return st, nil
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
