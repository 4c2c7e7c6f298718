package engine

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
	"github.com/lakegate/lakegate/objstore"
)

// Metrics are the engine's counters. Read them with Engine.Metrics; the
// Prometheus families (docs/metrics.md) come from Engine.Collector.
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
	ApplyWaits       int64 // commit records of this engine applied by its watch
	ApplyWaitNanos   int64 // total time from their transaction's reply to their application
	OwnApplies       int64 // commit records of this engine applied on their transaction's reply (no record between them and the previous one)
	OwnWatchFirst    int64 // commit records of this engine its transaction's reply could have applied, but its watch had already
	Folds            int64 // folds of the commit log into heads and index keys
	ChainRefusals    int64 // appends failed unsent because their WAL chunk held appends of a broken chain (lakestream.AppendChain)
	FoldTxns         int64 // transactions of those folds
	CursorPersists   int64
	GCDeletedObjects int64
	SegmentFallbacks int64 // flushes that became their own object because a WAL segment could not be made or appended to (file:// only)
	CompactionRuns   int64 // table compactions (tables.Materialize) that compacted a range
	CompactedRecords int64
	CompactedBytes   int64 // table file bytes written by compaction
}

// compactionLagLogsMax bounds the logs whose compaction lag is tracked;
// logs beyond it are not counted in lakegate_compaction_lag_records.
const compactionLagLogsMax = 10000

// Bucket layouts (seconds and bytes), shared by the engine's histograms.
var (
	latencyBuckets = prometheus.ExponentialBuckets(0.0005, 2, 16) // 0.5 ms .. 16 s
	sizeBuckets    = prometheus.ExponentialBuckets(1024, 4, 9)    // 1 KiB .. 64 MiB
)

type metrics struct {
	appends, appendBytes          atomic.Int64
	puts, putBytes, putNanos      atomic.Int64
	gets, getBytes, cacheHits     atomic.Int64
	txns, txnConflicts, txnErrors atomic.Int64
	folds, foldTxns               atomic.Int64
	applyWaits, applyWaitNanos    atomic.Int64
	ownApplies, ownWatchFirst     atomic.Int64
	chainRefusals                 atomic.Int64
	txnNanos                      atomic.Int64
	cursorPersists, gcDeleted     atomic.Int64
	segmentFallbacks              atomic.Int64

	compactRuns, compactRecords, compactBytes atomic.Int64

	flushSeconds *prometheus.HistogramVec // by result; WAL flush: intent + PUT + commit
	flushBytes   prometheus.Histogram
	objRequests  *prometheus.CounterVec   // by op, result
	objSeconds   *prometheus.HistogramVec // by op
	txnSeconds   prometheus.Histogram     // every metadata transaction
	txnResults   *prometheus.CounterVec   // by result
	// matSeconds and matResults are table materialization's; compSeconds
	// and compResults their old names (lakegate_compaction_*), kept as
	// aliases for one release (docs/metrics.md).
	matSeconds  prometheus.Histogram
	matResults  *prometheus.CounterVec // by result
	compSeconds prometheus.Histogram
	compResults *prometheus.CounterVec // by result

	// Table retention (tables.ApplyRetention).
	retFiles, retBytes, retHeld, retTrims prometheus.Counter
	// jointFallbacks: transactions across a table's partitions materialized
	// per log after all (ObserveJointFallback).
	jointFallbacks prometheus.Counter

	lag struct {
		sync.Mutex
		compactedEnd map[lakestream.LogID]int64 // table end per log compacted here
	}
}

