package engine

// The Iceberg side of CompactToTable: step 3b of docs/compaction.md, format
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

// icebergState is the engine's Iceberg catalog, opened on the first
// Iceberg commit and closed by Engine.Close.
type icebergState struct {
	mu struct {
		sync.Mutex
		cat *iceberg.Catalog
	}
}

// icebergCatalog returns the catalog Options.IcebergCatalog names, opening
// it on first use.
func (e *Engine) icebergCatalog(ctx context.Context) (*iceberg.Catalog, error) {
	e.iceberg.mu.Lock()
	defer e.iceberg.mu.Unlock()
	if e.iceberg.mu.cat != nil {
		return e.iceberg.mu.cat, nil
	}
	if e.closed() {
		return nil, lakestream.ErrClosed
	}
	cfg := e.opts.IcebergCatalog
	if cfg.StoreURL == "" {
		return nil, fmt.Errorf("%w: Iceberg commits need Options.IcebergCatalog.StoreURL (engine.StartNode sets it)", lakestream.ErrInvalidArgument)
	}
	cat, err := iceberg.Open(ctx, cfg)
	if err != nil {
		if errors.Is(err, iceberg.ErrInvalid) || errors.Is(err, iceberg.ErrUnsupportedStore) {
			return nil, fmt.Errorf("%w: %w", lakestream.ErrInvalidArgument, err)
		}
		return nil, fmt.Errorf("%w: %w", lakestream.ErrUnavailable, err)
	}
	e.iceberg.mu.cat = cat
	return cat, nil
}

func (e *Engine) closeIceberg() error {
	e.iceberg.mu.Lock()
	defer e.iceberg.mu.Unlock()
	if e.iceberg.mu.cat == nil {
		return nil
	}
	err := e.iceberg.mu.cat.Close()
	e.iceberg.mu.cat = nil
	return err
}

// commitIceberg adds the claim's files to its Iceberg table with the
// property lakegate.log.<id>.end = c.End in one catalog commit; a table
// already at or past c.End for the log is left alone (a resumed claim).
func (e *Engine) commitIceberg(ctx context.Context, id lakestream.LogID, c tableClaim, typed *lakehouse.TypedSchema) (err error) {
	// A panic inside the Iceberg library or the object-store drivers under
	// it (gocloud's azureblob writer dereferences nil when an upload fails)
	// fails this commit, not the node: the claim resumes later.
	defer func() {
		if r := recover(); r != nil {
			e.opts.Logger.Error("engine: Iceberg commit panicked", "log", id, "table", c.Root, "panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("%w: log %d: Iceberg commit to %s failed: panic: %v", lakestream.ErrUnavailable, id, c.Root, r)
		}
	}()
	cat, err := e.icebergCatalog(ctx)
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
		return fmt.Errorf("engine: log %d: %w", id, err)
	}
	return fmt.Errorf("%w: log %d: %w", lakestream.ErrUnavailable, id, err)
}
