package tc

// Apache Pulsar's transaction coordinator metrics (docs/metrics.md,
// "Transactions"), with Pulsar's names and its coordinator_id label: what
// the coordinators this node serves did here. A coordinator that moves to
// another node starts its counters there from zero, as Pulsar's do when
// a broker takes one over.

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

var txnLabels = []string{"cluster", "coordinator_id"}

var (
	descActive    = prometheus.NewDesc("pulsar_txn_active_count", "Open transactions of the coordinator (served by this node).", txnLabels, nil)
	descCreated   = prometheus.NewDesc("pulsar_txn_created_total", "Transactions the coordinator opened on this node.", txnLabels, nil)
	descCommitted = prometheus.NewDesc("pulsar_txn_committed_total", "Transactions the coordinator committed on this node.", txnLabels, nil)
	descAborted   = prometheus.NewDesc("pulsar_txn_aborted_total", "Transactions the coordinator aborted on this node (timeouts included).", txnLabels, nil)
	descTimeout   = prometheus.NewDesc("pulsar_txn_timeout_total", "Transactions the coordinator aborted on this node because they timed out.", txnLabels, nil)
	descAppendLog = prometheus.NewDesc("pulsar_txn_append_log_total", "Writes of transaction records to the metadata store by the coordinator on this node.", txnLabels, nil)
)

// counters are one coordinator's counts on this node.
type counters struct{ created, committed, aborted, timeout, appendLog float64 }

// metrics counts by coordinator.
type metrics struct {
	mu sync.Mutex
	by map[uint64]*counters
}

// add applies f to coordinator tc's counters.
func (m *metrics) add(tc uint64, f func(*counters)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.by == nil {
		m.by = map[uint64]*counters{}
	}
	c := m.by[tc]
	if c == nil {
		c = &counters{}
		m.by[tc] = c
	}
	f(c)
}

// Collector exports the coordinator metrics with label cluster = cluster.
func (c *Coordinator) Collector(cluster string) prometheus.Collector {
	return collector{c: c, cluster: cluster}
}

type collector struct {
	c       *Coordinator
	cluster string
}

func (x collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descActive, descCreated, descCommitted, descAborted, descTimeout, descAppendLog} {
		ch <- d
	}
}

func (x collector) Collect(ch chan<- prometheus.Metric) {
	active := map[uint64]int{}
	x.c.mu.Lock()
	for tc, st := range x.c.tcs {
		if !st.own.Held() {
			continue
		}
		st.mu.Lock()
		n := 0
		for _, e := range st.txns {
			if e.mu.TryLock() { // one being changed is skipped: a gauge, not a count
				if !e.rec.State.Ended() {
					n++
				}
				e.mu.Unlock()
			}
		}
		st.mu.Unlock()
		active[tc] = n
	}
	x.c.mu.Unlock()
	m := &x.c.metrics
	m.mu.Lock()
	defer m.mu.Unlock()
	for tc := range m.by {
		if _, ok := active[tc]; !ok {
			active[tc] = 0
		}
	}
	for tc, n := range active {
		id := strconv.FormatUint(tc, 10)
		ch <- prometheus.MustNewConstMetric(descActive, prometheus.GaugeValue, float64(n), x.cluster, id)
		cs := m.by[tc]
		if cs == nil {
			cs = &counters{}
		}
		for _, v := range []struct {
			d *prometheus.Desc
			v float64
		}{{descCreated, cs.created}, {descCommitted, cs.committed}, {descAborted, cs.aborted}, {descTimeout, cs.timeout}, {descAppendLog, cs.appendLog}} {
			ch <- prometheus.MustNewConstMetric(v.d, prometheus.CounterValue, v.v, x.cluster, id)
		}
	}
}