func (m *metrics) init() {
	m.flushSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "lakegate_wal_flush_seconds", Buckets: latencyBuckets,
		Help: "Time from the start of a WAL object's flush (pending intent, PUT) to the end of its commit, by result.",
	}, []string{"result"})
	m.flushBytes = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "lakegate_wal_flush_bytes", Buckets: sizeBuckets,
		Help: "Size of the WAL objects flushed, in bytes.",
	})
	m.objRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lakegate_object_requests_total",
		Help: "Object store requests by op (put, get, delete, list; segment: a WAL segment created, append: a flush appended to one) and result (ok, not_found, exists, error).",
	}, []string{"op", "result"})
	m.objSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "lakegate_object_request_seconds", Buckets: latencyBuckets,
		Help: "Object store request latency by op.",
	}, []string{"op"})
	m.txnSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "lakegate_etcd_txn_seconds", Buckets: latencyBuckets,
		Help: "Latency of metadata-store (etcd) transactions.",
	})
	m.txnResults = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lakegate_etcd_txns_total",
		Help: "Metadata-store transactions by result (ok, conflict: a compare failed, error: failed or outcome unknown).",
	}, []string{"result"})
	m.matSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "lakegate_materialization_seconds", Buckets: latencyBuckets,
		Help: "Duration of table materializations that materialized a range.",
	})
	m.matResults = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lakegate_materialization_runs_total",
		Help: "Table materialization calls by result (materialized, nothing, conflict, error).",
	}, []string{"result"})
	m.compSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "lakegate_compaction_seconds", Buckets: latencyBuckets,
		Help: "Deprecated alias of lakegate_materialization_seconds (removed in the next release).",
	})
	m.compResults = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lakegate_compaction_runs_total",
		Help: "Deprecated alias of lakegate_materialization_runs_total, result compacted for materialized (removed in the next release).",
	}, []string{"result"})
	m.retFiles = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "lakegate_table_retention_files_removed_total",
		Help: "Table data files removed from the Delta and Iceberg tables by table retention.",
	})
	m.retBytes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "lakegate_table_retention_bytes_removed_total",
		Help: "Bytes of the table data files removed by table retention.",
	})
	m.retHeld = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "lakegate_table_retention_files_held_total",
		Help: "Table data files retention would have removed but kept, summed over runs: a durable subscription or an unfinished claim still needs them.",
	})
	m.retTrims = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "lakegate_table_retention_log_trims_total",
		Help: "Logs trimmed behind the files table retention removed.",
	})
	m.jointFallbacks = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "lakegate_materialization_joint_fallbacks_total",
		Help: "Decisions, on this node, to materialize a transaction's records in several logs of a table per log after all (the logs did not all reach it within the joint wait, or one claim could not hold them): a table snapshot may then hold part of that transaction.",
	})
	// Pre-create the series a healthy node may never touch, so dashboards
	// and alerts see zeros rather than absent series.
	for _, op := range []string{"put", "get", "delete", "list"} {
		for _, r := range []string{"ok", "error"} {
			m.objRequests.WithLabelValues(op, r)
		}
		m.objSeconds.WithLabelValues(op)
	}
	for _, r := range []string{"ok", "conflict", "error"} {
		m.txnResults.WithLabelValues(r)
	}
	for _, r := range []string{"materialized", "nothing", "conflict", "error"} {
		m.matResults.WithLabelValues(r)
		m.compResults.WithLabelValues(aliasResult(r))
	}
	m.flushSeconds.WithLabelValues("ok")
	m.flushSeconds.WithLabelValues("error")
	m.lag.compactedEnd = map[lakestream.LogID]int64{}
}

func (m *metrics) observePut(n int, d time.Duration) {
	m.puts.Add(1)
	m.putBytes.Add(int64(n))
	m.putNanos.Add(int64(d))
}

