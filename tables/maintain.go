package tables

// Table maintenance (docs/compaction.md, "Maintenance"): keeping a
// stream's tables bounded while they grow for months. Run by the table's
// compaction owner (one node per table across the cluster), between
// materializations, under the table's commit lock.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/apache/iceberg-go/catalog"

	"github.com/lakegate/lakegate/lakehouse/delta"
	"github.com/lakegate/lakegate/lakehouse/iceberg"
	"github.com/lakegate/lakegate/lakestream"
)

// MaintainStats is what one Maintain did.
type MaintainStats struct {
	DeltaCommitsDeleted     int // expired JSON commits removed from _delta_log
	DeltaCheckpointsDeleted int
	SnapshotsExpired        int // Iceberg snapshots removed
	SnapshotsKept           int
	ManifestFilesDeleted    int // manifests and manifest lists of expired snapshots
}

// Maintain runs the maintenance of one stream's tables (the job runner
// applies table retention, ApplyRetention, just before it): Delta log cleanup
// (DeltaLogRetention; the writer checkpoints every 10 commits) and Iceberg
// snapshot expiry (SnapshotRetention, keeping SnapshotsRetainLast). Every step is idempotent and leaves the
// tables readable at any crash point; data files are never deleted here.
func (t *Tables) Maintain(ctx context.Context, tg Target) (MaintainStats, error) {
	var st MaintainStats
	unlock := t.lockTable(tg.Root)
	defer unlock()
	var errs []error
	if tg.Delta {
		tbl, err := delta.Open(ctx, t.st.Objects, tg.Root, delta.WithClock(t.opts.Now))
		if err == nil {
			var cs delta.CleanStats
			if cs, err = tbl.CleanLog(ctx, t.opts.DeltaLogRetention); err == nil {
				st.DeltaCommitsDeleted, st.DeltaCheckpointsDeleted = cs.Commits, cs.Checkpoints
			}
		}
		if err != nil && !errors.Is(err, delta.ErrNoTable) {
			errs = append(errs, err)
		}
	}
	if tg.Iceberg {
		cat, err := t.icebergCatalog(ctx)
		if err == nil {
			var es iceberg.ExpireStats
			es, err = cat.Expire(ctx, tg.Ident, t.opts.SnapshotRetention, t.opts.SnapshotsRetainLast)
			st.SnapshotsExpired, st.SnapshotsKept = es.Expired, es.Kept
			st.ManifestFilesDeleted = es.Manifests + es.ManifestLists
		}
		if err != nil && !isNoTable(err) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return st, fmt.Errorf("tables: maintenance of %s: %w", tg.Root, err)
	}
	return st, nil
}

// isNoTable reports an Iceberg table not created yet.
func isNoTable(err error) bool {
	return errors.Is(err, catalog.ErrNoSuchTable) || errors.Is(err, catalog.ErrNoSuchNamespace)
}

// binpackDue reports whether log id was not bin-packed for BinpackInterval
// on this node, and marks it bin-packed now.
func (t *Tables) binpackDue(id lakestream.LogID) bool {
	return t.checkBinpackDue(id, true)
}

// isBinpackDue is binpackDue without marking anything.
func (t *Tables) isBinpackDue(id lakestream.LogID) bool {
	return t.checkBinpackDue(id, false)
}

func (t *Tables) checkBinpackDue(id lakestream.LogID, mark bool) bool {
	if t.opts.BinpackInterval < 0 || t.opts.BinpackTargetBytes < 0 {
		return false
	}
	now := t.opts.Now()
	t.binpacked.Lock()
	defer t.binpacked.Unlock()
	if t.binpacked.m == nil {
		t.binpacked.m = map[lakestream.LogID]time.Time{}
	}
	if last, ok := t.binpacked.m[id]; ok && now.Sub(last) < t.opts.BinpackInterval {
		return false
	}
	if mark {
		t.binpacked.m[id] = now
	}
	return true
}

// maintenanceDue reports whether the table at root was not maintained for
// MaintenanceInterval on this node, and marks it maintained now.
func (t *Tables) maintenanceDue(root string) bool {
	return t.checkMaintenanceDue(root, true)
}

// isMaintenanceDue is maintenanceDue without marking anything.
func (t *Tables) isMaintenanceDue(root string) bool {
	return t.checkMaintenanceDue(root, false)
}

func (t *Tables) checkMaintenanceDue(root string, mark bool) bool {
	if t.opts.MaintenanceInterval < 0 {
		return false
	}
	now := t.opts.Now()
	t.maintained.Lock()
	defer t.maintained.Unlock()
	if t.maintained.m == nil {
		t.maintained.m = map[string]time.Time{}
	}
	if last, ok := t.maintained.m[root]; ok && now.Sub(last) < t.opts.MaintenanceInterval {
		return false
	}
	if mark {
		t.maintained.m[root] = now
	}
	return true
}
