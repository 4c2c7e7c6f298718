package catalog

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
)

// storeFactory makes a fresh, empty metadata store for one test.
type storeFactory func(t *testing.T) meta.Store

// memStore is the unit-test backend: meta.Mem.
func memStore(t *testing.T) meta.Store {
	t.Helper()
	s := meta.NewMem(meta.MemOptions{})
	t.Cleanup(func() { s.Close() })
	return s
}

// hookStore runs beforeTxn (once) just before the first Txn it forwards,
// to interleave another operation deterministically between an operation's
// reads and its commit.
type hookStore struct {
	meta.Store
	once      sync.Once
	beforeTxn func()
}

func (h *hookStore) Txn(ctx context.Context, cmps []meta.Cmp, ops []meta.Op) (bool, int64, error) {
	h.once.Do(func() {
		if h.beforeTxn != nil {
			h.beforeTxn()
		}
	})
	return h.Store.Txn(ctx, cmps, ops)
}

// racingStore runs before ahead of every Txn it forwards.
type racingStore struct {
	meta.Store
	before func()
}

func (r *racingStore) Txn(ctx context.Context, cmps []meta.Cmp, ops []meta.Op) (bool, int64, error) {
	r.before()
	return r.Store.Txn(ctx, cmps, ops)
}

// fakeLogs is an in-memory lakestream.LogStorage: one append-only slice of
// entries per log. Only what the catalog uses is implemented.
type fakeLogs struct {
	lakestream.LogStorage // nil: unimplemented methods panic
	mu                    struct {
		sync.Mutex
		logs    map[lakestream.LogID][]lakestream.Entry
		deleted map[lakestream.LogID]bool
	}
}

func newFakeLogs() *fakeLogs {
	f := &fakeLogs{}
	f.mu.logs = map[lakestream.LogID][]lakestream.Entry{}
	f.mu.deleted = map[lakestream.LogID]bool{}
	return f
}

func (f *fakeLogs) Log(_ context.Context, id lakestream.LogID) (lakestream.Log, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mu.deleted[id] {
		return nil, lakestream.ErrNoSuchLog
	}
	return fakeLog{id: id}, nil
}

func (f *fakeLogs) Append(_ context.Context, id lakestream.LogID, records int, payload []byte, opts ...lakestream.AppendOption) (lakestream.EntryHeader, error) {
	if records < 1 {
		return lakestream.EntryHeader{}, lakestream.ErrInvalidArgument
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mu.deleted[id] {
		return lakestream.EntryHeader{}, lakestream.ErrNoSuchLog
	}
	es := f.mu.logs[id]
	var off, cum int64
	if len(es) > 0 {
		off, cum = es[len(es)-1].End(), es[len(es)-1].CumulativeSize
	}
	o := lakestream.ApplyAppendOptions(opts)
	h := lakestream.EntryHeader{
		Offset: off, Records: int32(records), PublishTimeMs: o.PublishTimeMs,
		WriteTimeMs: time.Now().UnixMilli(), Size: int32(len(payload)), CumulativeSize: cum + int64(len(payload)),
	}
	f.mu.logs[id] = append(es, lakestream.Entry{EntryHeader: h, Payload: slices.Clone(payload)})
	return h, nil
}

func (f *fakeLogs) ReadEntries(_ context.Context, id lakestream.LogID, start int64, maxRecords int, maxBytes int64) ([]lakestream.Entry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mu.deleted[id] {
		return nil, lakestream.ErrNoSuchLog
	}
	var out []lakestream.Entry
	var recs, bytes int64
	for _, e := range f.mu.logs[id] {
		if e.End() <= start {
			continue
		}
		if len(out) > 0 && (recs+int64(e.Records) > int64(maxRecords) || bytes+int64(e.Size) > maxBytes) {
			break
		}
		recs += int64(e.Records)
		bytes += int64(e.Size)
		out = append(out, lakestream.Entry{EntryHeader: e.EntryHeader, Payload: slices.Clone(e.Payload)})
	}
	return out, nil
}

func (f *fakeLogs) DeleteLog(_ context.Context, id lakestream.LogID) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mu.deleted[id] {
		return lakestream.ErrNoSuchLog
	}
	f.mu.deleted[id] = true
	delete(f.mu.logs, id)
	return nil
}

func (f *fakeLogs) isDeleted(id lakestream.LogID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.deleted[id]
}

// fakeLog is the Log handle of fakeLogs: only ID is implemented.
type fakeLog struct {
	lakestream.Log
	id lakestream.LogID
}

func (l fakeLog) ID() lakestream.LogID { return l.id }