// observeTxn records the outcome of a commit transaction (counted in txns
// when sent).
func (m *metrics) observeTxn(d time.Duration, ok bool, err error) {
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

// observeFlush records one WAL object's flush, from its start to the end of
// its commit (err: the PUT failed).
func (m *metrics) observeFlush(bytes int, d time.Duration, err error) {
	r := "ok"
	if err != nil {
		r = "error"
	}
	m.flushSeconds.WithLabelValues(r).Observe(d.Seconds())
	if err == nil {
		m.flushBytes.Observe(float64(bytes))
	}
}

// ObserveMaterialization records one table materialization of log id:
// its outcome, duration and, when it materialized a range, the records
// moved and the table bytes written. The table layer's Materialize calls
// it; a scheduler needs to call it only for materializations it runs by
// other means. A log materialized once is tracked for
// lakegate_materialization_lag_records from then on (at most
// compactionLagLogsMax logs).
func (e *Engine) ObserveMaterialization(id lakestream.LogID, st CompactStats, d time.Duration, err error) {
	m := &e.metrics
	result := "error"
	switch {
	case err == nil:
		result = "materialized"
		m.matSeconds.Observe(d.Seconds())
		m.compSeconds.Observe(d.Seconds())
		m.compactRuns.Add(1)
		m.compactRecords.Add(st.Records)
		m.compactBytes.Add(st.FileBytes)
	case errors.Is(err, ErrNothingToCompact):
		result = "nothing"
	case errors.Is(err, lakestream.ErrConflict):
		result = "conflict"
	}
	m.matResults.WithLabelValues(result).Inc()
	m.compResults.WithLabelValues(aliasResult(result)).Inc()
	if err == nil && st.End > 0 {
		e.SetCompactedEnd(id, st.End)
	}
}

// aliasResult is the result label of lakegate_compaction_runs_total, the
// old name of lakegate_materialization_runs_total.
func aliasResult(r string) string {
	if r == "materialized" {
		return "compacted"
	}
	return r
}

// ObserveTableRetention records one table retention run (the table layer's
// ApplyRetention): files and bytes removed from the tables, files kept
// although expired (held), logs trimmed.
func (e *Engine) ObserveTableRetention(files int, bytes int64, held, trims int) {
	m := &e.metrics
	m.retFiles.Add(float64(files))
	m.retBytes.Add(float64(bytes))
	m.retHeld.Add(float64(held))
	m.retTrims.Add(float64(trims))
}

// ObserveJointFallback records a transaction across a table's partitions
// whose records the table layer materializes per log after all
// (docs/compaction.md, "Transactions across partitions").
func (e *Engine) ObserveJointFallback() { e.metrics.jointFallbacks.Inc() }

// SetCompactedEnd records that log id is compacted into its table up to
// offset end (exclusive); lakegate_compaction_lag_records counts the
// records committed after it. A scheduler that learns a log's table end
// (from the claim, after a restart) reports it here.
func (e *Engine) SetCompactedEnd(id lakestream.LogID, end int64) {
	m := &e.metrics
	m.lag.Lock()
	defer m.lag.Unlock()
	if _, ok := m.lag.compactedEnd[id]; !ok && len(m.lag.compactedEnd) >= compactionLagLogsMax {
		return
	}
	m.lag.compactedEnd[id] = max(m.lag.compactedEnd[id], end)
}

// compactionLag is the number of records committed, on the logs this
// engine tracks, after their compacted end; and the number of such logs.
func (e *Engine) compactionLag() (records int64, logs int) {
	m := &e.metrics
	m.lag.Lock()
	ends := make(map[lakestream.LogID]int64, len(m.lag.compactedEnd))
	for id, end := range m.lag.compactedEnd {
		ends[id] = end
	}
	m.lag.Unlock()
	for id, end := range ends {
		e.mu.Lock()
		l := e.mu.logs[id]
		e.mu.Unlock()
		if l == nil {
			continue
		}
		l.mu.Lock()
		next := l.mu.head.Next
		l.mu.Unlock()
		if next > end {
			records += next - end
		}
		logs++
	}
	return records, logs
}

func (m *metrics) snapshot() Metrics {
	return Metrics{
		Appends: m.appends.Load(), AppendBytes: m.appendBytes.Load(),
		ObjectPuts: m.puts.Load(), ObjectPutBytes: m.putBytes.Load(), ObjectPutNanos: m.putNanos.Load(),
		ObjectGets: m.gets.Load(), ObjectGetBytes: m.getBytes.Load(), CacheHits: m.cacheHits.Load(),
		Txns: m.txns.Load(), TxnConflicts: m.txnConflicts.Load(), TxnErrors: m.txnErrors.Load(), TxnNanos: m.txnNanos.Load(),
		Folds: m.folds.Load(), FoldTxns: m.foldTxns.Load(),
		ApplyWaits: m.applyWaits.Load(), ApplyWaitNanos: m.applyWaitNanos.Load(), OwnApplies: m.ownApplies.Load(), OwnWatchFirst: m.ownWatchFirst.Load(),
		ChainRefusals:  m.chainRefusals.Load(),
		CursorPersists: m.cursorPersists.Load(), GCDeletedObjects: m.gcDeleted.Load(),
		SegmentFallbacks: m.segmentFallbacks.Load(),
		CompactionRuns:   m.compactRuns.Load(), CompactedRecords: m.compactRecords.Load(), CompactedBytes: m.compactBytes.Load(),
	}
}

// measuredStore counts and times the engine's object-store requests.
type measuredStore struct {
	objstore.Store
	m *metrics
}

func (s measuredStore) observe(op string, start time.Time, err error) {
	s.m.observeObject(op, start, err)
}

// observeObject counts and times one object-store request.
func (m *metrics) observeObject(op string, start time.Time, err error) {
	r := "ok"
	switch {
	case err == nil:
	case errors.Is(err, objstore.ErrNotFound):
		r = "not_found"
	case errors.Is(err, objstore.ErrExists):
		r = "exists"
	default:
		r = "error"
	}
	m.objRequests.WithLabelValues(op, r).Inc()
	m.objSeconds.WithLabelValues(op).Observe(time.Since(start).Seconds())
}

func (s measuredStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	start := time.Now()
	err := s.Store.PutIfAbsent(ctx, key, data)
	s.observe("put", start, err)
	return err
}

func (s measuredStore) Put(ctx context.Context, key string, data []byte) error {
	start := time.Now()
	err := s.Store.Put(ctx, key, data)
	s.observe("put", start, err)
	return err
}

func (s measuredStore) Get(ctx context.Context, key string) ([]byte, error) {
	start := time.Now()
	b, err := s.Store.Get(ctx, key)
	s.observe("get", start, err)
	return b, err
}

func (s measuredStore) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	start := time.Now()
	b, err := s.Store.GetRange(ctx, key, offset, length)
	s.observe("get", start, err)
	return b, err
}

