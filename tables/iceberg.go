package tables

// The Iceberg side of Materialize: step 3b of docs/compaction.md, format
// in docs/iceberg.md.

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"

	"github.com/lakegate/lakegate/lakehouse"
	"github.com/lakegate/lakegate/lakehouse/iceberg"
	"github.com/lakegate/lakegate/lakestream"
)

// icebergState is the layer's Iceberg catalog, opened on the first
// Iceberg commit and closed by Tables.Close.
type icebergState struct {
	mu struct {
		sync.Mutex
		cat    *iceberg.Catalog
		closed bool
	}
}

// icebergCatalog returns the catalog Options.IcebergCatalog names, opening
// it on first use.
func (t *Tables) icebergCatalog(ctx context.Context) (*iceberg.Catalog, error) {
	t.iceberg.mu.Lock()
	defer t.iceberg.mu.Unlock()
	if t.iceberg.mu.cat != nil {
		return t.iceberg.mu.cat, nil
	}
	if t.iceberg.mu.closed {
		return nil, lakestream.ErrClosed
	}
	cfg := t.opts.IcebergCatalog
	if cfg.StoreURL == "" {
		return nil, fmt.Errorf("%w: Iceberg commits need Options.IcebergCatalog.StoreURL (node.Start sets it)", lakestream.ErrInvalidArgument)
	}
	cat, err := iceberg.Open(ctx, cfg)
	if err != nil {
		if errors.Is(err, iceberg.ErrInvalid) || errors.Is(err, iceberg.ErrUnsupportedStore) {
			return nil, fmt.Errorf("%w: %w", lakestream.ErrInvalidArgument, err)
		}
		return nil, fmt.Errorf("%w: %w", lakestream.ErrUnavailable, err)
	}
	t.iceberg.mu.cat = cat
	return cat, nil
}

func (t *Tables) closeIceberg() error {
	t.iceberg.mu.Lock()
	defer t.iceberg.mu.Unlock()
	t.iceberg.mu.closed = true
	if t.iceberg.mu.cat == nil {
		return nil
	}
	err := t.iceberg.mu.cat.Close()
	t.iceberg.mu.cat = nil
	return err
}

// commitIceberg adds the claim's files to its Iceberg table with the
// property lakegate.log.<id>.end = c.End in one catalog commit; a table
// already at or past c.End for the log is left alone (a resumed claim).
func (t *Tables) commitIceberg(ctx context.Context, id lakestream.LogID, c tableClaim, typed *lakehouse.TypedSchema) (err error) {
	// A panic inside the Iceberg library or the object-store drivers under
	// it (gocloud's azureblob writer dereferences nil when an upload fails)
	// fails this commit, not the node: the claim resumes later.
	defer func() {
		if r := recover(); r != nil {
			t.opts.Logger.Error("tables: Iceberg commit panicked", "log", id, "table", c.Root, "panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("%w: log %d: Iceberg commit to %s failed: panic: %v", lakestream.ErrUnavailable, id, c.Root, r)
		}
	}()
	cat, err := t.icebergCatalog(ctx)
	if err != nil {
		return err
	}
	files := make([]string, len(c.Files))
	for i, f := range c.Files {
		files[i] = f.Path
	}
	_, err = cat.Commit(ctx, iceberg.CommitRequest{Ident: c.Ident, Root: c.Root, LogID: int64(id), End: c.End, Files: files, Typed: typed})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, iceberg.ErrConflict):
		return fmt.Errorf("%w: log %d: %w", lakestream.ErrConflict, id, err)
	case errors.Is(err, iceberg.ErrInvalid) || errors.Is(err, iceberg.ErrTableMismatch):
		return fmt.Errorf("tables: log %d: %w", id, err)
	}
	return fmt.Errorf("%w: log %d: %w", lakestream.ErrUnavailable, id, err)
}

// IcebergCatalog returns the layer's Iceberg catalog
// (Options.IcebergCatalog), opening it on first use: what a node serves
// over the Iceberg REST API.
func (t *Tables) IcebergCatalog(ctx context.Context) (*iceberg.Catalog, error) {
	return t.icebergCatalog(ctx)
}
