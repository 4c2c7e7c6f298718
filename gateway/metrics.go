package gateway

import (
	"context"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/lakestream"
)

// Gateway metrics (docs/metrics.md). Counters and histograms have no
// per-topic labels; only the per-subscription gauges do, and they are
// capped at Config.MetricsSubscriptionsMax series per scrape.

// defaultMetricsSubscriptionsMax is the default cap on subscription series.
const defaultMetricsSubscriptionsMax = 1000

// metricsScrapeTimeout bounds the log reads one scrape makes for backlogs.
const metricsScrapeTimeout = 5 * time.Second

type gatewayMetrics struct {
	publishedMsgs    prometheus.Counter
	publishedBytes   prometheus.Counter
	publishErrors    prometheus.Counter
	publishLatency   prometheus.Histogram
	dispatchedMsgs   prometheus.Counter
	dispatchedBytes  prometheus.Counter
	connectionsTotal prometheus.Counter
	// connectionsRefused and connectionsClosed feed Pulsar's connection
	// families (pulsar_metrics.go).
	connectionsRefused, connectionsClosed prometheus.Counter
	// Slow connections (outqueue.go).
	dispatchDeferred      prometheus.Counter
	connectionsOverflowed prometheus.Counter
	// Cluster (cluster.go).
	proxiedConnections prometheus.Counter
	unloads            *prometheus.CounterVec // by reason: handover, lost
	authFailures       *prometheus.CounterVec // by reason (auth.Reason, "unauthorized")
	// Policies (broker/enforcement.go).
	policyActions *prometheus.CounterVec // by action
	policyChecks  prometheus.Counter
}

func newGatewayMetrics() *gatewayMetrics {
	return &gatewayMetrics{
		publishedMsgs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lakegate_published_messages_total",
			Help: "Messages (records, counting each message of a batch) acknowledged to producers with SEND_RECEIPT.",
		}),
		publishedBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lakegate_published_bytes_total",
			Help: "Entry payload bytes acknowledged to producers.",
		}),
		publishErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lakegate_publish_errors_total",
			Help: "SENDs answered with SEND_ERROR after their append failed.",
		}),
		publishLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "lakegate_publish_latency_seconds",
			Help:    "Time from reading a SEND to queueing its SEND_RECEIPT.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16), // 0.5 ms .. 16 s
		}),
		dispatchedMsgs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lakegate_dispatched_messages_total",
			Help: "Messages (records) delivered to consumers, redeliveries included.",
		}),
		dispatchedBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lakegate_dispatched_bytes_total",
			Help: "Entry payload bytes delivered to consumers.",
		}),
		connectionsTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lakegate_connections_opened_total",
			Help: "Client connections accepted.",
		}),
		connectionsRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lakegate_connections_refused_total",
			Help: "Client connections refused by a connection limit (brokerMaxConnections, brokerMaxConnectionsPerIp).",
		}),
		connectionsClosed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lakegate_connections_closed_total",
			Help: "Client connections closed (accepted ones whose session ended).",
		}),
		dispatchDeferred: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lakegate_dispatch_deferred_entries_total",
			Help: "Entries a consumer's connection could not take (its outbound queue was full): each went to another consumer or waits for redelivery, and the consumer was skipped until its queue had room.",
		}),
		connectionsOverflowed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lakegate_connections_overflowed_total",
			Help: "Connections closed because their outbound queue reached OutboundFramesMax + OutboundOwedMax frames (the client did not read what it was sent).",
		}),
		proxiedConnections: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lakegate_proxied_connections_total",
			Help: "Client connections relayed to the member owning their topics (proxy mode).",
		}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lakegate_auth_failures_total",
			Help: "Refused authentications (reason: no_credentials, invalid, expired, unknown_method, issuer_unavailable) and authorizations (unauthorized), binary protocol and admin REST.",
		}, []string{"reason"}),
		policyActions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lakegate_policy_actions_total",
			Help: "What topic policies did (action: ttl_expiry and quota_eviction per subscription advanced, quota_producers_blocked per topic whose producers were disconnected, retention_trim per log trimmed).",
		}, []string{"action"}),
		policyChecks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lakegate_policy_checks_total",
			Help: "Policy checks completed, one per served topic and Config.PolicyCheckInterval (topics without policies included).",
		}),
		unloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lakegate_topic_unloads_total",
			Help: "Topics this node stopped serving: handed over (an unload, a rebalance, a shutdown) or lost (ownership gone).",
		}, []string{"reason"}),
	}
}

