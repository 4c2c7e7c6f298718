package tables

// Orphan removal (docs/compaction.md, "Orphan removal"): deleting table
// files nothing can read any more, after a safety window.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/apache/iceberg-go/catalog"

	"github.com/lakegate/lakegate/engine/index"
	"github.com/lakegate/lakegate/lakehouse/delta"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/objstore"
)

// orphanDeletesMax bounds the files one RemoveOrphans deletes.
const orphanDeletesMax = 10_000

// OrphanStats is what one RemoveOrphans did.
type OrphanStats struct {
	Listed  int   // files under <root>/data/
	Deleted int   // orphans deleted
	Bytes   int64 // their bytes
}

// RemoveOrphans deletes the files under tg.Root/data/ that are older than
// OrphanAge and that neither table (Delta: live, or removed less than
// OrphanAge ago; Iceberg: referenced by any snapshot in its metadata), nor
// an index entry of logs (the stream's logs), nor an unfinished table or
// bin-packing claim of them holds (a finished claim's files are in the
// tables or the index, or nowhere any more). A table it cannot read makes it delete nothing.
func (t *Tables) RemoveOrphans(ctx context.Context, tg Target, logs []lakestream.LogID) (OrphanStats, error) {
	var st OrphanStats
	if tg.Root == "" || strings.HasPrefix(tg.Root, "/") || strings.HasSuffix(tg.Root, "/") {
		return st, fmt.Errorf("%w: table root %q", lakestream.ErrInvalidArgument, tg.Root)
	}
	cutoff := t.opts.Now().Add(-t.opts.OrphanAge).UnixMilli()
	prefix := tg.Root + "/data/"
	var candidates []objstore.ObjectInfo
	err := t.st.Objects.List(ctx, prefix, func(oi objstore.ObjectInfo) error {
		st.Listed++
		if oi.ModTime != 0 && oi.ModTime < cutoff {
			candidates = append(candidates, oi)
		}
		return nil
	})
	if err != nil {
		return st, fmt.Errorf("%w: list %s: %w", lakestream.ErrUnavailable, prefix, err)
	}
	if len(candidates) == 0 {
		return st, nil
	}
	held, err := t.heldFiles(ctx, tg, logs, cutoff)
	if err != nil {
		return st, err
	}
	for _, oi := range candidates {
		if held[oi.Key] {
			continue
		}
		if st.Deleted == orphanDeletesMax {
			break
		}
		if err := t.st.Objects.Delete(ctx, oi.Key); err != nil && !errors.Is(err, objstore.ErrNotFound) {
			return st, fmt.Errorf("%w: delete %s: %w", lakestream.ErrUnavailable, oi.Key, err)
		}
		st.Deleted++
		st.Bytes += oi.Size
	}
	return st, nil
}

// heldFiles returns the store keys of the table files something may still
// read: the tables (Delta removes after cutoff, Unix ms), the logs' index
// and claims.
func (t *Tables) heldFiles(ctx context.Context, tg Target, logs []lakestream.LogID, cutoff int64) (map[string]bool, error) {
	held := map[string]bool{}
	hold := func(rel string) { held[tg.Root+"/"+rel] = true }
	tbl, err := delta.Open(ctx, t.st.Objects, tg.Root)
	if err != nil {
		return nil, err
	}
	snap, err := tbl.Snapshot(ctx)
	switch {
	case err == nil:
		for _, f := range snap.Files {
			hold(f.Path)
		}
		for _, r := range snap.Tombstones {
			if r.DeletionTimestamp == nil || *r.DeletionTimestamp >= cutoff {
				hold(r.Path)
			}
		}
	case !errors.Is(err, delta.ErrNoTable):
		return nil, fmt.Errorf("tables: orphans of %s: %w", tg.Root, err)
	}
	if t.opts.IcebergCatalog.StoreURL != "" && len(tg.Ident) >= 2 {
		cat, err := t.icebergCatalog(ctx)
		if err != nil {
			return nil, err
		}
		_, all, err := cat.DataFiles(ctx, tg.Ident, tg.Root, true)
		switch {
		case err == nil:
			for p := range all {
				hold(p)
			}
		case !errors.Is(err, catalog.ErrNoSuchTable) && !errors.Is(err, catalog.ErrNoSuchNamespace):
			return nil, fmt.Errorf("tables: orphans of %s: %w", tg.Root, err)
		}
	}
	ms := t.st.Meta
	for _, id := range logs {
		for from := int64(0); ; {
			cs, err := t.e.Chunks(ctx, id, from, 1000)
			if err != nil {
				return nil, err
			}
			for _, c := range cs {
				if c.Kind == index.KindParquet {
					held[c.Object] = true
				}
			}
			if len(cs) < 1000 {
				break
			}
			from = cs[len(cs)-1].End()
		}
		for _, name := range []string{claimName, binpackClaimName} {
			kv, ok, err := ms.Get(ctx, t.e.AttachmentKey(id, name))
			if err != nil {
				return nil, fmt.Errorf("%w: claim of log %d: %w", lakestream.ErrUnavailable, id, err)
			}
			if !ok {
				continue
			}
			if name == claimName {
				var c tableClaim
				if err := json.Unmarshal(kv.Value, &c); err != nil {
					return nil, fmt.Errorf("%w: table claim of log %d: %v", index.ErrCorrupt, id, err)
				}
				if !c.Indexed { // being committed: its files may be about to be referenced
					for _, f := range c.Files {
						held[c.Root+"/"+f.Path] = true
					}
				}
				continue
			}
			var c binpackClaim
			if err := json.Unmarshal(kv.Value, &c); err != nil {
				return nil, fmt.Errorf("%w: repack claim of log %d: %v", index.ErrCorrupt, id, err)
			}
			if !c.Indexed {
				held[c.Root+"/"+c.File.Path] = true
				for _, o := range c.Olds {
					held[c.Root+"/"+o.Path] = true
				}
			}
		}
	}
	return held, nil
}
