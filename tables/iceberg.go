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

// commitIceberg adds the claims' files to their Iceberg table with the
// property lakegate.log.<id>.end = End of each claim's log in one catalog
// commit; a table already at or past them is left alone (a resumed claim).
func (t *Tables) commitIceberg(ctx context.Context, parts []claimPart, typed *lakehouse.TypedSchema) (err error) {
	id, c := parts[0].id, parts[0].c
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
	var files []string
	req := iceberg.CommitRequest{Ident: c.Ident, Root: c.Root, LogID: int64(id), End: c.End, Typed: typed}
	for i, p := range parts {
		for _, f := range p.c.Files {
			files = append(files, f.Path)
		}
		if i > 0 {
			req.More = append(req.More, iceberg.LogEnd{LogID: int64(p.id), End: p.c.End})
		}
	}
	req.Files = files
	_, err = cat.Commit(ctx, req)
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
