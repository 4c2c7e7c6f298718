package gateway

// Apache Pulsar's broker metrics (docs/metrics.md, "Pulsar's names"): the
// families Pulsar's Grafana dashboards and alerts query, with Pulsar's
// names, types (gauges) and labels, computed from the stats of the topics
// this node serves (broker.Topic.Stats: the numbers the admin REST
// answers). Every series carries cluster; topic-level series carry
// namespace and topic; subscription series add subscription; consumer
// series (only with Config.MetricsConsumerLevel) add consumer_name and
// consumer_id. With Config.MetricsNamespaceLevelOnly the topic families
// are summed per namespace and no subscription or consumer series are
// exported, as Pulsar with exposeTopicLevelMetricsInPrometheus=false.
//
// Bounds: the stats of at most Config.MetricsTopicsMax topics (the first
// by name) are read per scrape, and at most Config.MetricsSubscriptionsMax
// subscription series and as many consumer series are exported; what is
// left out is counted in lakegate_metrics_series_dropped{level}.

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/lakestream"
)

// defaultMetricsTopicsMax is the default cap on topics of the topic-level
// families.
const defaultMetricsTopicsMax = 1000

// tableEndRefresh is how long a topic's table end (read from the table's
// metadata: object reads) serves the table lag before it is read again.
const tableEndRefresh = 30 * time.Second

var (
	topicLabels        = []string{"cluster", "namespace", "topic"}
	namespaceLabels    = []string{"cluster", "namespace"}
	subscriptionLabels = []string{"cluster", "namespace", "topic", "subscription"}
	consumerLabels     = []string{"cluster", "namespace", "topic", "subscription", "consumer_name", "consumer_id"}
	connectionLabels   = []string{"cluster", "broker"}
)

// pulsarTopicFamily is one of Pulsar's topic families: its value from a
// topic's stats, exported per topic or summed per namespace.
type pulsarTopicFamily struct {
	topic, namespace *prometheus.Desc
	value            func(st *pulsarTopicStats) float64
}

// pulsarTopicStats is what the topic families read of one topic.
type pulsarTopicStats struct {
	broker.TopicStats
	backlog   int64 // sum of the subscriptions' msgBacklog (Pulsar's topic msgBacklog)
	consumers int
	latency   broker.WriteLatencySnapshot
}

func newTopicFamily(name, help string, value func(*pulsarTopicStats) float64) pulsarTopicFamily {
	return pulsarTopicFamily{
		topic:     prometheus.NewDesc(name, help, topicLabels, nil),
		namespace: prometheus.NewDesc(name, help, namespaceLabels, nil),
		value:     value,
	}
}

// latencyBucketName is the family of WriteLatencyBoundsMs[i]
// (pulsar_storage_write_latency_le_0_5 …), or of the overflow bucket.
func latencyBucketName(i int) string {
	if i == len(broker.WriteLatencyBoundsMs) {
		return "pulsar_storage_write_latency_le_overflow"
	}
	b := strconv.FormatFloat(broker.WriteLatencyBoundsMs[i], 'f', -1, 64)
	return "pulsar_storage_write_latency_le_" + strings.ReplaceAll(b, ".", "_")
}

