package iceberg

// Bin-packing commits of lakegate's Iceberg tables (docs/compaction.md,
// "Bin-packing"): a replace snapshot that swaps small data files for one
// file with the same rows, idempotent per log by a table property; and the
// data files a table references, for bin-packing and orphan removal.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
)

// RepackSeqProperty is the table property recording the sequence number of
// the last bin-packing of log id committed to the table.
func RepackSeqProperty(id int64) string {
	return "lakegate.repack." + strconv.FormatInt(id, 10) + ".seq"
}

// ReplaceRequest swaps files of one log for one file with the same rows.
type ReplaceRequest struct {
	Ident []string
	Root  string // the table's key prefix; the location is Location(Root)
	// LogID and Seq identify the bin-packing: after the commit the table
	// property lakegate.repack.<LogID>.seq is Seq.
	LogID int64
	Seq   int64
	// Remove are the live data files to drop and Add the new file, paths
	// relative to Root ("data/…/x.parquet").
	Remove []string
	Add    string
}

// Replace commits req as one replace snapshot (iceberg-go's rewrite: data
// files deleted and added, same rows) together with the property
// lakegate.repack.<LogID>.seq = Seq. A table whose recorded seq for the log
// is already ≥ Seq is left alone: committed reports whether this call
// committed. A file of req.Remove that is not live in the current snapshot
// is ErrConflict (nothing committed). Lost compare-and-swaps are retried as
// in Commit.
func (c *Catalog) Replace(ctx context.Context, req ReplaceRequest) (committed bool, err error) {
	if err := validIdent(req.Ident); err != nil {
		return false, err
	}
	if len(req.Remove) == 0 || req.Add == "" {
		return false, fmt.Errorf("%w: replace needs files to remove and one to add", ErrInvalid)
	}
	loc := c.Location(req.Root)
	for _, f := range append([]string{req.Add}, req.Remove...) {
		if f == "" || strings.HasPrefix(f, "/") || strings.Contains(f, "..") {
			return false, fmt.Errorf("%w: file path %q", ErrInvalid, f)
		}
	}
	ident := table.Identifier(req.Ident)
	key := RepackSeqProperty(req.LogID)
	var lastErr error
	for attempt := range commitAttemptsMax {
		if attempt > 0 {
			if err := backoff(ctx, attempt); err != nil {
				return false, errors.Join(err, lastErr)
			}
		}
		tbl, err := c.cat.LoadTable(ctx, ident)
		if err != nil {
			lastErr = fmt.Errorf("iceberg: load %s: %w", ident, err)
			if errors.Is(err, catalog.ErrNoSuchTable) || errors.Is(err, catalog.ErrNoSuchNamespace) {
				return false, lastErr
			}
			continue
		}
		if got := strings.TrimSuffix(tbl.Location(), "/"); got != loc {
			return false, fmt.Errorf("%w: %s is at %s, not %s", ErrTableMismatch, ident, got, loc)
		}
		seq, err := recordedEnd(tbl, key)
		if err != nil {
			return false, err
		}
		if seq >= req.Seq {
			return false, nil
		}
		fs, err := tbl.FS(ctx)
		if err != nil {
			return false, fmt.Errorf("iceberg: %s: %w", ident, err)
		}
		live, err := liveDataFiles(tbl)
		if err != nil {
			lastErr = err
			continue
		}
		txn := tbl.NewTransaction()
		if err := txn.SetProperties(ice.Properties{key: strconv.FormatInt(req.Seq, 10)}); err != nil {
			return false, fmt.Errorf("iceberg: %s: %w", ident, err)
		}
		rw := txn.NewRewrite(ice.Properties{"lakegate.log": strconv.FormatInt(req.LogID, 10), "lakegate.repack": strconv.FormatInt(req.Seq, 10)})
		for _, f := range req.Remove {
			df, ok := live[loc+"/"+f]
			if !ok {
				return false, fmt.Errorf("%w: %s: %s is not a live data file", ErrConflict, ident, f)
			}
			rw.DeleteFile(df)
		}
		df, err := table.FileToDataFile(ctx, fs, loc+"/"+req.Add, tbl.Schema(), tbl.Spec(), 0, tbl.Properties())
		if err != nil {
			return false, fmt.Errorf("iceberg: %s: data file %s: %w", ident, req.Add, err)
		}
		rw.AddDataFile(df)
		if err := rw.Commit(ctx); err != nil {
			return false, fmt.Errorf("iceberg: replace in %s: %w", ident, err)
		}
		if _, err := txn.Commit(ctx); err != nil {
			lastErr = err // lost race or unknown outcome: the reload sees
			continue
		}
		return true, nil
	}
	return false, fmt.Errorf("%w: replace in %s after %d attempts: %w", ErrConflict, ident, commitAttemptsMax, lastErr)
}