func (s measuredStore) Delete(ctx context.Context, key string) error {
	start := time.Now()
	err := s.Store.Delete(ctx, key)
	s.observe("delete", start, err)
	return err
}

// List is measured once per listing (its pages included), op "list".
func (s measuredStore) List(ctx context.Context, prefix string, fn func(objstore.ObjectInfo) error) error {
	start := time.Now()
	err := s.Store.List(ctx, prefix, fn)
	s.observe("list", start, err)
	return err
}

// measuredMeta times the engine's metadata transactions.
type measuredMeta struct {
	meta.Store
	m *metrics
}

func (s measuredMeta) Txn(ctx context.Context, cmps []meta.Cmp, ops []meta.Op) (bool, int64, error) {
	start := time.Now()
	ok, rev, err := s.Store.Txn(ctx, cmps, ops)
	s.m.txnSeconds.Observe(time.Since(start).Seconds())
	switch {
	case err != nil:
		s.m.txnResults.WithLabelValues("error").Inc()
	case !ok:
		s.m.txnResults.WithLabelValues("conflict").Inc()
	default:
		s.m.txnResults.WithLabelValues("ok").Inc()
	}
	return ok, rev, err
}

// Collector exports the engine's metrics (docs/metrics.md). Each Engine
// has its own; register it once per registry.
func (e *Engine) Collector() prometheus.Collector { return engineCollector{e} }