var pulsarTopicFamilies = func() []pulsarTopicFamily {
	fs := []pulsarTopicFamily{
		newTopicFamily("pulsar_subscriptions_count", "Subscriptions of the topic.",
			func(s *pulsarTopicStats) float64 { return float64(len(s.Subscriptions)) }),
		newTopicFamily("pulsar_producers_count", "Producers attached to the topic through this node.",
			func(s *pulsarTopicStats) float64 { return float64(len(s.Publishers)) }),
		newTopicFamily("pulsar_consumers_count", "Consumers attached to the topic through this node.",
			func(s *pulsarTopicStats) float64 { return float64(s.consumers) }),
		newTopicFamily("pulsar_rate_in", "Messages per second published to the topic (topic stats' msgRateIn).",
			func(s *pulsarTopicStats) float64 { return s.MsgRateIn }),
		newTopicFamily("pulsar_rate_out", "Messages per second dispatched from the topic (topic stats' msgRateOut).",
			func(s *pulsarTopicStats) float64 { return s.MsgRateOut }),
		newTopicFamily("pulsar_throughput_in", "Payload bytes per second published to the topic (msgThroughputIn).",
			func(s *pulsarTopicStats) float64 { return s.MsgThroughputIn }),
		newTopicFamily("pulsar_throughput_out", "Payload bytes per second dispatched from the topic (msgThroughputOut).",
			func(s *pulsarTopicStats) float64 { return s.MsgThroughputOut }),
		newTopicFamily("pulsar_storage_size", "Payload bytes of the topic's readable entries, in WAL objects and tables (topic stats' storageSize).",
			func(s *pulsarTopicStats) float64 { return float64(s.StorageSize) }),
		newTopicFamily("pulsar_msg_backlog", "Messages not acknowledged, summed over the topic's subscriptions.",
			func(s *pulsarTopicStats) float64 { return float64(s.backlog) }),
		newTopicFamily("pulsar_in_messages_total", "Messages appended to the topic since it was created (msgInCounter).",
			func(s *pulsarTopicStats) float64 { return float64(s.MsgInCounter) }),
		newTopicFamily("pulsar_in_bytes_total", "Payload bytes appended to the topic since it was created (bytesInCounter).",
			func(s *pulsarTopicStats) float64 { return float64(s.BytesInCounter) }),
	}
	for i := range len(broker.WriteLatencyBoundsMs) + 1 {
		fs = append(fs, newTopicFamily(latencyBucketName(i),
			"Appends of this node's producers whose latency (SEND read to receipt) fell in this bucket, in ms, since the topic was loaded here (not cumulative).",
			func(s *pulsarTopicStats) float64 { return float64(s.latency.Buckets[i]) }))
	}
	return append(fs,
		newTopicFamily("pulsar_storage_write_latency_count", "Appends counted in pulsar_storage_write_latency_le_*.",
			func(s *pulsarTopicStats) float64 { return float64(s.latency.Count) }),
		newTopicFamily("pulsar_storage_write_latency_sum", "Total latency of the appends counted, in ms.",
			func(s *pulsarTopicStats) float64 { return s.latency.SumMs }))
}()

var (
	topicsCountDesc = prometheus.NewDesc("pulsar_topics_count", "Topics (partitions) of the namespace served by this node.", namespaceLabels, nil)

	subBacklogDesc = prometheus.NewDesc("pulsar_subscription_back_log",
		"Messages of the subscription not acknowledged (msgBacklog); capped series.", subscriptionLabels, nil)
	subRateOutDesc = prometheus.NewDesc("pulsar_subscription_msg_rate_out",
		"Messages per second dispatched to the subscription's consumers on this node; capped series.", subscriptionLabels, nil)
	subThroughputOutDesc = prometheus.NewDesc("pulsar_subscription_msg_throughput_out",
		"Payload bytes per second dispatched to the subscription's consumers on this node; capped series.", subscriptionLabels, nil)
	subRateRedeliverDesc = prometheus.NewDesc("pulsar_subscription_msg_rate_redeliver",
		"Messages per second delivered again (redelivery count above 0) to the subscription's consumers on this node; capped series.", subscriptionLabels, nil)
	subConsumersDesc = prometheus.NewDesc("pulsar_subscription_consumers_count",
		"Consumers of the subscription attached through this node; capped series.", subscriptionLabels, nil)
	subDelayedDesc = prometheus.NewDesc("pulsar_subscription_delayed",
		"Entries held for delayed delivery; capped series.", subscriptionLabels, nil)
	// Unacknowledged limits (limits.go), with Pulsar's names.
	subBlockedDesc = prometheus.NewDesc("pulsar_subscription_blocked_on_unacked_messages",
		"1 while the subscription's dispatch is blocked by maxUnackedMessagesPerSubscription; capped series.", subscriptionLabels, nil)
	subUnackedMsgsDesc = prometheus.NewDesc("pulsar_subscription_unacked_messages",
		"Messages delivered and not acknowledged, as maxUnackedMessagesPerSubscription counts them; capped series.", subscriptionLabels, nil)

	consumerRateOutDesc = prometheus.NewDesc("pulsar_consumer_msg_rate_out",
		"Messages per second dispatched to the consumer; capped series.", consumerLabels, nil)
	consumerThroughputOutDesc = prometheus.NewDesc("pulsar_consumer_msg_throughput_out",
		"Payload bytes per second dispatched to the consumer; capped series.", consumerLabels, nil)
	consumerRateRedeliverDesc = prometheus.NewDesc("pulsar_consumer_msg_rate_redeliver",
		"Messages per second delivered again to the consumer; capped series.", consumerLabels, nil)
	consumerUnackedDesc = prometheus.NewDesc("pulsar_consumer_unacked_messages",
		"Messages delivered to the consumer and not acknowledged; capped series.", consumerLabels, nil)
	consumerBlockedDesc = prometheus.NewDesc("pulsar_consumer_blocked_on_unacked_messages",
		"1 while maxUnackedMessagesPerConsumer blocks the consumer; capped series.", consumerLabels, nil)
	consumerPermitsDesc = prometheus.NewDesc("pulsar_consumer_available_permits",
		"Permits the consumer asked for and has not used; capped series.", consumerLabels, nil)

	activeConnsDesc = prometheus.NewDesc("pulsar_active_connections",
		"Open client connections.", connectionLabels, nil)
	connsCreatedDesc = prometheus.NewDesc("pulsar_connection_created_total_count",
		"Client connections accepted, refused ones included.", connectionLabels, nil)
	connsSuccessDesc = prometheus.NewDesc("pulsar_connection_create_success_count",
		"Client connections accepted and admitted.", connectionLabels, nil)
	connsFailDesc = prometheus.NewDesc("pulsar_connection_create_fail_count",
		"Client connections refused by a connection limit.", connectionLabels, nil)
	connsClosedDesc = prometheus.NewDesc("pulsar_connection_closed_total_count",
		"Client connections closed.", connectionLabels, nil)

	tableLagRecordsDesc = prometheus.NewDesc("lakegate_table_lag_records",
		"Records of the topic's log committed and not yet in its table (log end minus table end); topics with a table only; capped series.",
		[]string{"topic"}, nil)
	tableLagSecondsDesc = prometheus.NewDesc("lakegate_table_lag_seconds",
		"Age of the oldest committed record not yet in the topic's table (now minus its write time), 0 when the table is complete; capped series.",
		[]string{"topic"}, nil)
	seriesDroppedDesc = prometheus.NewDesc("lakegate_metrics_series_dropped",
		"Topics, subscriptions and consumers (level) left out of the Pulsar families by the series caps (MetricsTopicsMax, MetricsSubscriptionsMax) or the scrape timeout.",
		[]string{"level"}, nil)
)