func (m *gatewayMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.publishedMsgs, m.publishedBytes, m.publishErrors, m.publishLatency,
		m.dispatchedMsgs, m.dispatchedBytes, m.connectionsTotal, m.connectionsRefused, m.connectionsClosed, m.dispatchDeferred, m.connectionsOverflowed, m.proxiedConnections, m.unloads, m.authFailures, m.policyActions, m.policyChecks}
}

// subscriptionInfo is sub.Info bounded by ctx: an actor held up (a cursor
// write, a lookup it waits for) must not hang the scrape. The goroutine
// left behind on timeout ends when the actor answers or stops.
func subscriptionInfo(ctx context.Context, sub *actors.SubscriptionActor) (actors.SubscriptionInfo, error) {
	type result struct {
		info actors.SubscriptionInfo
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		i, err := sub.Info()
		ch <- result{i, err}
	}()
	select {
	case r := <-ch:
		return r.info, r.err
	case <-ctx.Done():
		return actors.SubscriptionInfo{}, ctx.Err()
	}
}

var (
	connectionsDesc = prometheus.NewDesc("lakegate_connections", "Open client connections.", nil, nil)
	producersDesc   = prometheus.NewDesc("lakegate_producers", "Producers attached to this gateway.", nil, nil)
	consumersDesc   = prometheus.NewDesc("lakegate_consumers", "Consumers attached to this gateway.", nil, nil)
	topicsDesc      = prometheus.NewDesc("lakegate_topics_served", "Topics (partitions) open on this gateway.", nil, nil)
	backlogDesc     = prometheus.NewDesc("lakegate_subscription_backlog_messages",
		"Messages not acknowledged: after the subscription's mark-delete position and not acknowledged individually (Pulsar msgBacklog), per subscription of the topics served here (with consumers or not); capped series.",
		[]string{"topic", "subscription"}, nil)
	unackedDesc = prometheus.NewDesc("lakegate_subscription_unacked_entries",
		"Entries delivered to consumers and not yet wholly acknowledged, per subscription served here; capped series.",
		[]string{"topic", "subscription"}, nil)
	droppedDesc = prometheus.NewDesc("lakegate_subscription_series_dropped",
		"Subscriptions left out of the per-subscription gauges by the series cap (Config.MetricsSubscriptionsMax).", nil, nil)
	blockedConsumersDesc = prometheus.NewDesc("lakegate_consumers_blocked_on_unacked",
		"Consumers served here whose dispatch is blocked by maxUnackedMessagesPerConsumer.", nil, nil)
	blockedSubsDesc = prometheus.NewDesc("lakegate_subscriptions_blocked_on_unacked",
		"Subscriptions served here whose dispatch is blocked by maxUnackedMessagesPerSubscription.", nil, nil)
)

// Collector exports the gateway's metrics (docs/metrics.md); register it
// once per registry.
func (s *Server) Collector() prometheus.Collector { return gatewayCollector{s} }

type gatewayCollector struct{ s *Server }

func (c gatewayCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.s.metrics.collectors() {
		m.Describe(ch)
	}
	for _, d := range []*prometheus.Desc{connectionsDesc, producersDesc, consumersDesc, topicsDesc, backlogDesc, unackedDesc, droppedDesc,
		blockedConsumersDesc, blockedSubsDesc} {
		ch <- d
	}
	for _, d := range pulsarDescs(&c.s.cfg) { // pulsar_metrics.go
		ch <- d
	}
	for _, m := range c.s.limitCollectors() { // limits.go
		m.Describe(ch)
	}
}

