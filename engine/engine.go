package engine

import (
	"context"
	"fmt"
	"sync"

	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
	"github.com/lakegate/lakegate/objstore"
)

// Engine is one node's storage engine: it implements lakestream.LogStorage
// over an object store (data) and a metadata store (order). Any number of
// Engines, in any number of processes, may serve the same logs at once.
//
// Lock order: Engine.mu before logHandle.mu.
type Engine struct {
	opts  Options
	store objstore.Store
	// appender is the store's objstore.Appender (file:// only), or nil.
	appender objstore.Appender
	meta     meta.Store
	keys     keys
	cache    *chunkCache
	loads    chan struct{} // load slots: Options.MaxConcurrentLoads
	clog     *commitLog
	writer   *walWriter
	metrics  metrics

	ctx    context.Context // canceled by Close; parent of background work
	cancel context.CancelFunc
	bg     sync.WaitGroup

	mu struct {
		sync.Mutex
		closed  bool
		logs    map[lakestream.LogID]*logHandle
		cursors map[*durableCursor]struct{} // open durable cursors
	}
}

var _ lakestream.LogStorage = (*Engine)(nil)

// New starts an engine on the given stores. The caller keeps ownership of
// the stores and closes them after Engine.Close.
func New(store objstore.Store, ms meta.Store, opts Options) (*Engine, error) {
	opts = opts.withDefaults()
	if ms.MaxTxnOps() < 2 {
		return nil, fmt.Errorf("engine: metadata store allows %d ops per transaction; need at least 2", ms.MaxTxnOps())
	}
	e := &Engine{
		opts:  opts,
		store: store,
		meta:  ms,
		keys:  keys{root: opts.MetaRoot},
		cache: newChunkCache(opts.CacheBytes),
		loads: make(chan struct{}, opts.MaxConcurrentLoads),
	}
	e.metrics.init()
	e.appender = objstore.AppenderOf(store)
	e.store = measuredStore{Store: store, m: &e.metrics}
	e.meta = measuredMeta{Store: ms, m: &e.metrics}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	e.mu.logs = map[lakestream.LogID]*logHandle{}
	e.mu.cursors = map[*durableCursor]struct{}{}
	e.clog = newCommitLog(e)
	ctx, cancel := context.WithTimeout(e.ctx, opts.CommitTimeout)
	defer cancel()
	if err := e.clog.start(ctx); err != nil {
		e.cancel()
		return nil, err
	}
	e.writer = newWALWriter(e)
	e.bg.Add(1)
	go e.persistLoop()
	return e, nil
}

// NodeID is the id this engine writes under.
func (e *Engine) NodeID() string { return e.opts.NodeID }

// Metrics returns a snapshot of the engine's counters.
func (e *Engine) Metrics() Metrics {
	return e.metrics.snapshot()
}

// LogRevision returns a metadata revision that grows whenever log id may
// have new committed chunks or control operations: the revision of the
// newest commit record naming it that this engine applied, or of the
// commit log's last resync if that is later. It never decreases; equal
// answers at two times mean no record for the log was applied in between
// (a resync also changes it). Materialization skips a log
// that the table held whole at an unchanged revision (package tables).
func (e *Engine) LogRevision(id lakestream.LogID) int64 { return e.clog.logRevision(id) }

// CacheBytes is the number of bytes held by the chunk cache.
func (e *Engine) CacheBytes() int64 { return e.cache.usedBytes() }

// Close flushes pending appends (they are answered), persists open durable
// cursors and stops background work. Handles fail with ErrClosed afterwards.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.mu.closed {
		e.mu.Unlock()
		return nil
	}
	e.mu.closed = true
	cursors := make([]*durableCursor, 0, len(e.mu.cursors))
	for c := range e.mu.cursors {
		cursors = append(cursors, c)
	}
	e.mu.Unlock()
	e.writer.close()
	ctx, cancel := context.WithTimeout(context.Background(), e.opts.CommitTimeout)
	defer cancel()
	var firstErr error
	for _, c := range cursors {
		if err := c.persist(ctx); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	e.cancel()
	e.bg.Wait()
	return firstErr
}

func (e *Engine) closed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.mu.closed
}

