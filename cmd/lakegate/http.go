package main

import (
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/lakegate/lakegate/engine"
	"github.com/lakegate/lakegate/gateway"
)

// httpHandler serves /metrics, /healthz, /readyz and, when gw is not nil,
// the Pulsar admin REST v2 under /admin/v2/.
func httpHandler(n *engine.Node, gw *gateway.Server) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	reg.MustRegister(engineCollector{n.Engine})
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ready\n")) })
	if gw != nil {
		mux.Handle("/admin/", gw.AdminHandler())
	}
	return mux
}

// engineCollector exports engine.Metrics as Prometheus counters.
type engineCollector struct{ e *engine.Engine }

var (
	descMu      sync.Mutex
	engineDescs = map[string]*prometheus.Desc{}
)

func desc(name, help string) *prometheus.Desc {
	descMu.Lock()
	defer descMu.Unlock()
	if d, ok := engineDescs[name]; ok {
		return d
	}
	d := prometheus.NewDesc("lakegate_engine_"+name, help, nil, nil)
	engineDescs[name] = d
	return d
}

func (c engineCollector) metrics() []struct {
	d *prometheus.Desc
	v float64
} {
	m := c.e.Metrics()
	type mv = struct {
		d *prometheus.Desc
		v float64
	}
	return []mv{
		{desc("appends_total", "Entries acknowledged."), float64(m.Appends)},
		{desc("append_bytes_total", "Payload bytes acknowledged."), float64(m.AppendBytes)},
		{desc("object_puts_total", "WAL objects written."), float64(m.ObjectPuts)},
		{desc("object_put_bytes_total", "WAL object bytes written."), float64(m.ObjectPutBytes)},
		{desc("object_put_seconds_total", "Time spent in WAL object PUTs."), float64(m.ObjectPutNanos) / 1e9},
		{desc("object_gets_total", "Chunk GETs (cache misses)."), float64(m.ObjectGets)},
		{desc("object_get_bytes_total", "Chunk bytes read from the store."), float64(m.ObjectGetBytes)},
		{desc("cache_hits_total", "Chunk reads served from the cache."), float64(m.CacheHits)},
		{desc("txns_total", "Commit transactions sent to the metadata store."), float64(m.Txns)},
		{desc("txn_conflicts_total", "Commit transactions whose compare failed."), float64(m.TxnConflicts)},
		{desc("txn_errors_total", "Commit transactions that failed or whose outcome was unknown."), float64(m.TxnErrors)},
		{desc("txn_seconds_total", "Time spent in commit transactions."), float64(m.TxnNanos) / 1e9},
		{desc("cursor_persists_total", "Cursor states written."), float64(m.CursorPersists)},
		{desc("gc_deleted_objects_total", "WAL objects deleted by GC."), float64(m.GCDeletedObjects)},
	}
}

func (c engineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.metrics() {
		ch <- m.d
	}
}

func (c engineCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.metrics() {
		ch <- prometheus.MustNewConstMetric(m.d, prometheus.CounterValue, m.v)
	}
}
