package iceberg

// Table maintenance of lakegate's Iceberg tables (docs/iceberg.md,
// "Maintenance"): snapshot expiry, with the metadata files only expired
// snapshots used removed, never data files (they are shared with the
// Delta table and the log's index).

import (
	"context"
	"errors"
	"fmt"
	"time"

	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
)

// ExpireStats is what Expire did.
type ExpireStats struct {
	Expired       int // snapshots removed from the metadata
	Kept          int // snapshots left
	ManifestLists int // manifest list files deleted
	Manifests     int // manifest files deleted
}

// manifestsToRewrite: a current snapshot with more manifests than this
// gets them rewritten (merged by size) before expiry.
const manifestsToRewrite = 16

// rewriteManifests merges the current snapshot's manifests when there are
// more than manifestsToRewrite, in one commit (a "replace" snapshot that
// changes no data); it reports whether it committed.
func (c *Catalog) rewriteManifests(ctx context.Context, id table.Identifier) (bool, error) {
	tbl, err := c.cat.LoadTable(ctx, id)
	if err != nil {
		return false, fmt.Errorf("iceberg: load %s: %w", id, err)
	}
	cur := tbl.CurrentSnapshot()
	if cur == nil {
		return false, nil
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return false, err
	}
	ms, err := cur.Manifests(fs)
	if err != nil || len(ms) <= manifestsToRewrite {
		return false, err
	}
	txn := tbl.NewTransaction()
	res, err := txn.RewriteManifests(ctx)
	if err != nil {
		return false, fmt.Errorf("iceberg: rewrite manifests of %s: %w", id, err)
	}
	if res == nil || len(res.RewrittenManifests) == 0 {
		return false, nil
	}
	if _, err := txn.Commit(ctx); err != nil {
		return false, err // a lost race: the next maintenance tries again
	}
	return true, nil
}

// Expire first merges the current snapshot's manifests when they are
// many (rewriteManifests), then removes the snapshots of the table older than olderThan, keeping
// at least retainLast, in one catalog commit (lost races are retried like
// Commit's), then deletes the manifest lists of the expired snapshots and
// the manifests no kept snapshot references. Data files stay. Idempotent;
// a crash after the commit leaves unreferenced manifest files behind,
// never a kept snapshot without its files.
func (c *Catalog) Expire(ctx context.Context, ident []string, olderThan time.Duration, retainLast int) (ExpireStats, error) {
	var st ExpireStats
	id := table.Identifier(ident)
	if _, err := c.rewriteManifests(ctx, id); err != nil {
		return st, err
	}
	var lastErr error
	for attempt := range commitAttemptsMax {
		if attempt > 0 {
			if err := backoff(ctx, attempt); err != nil {
				return st, errors.Join(err, lastErr)
			}
		}
		tbl, err := c.cat.LoadTable(ctx, id)
		if err != nil {
			return st, fmt.Errorf("iceberg: load %s: %w", id, err)
		}
		before := tbl.Metadata().Snapshots()
		txn := tbl.NewTransaction()
		if err := txn.ExpireSnapshots(table.WithOlderThan(olderThan), table.WithRetainLast(retainLast), table.WithPostCommit(false)); err != nil {
			return st, fmt.Errorf("iceberg: expire %s: %w", id, err)
		}
		staged, err := txn.StagedTable()
		if err != nil {
			return st, fmt.Errorf("iceberg: expire %s: %w", id, err)
		}
		if len(staged.Metadata().Snapshots()) == len(before) {
			st.Kept = len(before)
			return st, nil
		}
		after, err := txn.Commit(ctx)
		if err != nil {
			lastErr = err
			continue
		}
		kept := map[int64]bool{}
		for _, s := range after.Metadata().Snapshots() {
			kept[s.SnapshotID] = true
		}
		st.Kept = len(kept)
		st.Expired = len(before) - len(kept)
		fs, err := tbl.FS(ctx)
		if err != nil {
			return st, nil // files stay: unreferenced, harmless
		}
		keptManifests := map[string]bool{}
		for _, s := range after.Metadata().Snapshots() {
			ms, err := s.Manifests(fs)
			if err != nil {
				return st, nil // cannot tell what is kept: delete nothing
			}
			for _, m := range ms {
				keptManifests[m.FilePath()] = true
			}
		}
		for _, s := range before {
			if kept[s.SnapshotID] {
				continue
			}
			if ms, err := s.Manifests(fs); err == nil {
				for _, m := range ms {
					if p := m.FilePath(); !keptManifests[p] {
						keptManifests[p] = true // once
						if removeFile(fs, p) {
							st.Manifests++
						}
					}
				}
			}
			if s.ManifestList != "" && removeFile(fs, s.ManifestList) {
				st.ManifestLists++
			}
		}
		return st, nil
	}
	return st, fmt.Errorf("%w: expire %s after %d attempts: %w", ErrConflict, id, commitAttemptsMax, lastErr)
}

func removeFile(fs icebergio.IO, path string) bool { return fs.Remove(path) == nil }