// liveDataFiles returns the data files of the table's current snapshot by
// absolute path.
func liveDataFiles(tbl *table.Table) (map[string]ice.DataFile, error) {
	out := map[string]ice.DataFile{}
	cur := tbl.CurrentSnapshot()
	if cur == nil {
		return out, nil
	}
	fs, err := tbl.FS(context.Background())
	if err != nil {
		return nil, err
	}
	ms, err := cur.Manifests(fs)
	if err != nil {
		return nil, fmt.Errorf("iceberg: manifests of %s: %w", tbl.Identifier(), err)
	}
	for _, m := range ms {
		if m.ManifestContent() != ice.ManifestContentData {
			continue
		}
		es, err := m.FetchEntries(fs, true)
		if err != nil {
			return nil, fmt.Errorf("iceberg: manifest %s: %w", m.FilePath(), err)
		}
		for _, e := range es {
			if e.Status() != ice.EntryStatusDELETED {
				out[e.DataFile().FilePath()] = e.DataFile()
			}
		}
	}
	return out, nil
}

// DataFiles returns the data files of a table, relative to its location
// (Location(root)): live, those of its current snapshot; with history, all
// too: those any snapshot in its metadata references (what a reader of an
// older snapshot may still read; nil without history). A missing table is
// an error wrapping catalog.ErrNoSuchTable.
func (c *Catalog) DataFiles(ctx context.Context, ident []string, root string, history bool) (live, all map[string]bool, err error) {
	tbl, err := c.cat.LoadTable(ctx, table.Identifier(ident))
	if err != nil {
		return nil, nil, fmt.Errorf("iceberg: load %v: %w", ident, err)
	}
	prefix := c.Location(root) + "/"
	rel := func(p string) (string, bool) { return strings.CutPrefix(p, prefix) }
	cur, err := liveDataFiles(tbl)
	if err != nil {
		return nil, nil, err
	}
	live, all = map[string]bool{}, map[string]bool{}
	for p := range cur {
		if r, ok := rel(p); ok {
			live[r] = true
			all[r] = true
		}
	}
	if !history {
		return live, nil, nil
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, nil, err
	}
	seen := map[string]bool{}
	for _, s := range tbl.Metadata().Snapshots() {
		ms, err := s.Manifests(fs)
		if err != nil {
			return nil, nil, fmt.Errorf("iceberg: manifests of snapshot %d: %w", s.SnapshotID, err)
		}
		for _, m := range ms {
			if seen[m.FilePath()] || m.ManifestContent() != ice.ManifestContentData {
				continue
			}
			seen[m.FilePath()] = true
			es, err := m.FetchEntries(fs, true) // a DELETED entry is no file of that snapshot
			if err != nil {
				return nil, nil, fmt.Errorf("iceberg: manifest %s: %w", m.FilePath(), err)
			}
			for _, e := range es {
				if r, ok := rel(e.DataFile().FilePath()); ok {
					all[r] = true
				}
			}
		}
	}
	return live, all, nil
}