type engineCollector struct{ e *Engine }

var (
	engineCounterDescs = map[string]*prometheus.Desc{}
	lagRecordsDesc     = prometheus.NewDesc("lakegate_materialization_lag_records",
		"Records committed after the table's end, summed over the logs materialized at least once by this node.", nil, nil)
	lagLogsDesc = prometheus.NewDesc("lakegate_materialization_tracked_logs",
		"Logs counted in lakegate_materialization_lag_records (at most 10000).", nil, nil)
	// The lag's old names, aliases for one release (docs/metrics.md).
	lagRecordsAliasDesc = prometheus.NewDesc("lakegate_compaction_lag_records",
		"Deprecated alias of lakegate_materialization_lag_records (removed in the next release).", nil, nil)
	lagLogsAliasDesc = prometheus.NewDesc("lakegate_compaction_tracked_logs",
		"Deprecated alias of lakegate_materialization_tracked_logs (removed in the next release).", nil, nil)
	foldLagRecordsDesc = prometheus.NewDesc("lakegate_commit_log_fold_lag_records",
		"Commit records this node has applied and not folded into the logs' heads and index keys yet.", nil, nil)
	foldLagSecondsDesc = prometheus.NewDesc("lakegate_commit_log_fold_lag_seconds",
		"Time since the oldest commit record not folded yet was applied here (0 with none).", nil, nil)
	cacheBytesDesc = prometheus.NewDesc("lakegate_engine_cache_bytes", "Bytes of decoded chunks held by the read cache.", nil, nil)
)

type counterValue struct {
	name, help string
	v          float64
}

func (c engineCollector) counters() []counterValue {
	m := c.e.Metrics()
	return []counterValue{
		{"appends_total", "Entries acknowledged.", float64(m.Appends)},
		{"append_bytes_total", "Payload bytes acknowledged.", float64(m.AppendBytes)},
		{"object_puts_total", "Objects written by the engine (WAL, compacted chunks, table files).", float64(m.ObjectPuts)},
		{"object_put_bytes_total", "Object bytes written by the engine.", float64(m.ObjectPutBytes)},
		{"object_put_seconds_total", "Time spent in WAL object PUTs.", float64(m.ObjectPutNanos) / 1e9},
		{"object_gets_total", "Chunk GETs (cache misses).", float64(m.ObjectGets)},
		{"object_get_bytes_total", "Chunk bytes read from the store.", float64(m.ObjectGetBytes)},
		{"cache_hits_total", "Chunk reads served from the cache.", float64(m.CacheHits)},
		{"txns_total", "WAL commit transactions sent to the metadata store.", float64(m.Txns)},
		{"txn_conflicts_total", "WAL commit transactions whose compare failed.", float64(m.TxnConflicts)},
		{"txn_errors_total", "WAL commit transactions that failed or whose outcome was unknown.", float64(m.TxnErrors)},
		{"txn_seconds_total", "Time spent in WAL commit transactions.", float64(m.TxnNanos) / 1e9},
		{"commit_log_apply_waits_total", "Commit records of this engine applied by its watch.", float64(m.ApplyWaits)},
		{"commit_log_apply_wait_seconds_total", "Time from those records' transaction replies to their application.", float64(m.ApplyWaitNanos) / 1e9},
		{"commit_log_own_applies_total", "Commit records of this engine applied on their transaction's reply, without waiting for the watch.", float64(m.OwnApplies)},
		{"commit_log_folds_total", "Folds of the commit log into the logs' heads and index keys.", float64(m.Folds)},
		{"commit_log_fold_txns_total", "Transactions of those folds.", float64(m.FoldTxns)},
		{"cursor_persists_total", "Cursor states written.", float64(m.CursorPersists)},
		{"gc_deleted_objects_total", "WAL objects deleted by GC.", float64(m.GCDeletedObjects)},
		{"wal_segment_fallbacks_total", "Flushes written as their own WAL object because a WAL segment could not be made or appended to (file:// only; the log says why).", float64(m.SegmentFallbacks)},
		{"materialized_records_total", "Records moved into tables by table materialization.", float64(m.CompactedRecords)},
		{"materialized_bytes_total", "Table (Parquet) bytes written by table materialization.", float64(m.CompactedBytes)},
		{"compacted_records_total", "Deprecated alias of lakegate_engine_materialized_records_total (removed in the next release).", float64(m.CompactedRecords)},
		{"compacted_bytes_total", "Deprecated alias of lakegate_engine_materialized_bytes_total (removed in the next release).", float64(m.CompactedBytes)},
	}
}