// pulsarDescs are the descriptions of the Pulsar families as cfg exports
// them (one label set per name: per topic or per namespace).
func pulsarDescs(cfg *Config) []*prometheus.Desc {
	ds := []*prometheus.Desc{topicsCountDesc, subBacklogDesc, subRateOutDesc, subThroughputOutDesc, subRateRedeliverDesc,
		subConsumersDesc, subDelayedDesc, subBlockedDesc, subUnackedMsgsDesc,
		consumerRateOutDesc, consumerThroughputOutDesc, consumerRateRedeliverDesc, consumerUnackedDesc, consumerBlockedDesc, consumerPermitsDesc,
		activeConnsDesc, connsCreatedDesc, connsSuccessDesc, connsFailDesc, connsClosedDesc,
		tableLagRecordsDesc, tableLagSecondsDesc, seriesDroppedDesc}
	for _, f := range pulsarTopicFamilies {
		if cfg.MetricsNamespaceLevelOnly {
			ds = append(ds, f.namespace)
		} else {
			ds = append(ds, f.topic)
		}
	}
	return ds
}

// pulsarScrape is one scrape's state of the Pulsar families.
type pulsarScrape struct {
	s       *Server
	ch      chan<- prometheus.Metric
	cluster string
	// dropped by level: topic, subscription, consumer.
	dropped             map[string]int
	subSeries, consumes int
	// byNamespace sums the topic families with MetricsNamespaceLevelOnly.
	byNamespace map[string][]float64
}