// LiveFile is a data file of a table's current snapshot.
type LiveFile struct {
	// Path is relative to the table's location (Location(root)).
	Path string
	// LowerBounds and UpperBounds are the file's bounds by field id, in
	// Iceberg's single-value binary form (a long or a timestamp: 8 bytes
	// little-endian; an int: 4).
	LowerBounds, UpperBounds map[int][]byte
	// Size is the file's size in bytes (file_size_in_bytes).
	Size int64
	// Records is the file's row count (record_count).
	Records int64
}

// LiveFiles returns the data files of the table's current snapshot that
// lie under Location(root), in no particular order. A missing table is an
// error wrapping catalog.ErrNoSuchTable.
func (c *Catalog) LiveFiles(ctx context.Context, ident []string, root string) ([]LiveFile, error) {
	tbl, err := c.cat.LoadTable(ctx, table.Identifier(ident))
	if err != nil {
		return nil, fmt.Errorf("iceberg: load %v: %w", ident, err)
	}
	cur, err := liveDataFiles(tbl)
	if err != nil {
		return nil, err
	}
	prefix := c.Location(root) + "/"
	out := make([]LiveFile, 0, len(cur))
	for p, df := range cur {
		if r, ok := strings.CutPrefix(p, prefix); ok {
			out = append(out, LiveFile{Path: r, LowerBounds: df.LowerBoundValues(), UpperBounds: df.UpperBoundValues(),
				Size: df.FileSizeBytes(), Records: df.Count()})
		}
	}
	return out, nil
}

// RemoveFiles drops data files from the table (table retention,
// docs/compaction.md): one overwrite snapshot that deletes the files of
// paths (relative to Location(root)) still live in the current snapshot
// and adds none, with the snapshot summary property lakegate.retention =
// reason. Files not live any more are skipped, so a repeated call is a
// no-op: removed reports how many this call dropped (0: nothing
// committed). The files themselves stay in storage (older snapshots
// reference them until they expire). A missing table is an error wrapping
// catalog.ErrNoSuchTable. Lost compare-and-swaps are retried as in Commit.
func (c *Catalog) RemoveFiles(ctx context.Context, ident []string, root string, paths []string, reason string) (removed int, err error) {
	if err := validIdent(ident); err != nil {
		return 0, err
	}
	loc := c.Location(root)
	for _, f := range paths {
		if f == "" || strings.HasPrefix(f, "/") || strings.Contains(f, "..") {
			return 0, fmt.Errorf("%w: file path %q", ErrInvalid, f)
		}
	}
	id := table.Identifier(ident)
	var lastErr error
	for attempt := range commitAttemptsMax {
		if attempt > 0 {
			if err := backoff(ctx, attempt); err != nil {
				return 0, errors.Join(err, lastErr)
			}
		}
		tbl, err := c.cat.LoadTable(ctx, id)
		if err != nil {
			lastErr = fmt.Errorf("iceberg: load %s: %w", id, err)
			if errors.Is(err, catalog.ErrNoSuchTable) || errors.Is(err, catalog.ErrNoSuchNamespace) {
				return 0, lastErr
			}
			continue
		}
		if got := strings.TrimSuffix(tbl.Location(), "/"); got != loc {
			return 0, fmt.Errorf("%w: %s is at %s, not %s", ErrTableMismatch, id, got, loc)
		}
		live, err := liveDataFiles(tbl)
		if err != nil {
			lastErr = err
			continue
		}
		var dels []ice.DataFile
		for _, f := range paths {
			if df, ok := live[loc+"/"+f]; ok {
				dels = append(dels, df)
			}
		}
		if len(dels) == 0 {
			return 0, nil
		}
		txn := tbl.NewTransaction()
		if err := txn.ReplaceDataFilesWithDataFiles(ctx, dels, nil, ice.Properties{"lakegate.retention": reason}); err != nil {
			return 0, fmt.Errorf("iceberg: remove files from %s: %w", id, err)
		}
		if _, err := txn.Commit(ctx); err != nil {
			lastErr = err // lost race or unknown outcome: the reload sees
			continue
		}
		return len(dels), nil
	}
	return 0, fmt.Errorf("%w: remove files from %s after %d attempts: %w", ErrConflict, id, commitAttemptsMax, lastErr)
}