func init() {
	for _, cv := range (engineCollector{}).counterTemplates() {
		engineCounterDescs[cv.name] = prometheus.NewDesc("lakegate_engine_"+cv.name, cv.help, nil, nil)
	}
}

// counterTemplates lists the counters without values (for their descs).
func (engineCollector) counterTemplates() []counterValue {
	e := &Engine{}
	return engineCollector{e}.counters()
}

func (c engineCollector) histograms() []prometheus.Collector {
	m := &c.e.metrics
	return []prometheus.Collector{m.flushSeconds, m.flushBytes, m.objRequests, m.objSeconds,
		m.txnSeconds, m.txnResults, m.matSeconds, m.matResults, m.compSeconds, m.compResults, m.retFiles, m.retBytes, m.retHeld, m.retTrims, m.jointFallbacks}
}

func (c engineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range engineCounterDescs {
		ch <- d
	}
	ch <- lagRecordsDesc
	ch <- lagLogsDesc
	ch <- lagRecordsAliasDesc
	ch <- lagLogsAliasDesc
	ch <- cacheBytesDesc
	ch <- foldLagRecordsDesc
	ch <- foldLagSecondsDesc
	for _, h := range c.histograms() {
		h.Describe(ch)
	}
}

func (c engineCollector) Collect(ch chan<- prometheus.Metric) {
	for _, cv := range c.counters() {
		ch <- prometheus.MustNewConstMetric(engineCounterDescs[cv.name], prometheus.CounterValue, cv.v)
	}
	records, logs := c.e.compactionLag()
	ch <- prometheus.MustNewConstMetric(lagRecordsDesc, prometheus.GaugeValue, float64(records))
	ch <- prometheus.MustNewConstMetric(lagLogsDesc, prometheus.GaugeValue, float64(logs))
	ch <- prometheus.MustNewConstMetric(lagRecordsAliasDesc, prometheus.GaugeValue, float64(records))
	ch <- prometheus.MustNewConstMetric(lagLogsAliasDesc, prometheus.GaugeValue, float64(logs))
	ch <- prometheus.MustNewConstMetric(cacheBytesDesc, prometheus.GaugeValue, float64(c.e.CacheBytes()))
	var foldRecords int
	var foldAge time.Duration
	if c.e.clog != nil {
		foldRecords, foldAge = c.e.clog.foldLag(time.Now())
	}
	ch <- prometheus.MustNewConstMetric(foldLagRecordsDesc, prometheus.GaugeValue, float64(foldRecords))
	ch <- prometheus.MustNewConstMetric(foldLagSecondsDesc, prometheus.GaugeValue, foldAge.Seconds())
	for _, h := range c.histograms() {
		h.Collect(ch)
	}
}

// MaterializationLag is lakegate_materialization_lag_records and
// lakegate_materialization_tracked_logs now: records committed after the
// tables' ends, summed over the logs this node has materialized at least
// once, and how many logs that is.
func (e *Engine) MaterializationLag() (records int64, logs int) { return e.compactionLag() }
