package kafka

// The listener's metrics (docs/metrics.md, "Kafka listener").

import (
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	connections      prometheus.GaugeFunc
	connectionsTotal prometheus.Counter
	requests         *prometheus.CounterVec // by request name
	producedRecords  prometheus.Counter
	producedBytes    prometheus.Counter
	produceErrors    prometheus.Counter
	fetchedRecords   prometheus.Counter
	fetchedBytes     prometheus.Counter
	authFailures     prometheus.Counter
	txnIDsExpired    prometheus.Counter
}

func newMetrics(s *Server) *metrics {
	return &metrics{
		connections: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "lakegate_kafka_connections",
			Help: "Open connections of the Kafka listener.",
		}, func() float64 { return float64(s.open.Load()) }),
		connectionsTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lakegate_kafka_connections_total",
			Help: "Connections the Kafka listener accepted.",
		}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lakegate_kafka_requests_total",
			Help: "Kafka requests read, by request (Kafka's name, e.g. Produce, Fetch).",
		}, []string{"request"}),
		producedRecords: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lakegate_kafka_produced_records_total",
			Help: "Records of Kafka produce requests appended and acknowledged (duplicates of idempotent producers not counted).",
		}),
		producedBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lakegate_kafka_produced_bytes_total",
			Help: "Stored entry bytes of the records counted by lakegate_kafka_produced_records_total.",
		}),
		produceErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lakegate_kafka_produce_errors_total",
			Help: "Partitions of Kafka produce requests answered with an error.",
		}),
		fetchedRecords: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lakegate_kafka_fetched_records_total",
			Help: "Records sent in Kafka fetch answers (whole stored entries: records below a fetch offset count).",
		}),
		fetchedBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lakegate_kafka_fetched_bytes_total",
			Help: "Record batch bytes sent in Kafka fetch answers.",
		}),
		authFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lakegate_kafka_authentication_failures_total",
			Help: "Kafka SASL authentications refused.",
		}),
		txnIDsExpired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lakegate_kafka_transactional_ids_expired_total",
			Help: "Transactional.id records this node deleted, unused for kafka.transactionalIdExpiration with no transaction open.",
		}),
	}
}

// Collector is the listener's metrics, for the node's /metrics.
func (s *Server) Collector() prometheus.Collector { return s.metrics }

func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.all() {
		c.Describe(ch)
	}
}

func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.all() {
		c.Collect(ch)
	}
}

func (m *metrics) all() []prometheus.Collector {
	return []prometheus.Collector{m.connections, m.connectionsTotal, m.requests, m.producedRecords, m.producedBytes,
		m.produceErrors, m.fetchedRecords, m.fetchedBytes, m.authFailures, m.txnIDsExpired}
}
