package engine

import (
	"sync/atomic"
	"time"
)

// Metrics are the engine's counters. Read them with Engine.Metrics; the
// gateway exports them to Prometheus.
type Metrics struct {
	Appends          int64 // entries acknowledged
	AppendBytes      int64 // payload bytes acknowledged
	ObjectPuts       int64 // WAL objects written
	ObjectPutBytes   int64
	ObjectPutNanos   int64 // total PUT latency
	ObjectGets       int64 // chunk GETs (cache misses)
	ObjectGetBytes   int64
	CacheHits        int64
	Txns             int64 // commit transactions sent
	TxnConflicts     int64 // commit transactions whose compare failed
	TxnErrors        int64 // commit transactions that failed or whose outcome was unknown
	TxnNanos         int64
	CursorPersists   int64
	GCDeletedObjects int64
}

type metrics struct {
	appends, appendBytes          atomic.Int64
	puts, putBytes, putNanos      atomic.Int64
	gets, getBytes, cacheHits     atomic.Int64
	txns, txnConflicts, txnErrors atomic.Int64
	txnNanos                      atomic.Int64
	cursorPersists, gcDeleted     atomic.Int64
}

func (m *metrics) observePut(n int, d time.Duration) {
	m.puts.Add(1)
	m.putBytes.Add(int64(n))
	m.putNanos.Add(int64(d))
}

func (m *metrics) observeTxn(d time.Duration, ok bool, err error) {
	m.txns.Add(1)
	m.txnNanos.Add(int64(d))
	switch {
	case err != nil:
		m.txnErrors.Add(1)
	case !ok:
		m.txnConflicts.Add(1)
	}
}

func (m *metrics) observeAppends(n int, bytes int64) {
	m.appends.Add(int64(n))
	m.appendBytes.Add(bytes)
}

func (m *metrics) snapshot() Metrics {
	return Metrics{
		Appends: m.appends.Load(), AppendBytes: m.appendBytes.Load(),
		ObjectPuts: m.puts.Load(), ObjectPutBytes: m.putBytes.Load(), ObjectPutNanos: m.putNanos.Load(),
		ObjectGets: m.gets.Load(), ObjectGetBytes: m.getBytes.Load(), CacheHits: m.cacheHits.Load(),
		Txns: m.txns.Load(), TxnConflicts: m.txnConflicts.Load(), TxnErrors: m.txnErrors.Load(), TxnNanos: m.txnNanos.Load(),
		CursorPersists: m.cursorPersists.Load(), GCDeletedObjects: m.gcDeleted.Load(),
	}
}