// collectPulsar exports the Pulsar families of topics (sorted by name)
// and the table lag, within ctx.
func (s *Server) collectPulsar(ctx context.Context, ch chan<- prometheus.Metric, topics []*topic, conns int) {
	p := &pulsarScrape{s: s, ch: ch, cluster: broker.ClusterName,
		dropped: map[string]int{"topic": 0, "subscription": 0, "consumer": 0}, byNamespace: map[string][]float64{}}
	topicsPerNamespace := map[string]int{}
	keep := make(map[string]bool, min(len(topics), s.cfg.MetricsTopicsMax))
	for i, t := range topics {
		ns := t.TopicName().Tenant + "/" + t.TopicName().Namespace
		topicsPerNamespace[ns]++
		if i >= s.cfg.MetricsTopicsMax || ctx.Err() != nil {
			p.dropped["topic"]++
			continue
		}
		keep[t.Stream().String()] = true
		if err := p.topic(ctx, t, ns); err != nil {
			p.dropped["topic"]++
			if ctx.Err() == nil {
				s.cfg.Logger.Warn("metrics: topic stats", "topic", t.Name(), "err", err)
			}
		}
	}
	s.forgetTableEnds(keep)
	for ns, n := range topicsPerNamespace {
		ch <- prometheus.MustNewConstMetric(topicsCountDesc, prometheus.GaugeValue, float64(n), p.cluster, ns)
	}
	for ns, sums := range p.byNamespace {
		for i, f := range pulsarTopicFamilies {
			ch <- prometheus.MustNewConstMetric(f.namespace, prometheus.GaugeValue, sums[i], p.cluster, ns)
		}
	}
	m := s.metrics
	ok, refused, closed := counterValue(m.connectionsTotal), counterValue(m.connectionsRefused), counterValue(m.connectionsClosed)
	brokerAddr := s.cfg.AdvertisedAddr
	ch <- prometheus.MustNewConstMetric(activeConnsDesc, prometheus.GaugeValue, float64(conns), p.cluster, brokerAddr)
	ch <- prometheus.MustNewConstMetric(connsCreatedDesc, prometheus.GaugeValue, ok+refused, p.cluster, brokerAddr)
	ch <- prometheus.MustNewConstMetric(connsSuccessDesc, prometheus.GaugeValue, ok, p.cluster, brokerAddr)
	ch <- prometheus.MustNewConstMetric(connsFailDesc, prometheus.GaugeValue, refused, p.cluster, brokerAddr)
	ch <- prometheus.MustNewConstMetric(connsClosedDesc, prometheus.GaugeValue, closed, p.cluster, brokerAddr)
	for level, n := range p.dropped {
		ch <- prometheus.MustNewConstMetric(seriesDroppedDesc, prometheus.GaugeValue, float64(n), level)
	}
}

// topic exports one topic's families (or adds them to its namespace's
// sums), its subscriptions' and consumers', and its table lag.
func (p *pulsarScrape) topic(ctx context.Context, t *topic, ns string) error {
	stats, err := t.Stats(ctx, 0)
	if err != nil {
		return err
	}
	st := &pulsarTopicStats{TopicStats: stats, latency: t.WriteLatency().Snapshot()}
	names := make([]string, 0, len(st.Subscriptions))
	for name, ss := range st.Subscriptions {
		names = append(names, name)
		st.backlog += ss.MsgBacklog
		st.consumers += len(ss.Consumers)
	}
	cfg := &p.s.cfg
	if cfg.MetricsNamespaceLevelOnly {
		sums := p.byNamespace[ns]
		if sums == nil {
			sums = make([]float64, len(pulsarTopicFamilies))
			p.byNamespace[ns] = sums
		}
		for i, f := range pulsarTopicFamilies {
			sums[i] += f.value(st)
		}
	} else {
		name := t.Name()
		for _, f := range pulsarTopicFamilies {
			p.ch <- prometheus.MustNewConstMetric(f.topic, prometheus.GaugeValue, f.value(st), p.cluster, ns, name)
		}
		sort.Strings(names)
		for _, sub := range names {
			p.subscription(ns, name, sub, st.Subscriptions[sub])
		}
	}
	return p.s.collectTableLag(ctx, p.ch, t)
}

// subscription exports one subscription's series, and its consumers'
// with MetricsConsumerLevel, under the caps.
func (p *pulsarScrape) subscription(ns, topicName, name string, ss broker.SubscriptionStats) {
	cfg := &p.s.cfg
	if p.subSeries >= cfg.MetricsSubscriptionsMax {
		p.dropped["subscription"]++
		return
	}
	p.subSeries++
	l := []string{p.cluster, ns, topicName, name}
	blocked := 0.0
	if ss.BlockedOnUnacked {
		blocked = 1
	}
	for _, v := range []struct {
		d *prometheus.Desc
		v float64
	}{
		{subBacklogDesc, float64(ss.MsgBacklog)}, {subRateOutDesc, ss.MsgRateOut}, {subThroughputOutDesc, ss.MsgThroughputOut},
		{subRateRedeliverDesc, ss.MsgRateRedeliver}, {subConsumersDesc, float64(len(ss.Consumers))}, {subDelayedDesc, float64(ss.MsgDelayed)},
		{subBlockedDesc, blocked}, {subUnackedMsgsDesc, float64(ss.UnackedMessages)},
	} {
		p.ch <- prometheus.MustNewConstMetric(v.d, prometheus.GaugeValue, v.v, l...)
	}
	if !cfg.MetricsConsumerLevel {
		return
	}
	for _, c := range ss.Consumers {
		if p.consumes >= cfg.MetricsSubscriptionsMax {
			p.dropped["consumer"]++
			continue
		}
		p.consumes++
		cl := append(l[:len(l):len(l)], c.ConsumerName, strconv.FormatUint(c.ID, 10))
		cb := 0.0
		if c.BlockedOnUnacked {
			cb = 1
		}
		for _, v := range []struct {
			d *prometheus.Desc
			v float64
		}{
			{consumerRateOutDesc, c.MsgRateOut}, {consumerThroughputOutDesc, c.MsgThroughputOut}, {consumerRateRedeliverDesc, c.MsgRateRedeliver},
			{consumerUnackedDesc, float64(c.UnackedMessages)}, {consumerBlockedDesc, cb}, {consumerPermitsDesc, float64(c.AvailablePermits)},
		} {
			p.ch <- prometheus.MustNewConstMetric(v.d, prometheus.GaugeValue, v.v, cl...)
		}
	}
}

