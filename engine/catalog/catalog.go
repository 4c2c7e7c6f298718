package catalog

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
)

// Options configure a Catalog. The zero value is usable.
type Options struct {
	// Root is the key prefix of every key the catalog writes; the catalog
	// owns Root+"catalog/". A missing trailing "/" is added.
	// Default "/lakegate/".
	Root string
	// TableProvider returns the table view of a stream for Stream.Table().
	// Default nil: every Scan returns lakestream.ErrNotMaterialized.
	TableProvider func(lakestream.StreamMetadata) lakestream.Table
	// TxnAttemptsMax bounds how often one operation re-reads and retries
	// after losing a compare-and-swap race before it returns
	// lakestream.ErrConflict. Default 64 (count).
	TxnAttemptsMax int
	// Now is the clock used for creation and drop times. Default time.Now.
	Now func() time.Time
}

const (
	defaultRoot           = "/lakegate/"
	defaultTxnAttemptsMax = 64
)

// Catalog implements lakestream.StreamCatalog on a meta.Store. Safe for
// concurrent use; it holds no mutable state besides the closed flag, so any
// number of Catalogs (in any number of processes) may share one store.
type Catalog struct {
	store  meta.Store
	logs   lakestream.LogStorage
	opts   Options
	keys   keys
	closed atomic.Bool
	// decoded holds stream records already decoded, for the read-only
	// loads (LoadStream, openStream): the record is still read from the
	// store each time, its JSON decoded only when its ModRevision changed.
	decoded recordCache
}

var _ lakestream.StreamCatalog = (*Catalog)(nil)

// New returns a catalog over store whose streams' logs live in logs. The
// catalog does not own store or logs: Close closes neither.
func New(store meta.Store, logs lakestream.LogStorage, opts Options) *Catalog {
	if opts.Root == "" {
		opts.Root = defaultRoot
	}
	if opts.TxnAttemptsMax <= 0 {
		opts.TxnAttemptsMax = defaultTxnAttemptsMax
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Catalog{store: store, logs: logs, opts: opts, keys: newKeys(opts.Root)}
}

// Storage returns the level-1 view of the catalog's logs.
func (c *Catalog) Storage() lakestream.LogStorage { return c.logs }

// Close makes every later call fail with lakestream.ErrClosed. It does not
// close the store or the log storage. Idempotent.
func (c *Catalog) Close() error {
	c.closed.Store(true)
	return nil
}

func (c *Catalog) check() error {
	if c.closed.Load() {
		return fmt.Errorf("%w: catalog", lakestream.ErrClosed)
	}
	return nil
}

func (c *Catalog) nowMs() int64 { return c.opts.Now().UnixMilli() }

// StreamDeletedError is returned for a stream whose name is tombstoned (it
// was dropped and cannot come back). It matches both
// lakestream.ErrStreamDeleted and lakestream.ErrNoSuchStream with errors.Is.
type StreamDeletedError struct {
	ID lakestream.StreamIdentifier
	// DroppedAtMs is when the stream was dropped (Unix ms).
	DroppedAtMs int64
}

func (e *StreamDeletedError) Error() string {
	return fmt.Sprintf("catalog: stream %s was permanently deleted at %s: %v",
		e.ID, time.UnixMilli(e.DroppedAtMs).UTC().Format(time.RFC3339), lakestream.ErrNoSuchStream)
}

// Unwrap returns lakestream.ErrStreamDeleted and lakestream.ErrNoSuchStream.
func (e *StreamDeletedError) Unwrap() []error {
	return []error{lakestream.ErrStreamDeleted, lakestream.ErrNoSuchStream}
}

// storeErr maps a meta.Store error to the lakestream error space.
func storeErr(op string, err error) error {
	switch {
	case errors.Is(err, meta.ErrUnavailable):
		return fmt.Errorf("%w: catalog %s: %w", lakestream.ErrUnavailable, op, err)
	case errors.Is(err, meta.ErrClosed):
		return fmt.Errorf("%w: catalog %s: %w", lakestream.ErrClosed, op, err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	return fmt.Errorf("catalog %s: %w", op, err)
}

func (c *Catalog) get(ctx context.Context, op, key string) (meta.KV, bool, error) {
	kv, found, err := c.store.Get(ctx, key)
	if err != nil {
		return meta.KV{}, false, storeErr(op, err)
	}
	return kv, found, nil
}

// plan is one transaction: compares on what was read, writes to make.
type plan struct {
	cmps []meta.Cmp
	ops  []meta.Op
}

// commit runs decide and commits its plan, re-running decide whenever a
// compare fails (someone changed what it read), at most TxnAttemptsMax
// times. decide returns a nil plan to finish without writing.
func (c *Catalog) commit(ctx context.Context, op string, decide func() (*plan, error)) error {
	if err := c.check(); err != nil {
		return err
	}
	for range c.opts.TxnAttemptsMax {
		p, err := decide()
		if err != nil || p == nil {
			return err
		}
		ok, _, err := c.store.Txn(ctx, p.cmps, p.ops)
		if err != nil {
			return storeErr(op, err)
		}
		if ok {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return fmt.Errorf("%w: catalog %s: lost %d compare-and-swap races in a row",
		lakestream.ErrConflict, op, c.opts.TxnAttemptsMax)
}

// rangePageKeys bounds how many keys one Range call returns (count); listings
// page through larger prefixes.
const rangePageKeys = 1000

// rangePrefix returns every key beginning with prefix, in key order, reading
// rangePageKeys at a time.
func (c *Catalog) rangePrefix(ctx context.Context, op, prefix string) ([]meta.KV, error) {
	var out []meta.KV
	start, end := prefix, prefixEnd(prefix)
	for {
		kvs, err := c.store.Range(ctx, start, end, rangePageKeys)
		if err != nil {
			return nil, storeErr(op, err)
		}
		out = append(out, kvs...)
		if len(kvs) < rangePageKeys {
			return out, nil
		}
		start = kvs[len(kvs)-1].Key + "\x00"
	}
}
