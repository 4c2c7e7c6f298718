package delta

// Log cleanup (docs/delta.md, "Log cleanup"): what Delta calls the expiry
// of log files, which Spark runs after a checkpoint with
// delta.logRetentionDuration.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lakegate/lakegate/objstore"
)

// CleanStats is what CleanLog removed.
type CleanStats struct {
	Commits     int   // JSON commits deleted
	Checkpoints int   // checkpoint files deleted
	Kept        int64 // the newest checkpoint's version: everything from it on is kept
}

// CleanLog deletes the log files a reader no longer needs: every JSON
// commit and checkpoint with a version below the newest checkpoint, once
// older than retention (by the store's modification time; files whose
// time the store does not report are kept). The newest checkpoint and
// every later commit stay, so the table reads the same, and time travel
// reaches back to the oldest kept version. Deletions go oldest first, so a
// crash leaves a contiguous log; running it again finishes. Data files are
// never touched: they are shared with the Iceberg table and the log's
// index (docs/gc.md).
func (t *Table) CleanLog(ctx context.Context, retention time.Duration) (CleanStats, error) {
	var st CleanStats
	type file struct {
		key     string
		v       int64
		kind    string
		modTime int64
	}
	var files []file
	dir := t.keys.dir()
	newestCP := int64(-1)
	err := t.store.List(ctx, dir, func(oi objstore.ObjectInfo) error {
		v, kind, ok := parseLogName(strings.TrimPrefix(oi.Key, dir))
		if !ok {
			return nil
		}
		files = append(files, file{oi.Key, v, kind, oi.ModTime})
		if kind == "checkpoint" {
			newestCP = max(newestCP, v)
		}
		return nil
	})
	if err != nil {
		return st, fmt.Errorf("delta: list %s: %w", dir, err)
	}
	st.Kept = newestCP
	if newestCP < 0 {
		return st, nil
	}
	slices.SortFunc(files, func(a, b file) int {
		if a.v != b.v {
			return int(min(max(a.v-b.v, -1), 1))
		}
		return strings.Compare(a.kind, b.kind)
	})
	cutoff := t.now().Add(-retention).UnixMilli()
	for _, f := range files {
		if f.v >= newestCP {
			break
		}
		if f.modTime == 0 || f.modTime > cutoff {
			// Not yet expired: neither is anything after it (versions
			// grow with time), and the log must stay contiguous.
			break
		}
		if err := t.store.Delete(ctx, f.key); err != nil && !errors.Is(err, objstore.ErrNotFound) {
			return st, fmt.Errorf("delta: delete %s: %w", f.key, err)
		}
		if f.kind == "json" {
			st.Commits++
		} else {
			st.Checkpoints++
		}
	}
	return st, nil
}