// counterValue reads a counter's value.
func counterValue(c prometheus.Counter) float64 {
	ch := make(chan prometheus.Metric, 1)
	c.Collect(ch)
	var m dto.Metric
	if err := (<-ch).Write(&m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}

// tableEnd is a stream's table ends as last read (tableEnds): one read
// of the table serves every partition of the stream.
type tableEnd struct {
	ends map[lakestream.LogID]int64 // by log; nil when the stream has no table
	read time.Time
}

// tableEnds caches the table ends of the streams of the table lag, by
// stream, read again after tableEndRefresh; it holds only the streams of
// the topics kept by the last scrape (at most MetricsTopicsMax).
type tableEnds struct {
	sync.Mutex
	m map[string]tableEnd
}

// forgetTableEnds drops the cached table ends of the streams not in keep.
func (s *Server) forgetTableEnds(keep map[string]bool) {
	s.tables.Lock()
	defer s.tables.Unlock()
	for name := range s.tables.m {
		if !keep[name] {
			delete(s.tables.m, name)
		}
	}
}

// topicTableEnd is the offset just past the last record of t's log in its
// table, from the cache when fresh; has is false when the topic has no
// table.
func (s *Server) topicTableEnd(ctx context.Context, t *topic) (end int64, has bool, err error) {
	now := time.Now()
	key := t.Stream().String()
	s.tables.Lock()
	e, ok := s.tables.m[key]
	s.tables.Unlock()
	if !ok || now.Sub(e.read) >= tableEndRefresh {
		st, err := s.cfg.Catalog.Stream(ctx, t.Stream())
		if err != nil {
			return 0, false, err
		}
		e = tableEnd{read: now}
		info, err := st.Table().Info(ctx)
		switch {
		case errors.Is(err, lakestream.ErrNotMaterialized):
		case err != nil:
			return 0, false, err
		default:
			e.ends = make(map[lakestream.LogID]int64, len(info.Partitions))
			for _, p := range info.Partitions {
				e.ends[p.Log] = p.CompactedEnd
			}
		}
		s.tables.Lock()
		if s.tables.m == nil {
			s.tables.m = map[string]tableEnd{}
		}
		s.tables.m[key] = e
		s.tables.Unlock()
	}
	end, has = e.ends[t.Log().ID()]
	return end, has, nil
}

// collectTableLag exports t's table lag when it has a table: the records
// after the table end, and the age of the first of them.
func (s *Server) collectTableLag(ctx context.Context, ch chan<- prometheus.Metric, t *topic) error {
	end, has, err := s.topicTableEnd(ctx, t)
	if err != nil || !has {
		return err
	}
	next, err := t.Log().NextOffset(ctx)
	if err != nil {
		return err
	}
	records, seconds := max(0, next-end), 0.0
	if records > 0 {
		h, err := t.Log().EntryHeader(ctx, end)
		if errors.Is(err, lakestream.ErrOffsetTrimmed) {
			var first int64
			if first, err = t.Log().FirstOffset(ctx); err == nil {
				h, err = t.Log().EntryHeader(ctx, first)
			}
		}
		if err != nil {
			return err
		}
		seconds = max(0, time.Since(time.UnixMilli(h.WriteTimeMs)).Seconds())
	}
	ch <- prometheus.MustNewConstMetric(tableLagRecordsDesc, prometheus.GaugeValue, float64(records), t.Name())
	ch <- prometheus.MustNewConstMetric(tableLagSecondsDesc, prometheus.GaugeValue, seconds, t.Name())
	return nil
}