// Log returns the handle of log id, creating the log's head on first use.
// It reads the head (linearizably), so a log deleted by any node is
// reported as ErrNoSuchLog.
func (e *Engine) Log(ctx context.Context, id lakestream.LogID) (lakestream.Log, error) {
	l, err := e.log(ctx, id)
	if err != nil {
		return nil, err
	}
	if _, err := l.refresh(ctx); err != nil {
		return nil, err
	}
	return l, nil
}

func (e *Engine) log(ctx context.Context, id lakestream.LogID) (*logHandle, error) {
	if id < 0 {
		return nil, fmt.Errorf("%w: log id %d", lakestream.ErrInvalidArgument, id)
	}
	e.mu.Lock()
	if e.mu.closed {
		e.mu.Unlock()
		return nil, lakestream.ErrClosed
	}
	if l, ok := e.mu.logs[id]; ok {
		e.mu.Unlock()
		return l, l.ensure(ctx)
	}
	l := newLogHandle(e, id)
	e.mu.logs[id] = l
	e.mu.Unlock()
	return l, l.ensure(ctx)
}

// openLog returns the handle of log id if this engine has one (loaded or
// loading), else nil.
func (e *Engine) openLog(id lakestream.LogID) *logHandle {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.mu.logs[id]
}

// Append implements lakestream.LogStorage.
func (e *Engine) Append(ctx context.Context, id lakestream.LogID, records int, payload []byte, opts ...lakestream.AppendOption) (lakestream.EntryHeader, error) {
	l, err := e.log(ctx, id)
	if err != nil {
		return lakestream.EntryHeader{}, err
	}
	return l.Append(ctx, records, payload, opts...)
}

// ReadEntries implements lakestream.LogStorage.
func (e *Engine) ReadEntries(ctx context.Context, id lakestream.LogID, start int64, maxRecords int, maxBytes int64) ([]lakestream.Entry, error) {
	l, err := e.log(ctx, id)
	if err != nil {
		return nil, err
	}
	return l.ReadEntries(ctx, start, maxRecords, maxBytes)
}

// FirstOffset implements lakestream.LogStorage.
func (e *Engine) FirstOffset(ctx context.Context, id lakestream.LogID) (int64, error) {
	l, err := e.log(ctx, id)
	if err != nil {
		return 0, err
	}
	return l.FirstOffset(ctx)
}

// LastOffset implements lakestream.LogStorage.
func (e *Engine) LastOffset(ctx context.Context, id lakestream.LogID) (int64, error) {
	l, err := e.log(ctx, id)
	if err != nil {
		return 0, err
	}
	return l.LastOffset(ctx)
}

// IndexRange implements lakestream.LogStorage.
func (e *Engine) IndexRange(ctx context.Context, id lakestream.LogID, start, endExcl int64) ([]lakestream.EntryHeader, error) {
	l, err := e.log(ctx, id)
	if err != nil {
		return nil, err
	}
	return l.IndexRange(ctx, start, endExcl)
}

// SoftTrim implements lakestream.LogStorage.
func (e *Engine) SoftTrim(ctx context.Context, id lakestream.LogID, inclusive int64) (int64, error) {
	l, err := e.log(ctx, id)
	if err != nil {
		return 0, err
	}
	return l.SoftTrim(ctx, inclusive)
}

// HardTrim implements lakestream.LogStorage.
func (e *Engine) HardTrim(ctx context.Context, id lakestream.LogID, exclusive int64) error {
	l, err := e.log(ctx, id)
	if err != nil {
		return err
	}
	return l.hardTrim(ctx, exclusive)
}

// DeleteLog implements lakestream.LogStorage.
func (e *Engine) DeleteLog(ctx context.Context, id lakestream.LogID) error {
	l, err := e.log(ctx, id)
	if err != nil {
		return err
	}
	return l.delete(ctx)
}

// Prefetch implements lakestream.LogStorage: it loads the chunks of
// [start, endExcl) into the cache.
func (e *Engine) Prefetch(ctx context.Context, id lakestream.LogID, start, endExcl int64) error {
	l, err := e.log(ctx, id)
	if err != nil {
		return err
	}
	return l.prefetch(ctx, start, endExcl)
}