func (c gatewayCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	for _, m := range s.metrics.collectors() {
		m.Collect(ch)
	}
	for _, m := range s.limitCollectors() { // limits.go
		m.Collect(ch)
	}
	s.mu.Lock()
	conns := len(s.mu.sessions)
	s.mu.Unlock()
	topics := s.loadedTopics()
	// A stable choice of series under the cap: by topic, then name.
	sort.Slice(topics, func(i, j int) bool { return topics[i].Name() < topics[j].Name() })

	ctx, cancel := context.WithTimeout(s.ctx, metricsScrapeTimeout)
	defer cancel()
	// One fresh read of the logs' state serves the whole scrape (it lasts
	// at most metricsScrapeTimeout), not one per topic.
	ctx = lakestream.WithStaleReads(ctx, metricsScrapeTimeout)
	var producers, consumers, series, dropped, blockedConsumers, blockedSubs int
	for _, t := range topics {
		n, _ := t.Counts()
		producers += n
		if ctx.Err() != nil {
			continue // out of time: the rest are not exported
		}
		// Every subscription of the topic, with consumers or not: a
		// subscription's backlog is exported before its first consumer
		// connects (its cursor is read as the admin stats read it).
		names, err := t.SubscriptionNames(ctx)
		if err != nil {
			s.cfg.Logger.Warn("metrics: listing subscriptions", "topic", t.Name(), "err", err)
			continue
		}
		next := int64(-1)
		topicName := t.Name()
		for _, name := range names {
			if ctx.Err() != nil {
				dropped++
				continue
			}
			sub := t.LiveSubscription(name)
			var info actors.SubscriptionInfo
			if sub != nil {
				if info, err = subscriptionInfo(ctx, sub); err != nil {
					continue // stopped meanwhile, or busy past the scrape timeout
				}
				consumers += info.Consumers
				if info.BlockedOnUnacked {
					blockedSubs++
				}
				for _, cc := range info.ConsumerCounts {
					if cc.Blocked {
						blockedConsumers++
					}
				}
			}
			if series >= s.cfg.MetricsSubscriptionsMax {
				dropped++
				continue
			}
			var backlog int64
			if sub == nil {
				b, ok, err := t.IdleBacklog(ctx, name)
				if err != nil {
					s.cfg.Logger.Warn("metrics: counting a backlog", "topic", topicName, "subscription", name, "err", err)
				}
				if !ok || err != nil {
					continue
				}
				backlog = b.Records
			} else {
				if next < 0 {
					if next, err = t.Log().NextOffset(ctx); err != nil {
						s.cfg.Logger.Warn("metrics: reading a log head", "topic", topicName, "err", err)
						continue
					}
				}
				if backlog, err = t.Backlog(ctx, info, next); err != nil {
					s.cfg.Logger.Warn("metrics: counting a backlog", "topic", topicName, "subscription", name, "err", err)
					continue
				}
			}
			series++
			ch <- prometheus.MustNewConstMetric(unackedDesc, prometheus.GaugeValue, float64(info.Unacked), topicName, name)
			ch <- prometheus.MustNewConstMetric(backlogDesc, prometheus.GaugeValue, float64(backlog), topicName, name)
		}
	}
	ch <- prometheus.MustNewConstMetric(blockedConsumersDesc, prometheus.GaugeValue, float64(blockedConsumers))
	ch <- prometheus.MustNewConstMetric(blockedSubsDesc, prometheus.GaugeValue, float64(blockedSubs))
	ch <- prometheus.MustNewConstMetric(connectionsDesc, prometheus.GaugeValue, float64(conns))
	ch <- prometheus.MustNewConstMetric(producersDesc, prometheus.GaugeValue, float64(producers))
	ch <- prometheus.MustNewConstMetric(consumersDesc, prometheus.GaugeValue, float64(consumers))
	ch <- prometheus.MustNewConstMetric(topicsDesc, prometheus.GaugeValue, float64(len(topics)))
	ch <- prometheus.MustNewConstMetric(droppedDesc, prometheus.GaugeValue, float64(dropped))
	s.collectPulsar(ctx, ch, topics, conns) // pulsar_metrics.go
}
