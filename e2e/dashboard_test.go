package e2e

// The Grafana dashboard (deploy/grafana/lakegate-dashboard.json) against a
// loaded node: a node (engine on embedded etcd and file objects, gateway,
// its HTTP handler) carries a topic with a known state — a subscription
// with a backlog and unacknowledged messages, a Delta table behind the log
// by a known number of records — and a topic with steady traffic (a
// producer, a Shared consumer that negatively acknowledges each message
// once, so there are redeliveries). The test parses the dashboard, takes
// every metric each panel's expression queries and the labels it groups
// and filters by, scrapes /metrics over HTTP until every such series
// exists with those labels and a plausible value, and fails naming what
// is missing. A metric the dashboard queries that the test has no check
// for fails the test too.
//
// TestDashboardNamespaceLevel checks the namespace-level switch, and
// TestDashboardCluster the sums over three `lakegate serve` processes.
//
// Run: go test -p 1 -count=1 -run Dashboard ./e2e/

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	dto "github.com/prometheus/client_model/go"

	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/gateway"
	"github.com/lakegate/lakegate/internal/testnode"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/node"
	"github.com/lakegate/lakegate/tables"
)

// dashboardQuery is one metric a dashboard expression queries and the
// labels the expression groups or filters it by.
type dashboardQuery struct {
	metric string
	labels []string
	expr   string
}

var (
	promMetricRE  = regexp.MustCompile(`\b(?:pulsar|lakegate)_[a-z0-9_]+\b`)
	promByRE      = regexp.MustCompile(`\bby\s*\(([^)]*)\)`)
	promMatcherRE = regexp.MustCompile(`([a-z_]+)\s*(?:=~|!~|!=|=)\s*"`)
)

// dashboardQueries reads the dashboard JSON and returns every metric its
// panels' target expressions query.
func dashboardQueries(t *testing.T, path string) []dashboardQuery {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out []dashboardQuery
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			var labels []string
			for _, m := range promByRE.FindAllStringSubmatch(tg.Expr, -1) {
				for _, l := range strings.Split(m[1], ",") {
					if l = strings.TrimSpace(l); l != "" && l != "le" {
						labels = append(labels, l)
					}
				}
			}
			for _, m := range promMatcherRE.FindAllStringSubmatch(tg.Expr, -1) {
				labels = append(labels, m[1])
			}
			names := promMetricRE.FindAllString(tg.Expr, -1)
			if len(names) == 0 {
				t.Fatalf("panel %q: expression %q queries no pulsar_ or lakegate_ metric", p.Title, tg.Expr)
			}
			for _, name := range names {
				out = append(out, dashboardQuery{metric: name, labels: labels, expr: tg.Expr})
			}
		}
	}
	return out
}

// seriesOf returns the series of the family a dashboard metric names
// (a histogram's _bucket, _count and _sum name its family).
func seriesOf(fams map[string]*dto.MetricFamily, metric string) []*dto.Metric {
	if f := fams[metric]; f != nil {
		return f.GetMetric()
	}
	for _, suffix := range []string{"_bucket", "_count", "_sum"} {
		if base, ok := strings.CutSuffix(metric, suffix); ok {
			if f := fams[base]; f != nil && f.GetType() == dto.MetricType_HISTOGRAM {
				return f.GetMetric()
			}
		}
	}
	return nil
}

// labelOf is the value of label name of m ("" when absent).
func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func hasLabel(m *dto.Metric, name string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return true
		}
	}
	return false
}

// metricValue is a series' value (histograms: the sample count).
func metricValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return 0
}

// valueWhere is the value of the one series of metric whose labels are
// want; ok is false unless there is exactly one.
func valueWhere(fams map[string]*dto.MetricFamily, metric string, want map[string]string) (float64, bool) {
	var v float64
	n := 0
next:
	for _, m := range seriesOf(fams, metric) {
		for k, w := range want {
			if labelOf(m, k) != w {
				continue next
			}
		}
		v = metricValue(m)
		n++
	}
	return v, n == 1
}

func TestDashboardSeries(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	queries := dashboardQueries(t, "../deploy/grafana/lakegate-dashboard.json")

	var cfg node.Config
	cfg.Tables.CompactAge = time.Millisecond // chunks are eligible at once
	c := startNode(t, testnode.Config{Node: cfg, HTTP: true, Gateway: gateway.Config{MetricsConsumerLevel: true}})
	n, srv := c.node, c.tn.HTTP
	cl := c.client()

	// The topic with a known state.
	const known = "persistent://public/default/dash-known"
	const sent, acked, later, size = 60, 25, 15, 100
	cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: known, SubscriptionName: "sub",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, ReceiverQueueSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: known, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	payload := []byte(strings.Repeat("d", size))
	var logID int64
	for range sent {
		id, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: payload})
		if err != nil {
			t.Fatal(err)
		}
		logID = id.LedgerID()
	}
	for i := range sent {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if i < acked {
			if err := cons.Ack(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Everything so far into the topic's Delta table, then `later` more
	// records: the table lag is exactly `later` records.
	if _, err := n.Tables.Materialize(ctx, lakestream.LogID(logID), tables.Target{Root: "tables/public/default/dash-known", Partition: -1, Delta: true}); err != nil {
		t.Fatal(err)
	}
	for range later {
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: payload}); err != nil {
			t.Fatal(err)
		}
	}

	// The topic with steady traffic, until the test ends.
	const flow = "persistent://public/default/dash-flow"
	fcons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: flow, SubscriptionName: "flow", Type: pulsar.Shared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, NackRedeliveryDelay: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer fcons.Close()
	fp, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: flow, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer fp.Close()
	flowCtx, stopFlow := context.WithCancel(ctx)
	defer stopFlow()
	go func() {
		tick := time.NewTicker(20 * time.Millisecond) // the traffic's pace, not a wait
		defer tick.Stop()
		for flowCtx.Err() == nil {
			fp.SendAsync(flowCtx, &pulsar.ProducerMessage{Payload: payload}, func(pulsar.MessageID, *pulsar.ProducerMessage, error) {})
			select {
			case <-flowCtx.Done():
			case <-tick.C:
			}
		}
	}()
	go func() {
		for {
			m, err := fcons.Receive(flowCtx)
			if err != nil {
				return
			}
			if m.RedeliveryCount() == 0 {
				fcons.Nack(m) // once: a redelivery
			} else {
				_ = fcons.Ack(m)
			}
		}
	}()

	checks := dashboardChecks(known, flow, sent, acked, later, size)
	for _, q := range queries {
		if _, ok := checks[q.metric]; !ok {
			t.Errorf("the dashboard queries %s (%s) and this test has no check for it", q.metric, q.expr)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	var failures []string
	deadline := time.Now().Add(45 * time.Second)
	for {
		fams := scrape(t, srv.URL+"/metrics")
		failures = failures[:0]
		seen := map[string]bool{}
		for _, q := range queries {
			series := seriesOf(fams, q.metric)
			if len(series) == 0 {
				failures = append(failures, fmt.Sprintf("%s: no series (queried by %s)", q.metric, q.expr))
				continue
			}
			for _, m := range series {
				for _, l := range append([]string{"cluster"}, q.labels...) {
					if !hasLabel(m, l) && strings.HasPrefix(q.metric, "pulsar_") {
						failures = append(failures, fmt.Sprintf("%s: a series without label %s (queried by %s)", q.metric, l, q.expr))
					}
					if l != "cluster" && !hasLabel(m, l) && strings.HasPrefix(q.metric, "lakegate_") {
						failures = append(failures, fmt.Sprintf("%s: a series without label %s (queried by %s)", q.metric, l, q.expr))
					}
				}
			}
			if !seen[q.metric] {
				seen[q.metric] = true
				if err := checks[q.metric](fams); err != nil {
					failures = append(failures, fmt.Sprintf("%s: %v", q.metric, err))
				}
			}
		}
		if len(failures) == 0 || time.Now().After(deadline) {
			if len(failures) == 0 {
				names := make([]string, 0, len(seen))
				for name := range seen {
					names = append(names, name)
				}
				sort.Strings(names)
				t.Logf("%d series families checked: %s", len(names), strings.Join(names, " "))
			}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(200 * time.Millisecond): // scrape interval while polling
		}
	}
	if len(failures) > 0 {
		t.Fatalf("dashboard series after load:\n  %s", strings.Join(failures, "\n  "))
	}

	// Consumer level (MetricsConsumerLevel, Pulsar's
	// exposeConsumerLevelMetricsInPrometheus): the consumer's series, named.
	fams := scrape(t, srv.URL+"/metrics")
	var consumerSeries int
	for _, m := range seriesOf(fams, "pulsar_consumer_unacked_messages") {
		if labelOf(m, "topic") == known && labelOf(m, "subscription") == "sub" {
			consumerSeries++
			if labelOf(m, "consumer_name") == "" || labelOf(m, "consumer_id") == "" {
				t.Errorf("consumer series without consumer_name or consumer_id: %v", m.GetLabel())
			}
			if v := metricValue(m); v != float64(sent+later-acked) {
				t.Errorf("pulsar_consumer_unacked_messages = %v, want %d", v, sent+later-acked)
			}
		}
	}
	if consumerSeries != 1 {
		t.Errorf("%d pulsar_consumer_unacked_messages series of %s sub, want 1", consumerSeries, known)
	}
	for _, name := range []string{"pulsar_rate_in", "pulsar_rate_out", "pulsar_throughput_in", "pulsar_subscription_msg_rate_redeliver"} {
		v, _ := valueWhere(fams, name, map[string]string{"topic": flow})
		t.Logf("%s{topic=%q} = %v", name, flow, v)
	}
	for _, name := range []string{"pulsar_storage_size", "pulsar_msg_backlog", "lakegate_table_lag_records", "lakegate_table_lag_seconds", "pulsar_storage_write_latency_sum", "pulsar_storage_write_latency_count"} {
		v, _ := valueWhere(fams, name, map[string]string{"topic": known})
		t.Logf("%s{topic=%q} = %v", name, known, v)
	}
}

// TestDashboardNamespaceLevel: with Pulsar's
// exposeTopicLevelMetricsInPrometheus off (MetricsNamespaceLevelOnly)
// the topic families are summed per namespace — labels cluster and
// namespace only — and no subscription or consumer series are exported.
func TestDashboardNamespaceLevel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := startNode(t, testnode.Config{HTTP: true, Gateway: gateway.Config{MetricsNamespaceLevelOnly: true, MetricsConsumerLevel: true}})
	cl := c.client()
	const sent = 7
	for _, topic := range []string{"persistent://public/default/ns-a", "persistent://public/default/ns-b"} {
		cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		for range sent {
			if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("x")}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Nothing is acknowledged: the backlog is every message, once the
	// consumers' subscriptions are in place (they are: Subscribe returned).
	fams := scrape(t, c.tn.HTTP.URL+"/metrics")
	for _, name := range []string{"pulsar_msg_backlog", "pulsar_producers_count", "pulsar_storage_write_latency_count", "pulsar_topics_count"} {
		series := seriesOf(fams, name)
		if len(series) != 1 {
			t.Fatalf("%s: %d series, want 1 (public/default)", name, len(series))
		}
		for _, l := range series[0].GetLabel() {
			if l.GetName() != "cluster" && l.GetName() != "namespace" {
				t.Errorf("%s has label %s: namespace level has cluster and namespace only", name, l.GetName())
			}
		}
	}
	for name, want := range map[string]float64{"pulsar_msg_backlog": 2 * sent, "pulsar_producers_count": 2,
		"pulsar_storage_write_latency_count": 2 * sent, "pulsar_topics_count": 2} {
		if v, _ := valueWhere(fams, name, map[string]string{"namespace": "public/default"}); v != want {
			t.Errorf("%s{namespace=public/default} = %v, want %v", name, v, want)
		}
	}
	for _, name := range []string{"pulsar_subscription_back_log", "pulsar_consumer_unacked_messages"} {
		if n := len(seriesOf(fams, name)); n != 0 {
			t.Errorf("%s: %d series at namespace level, want none", name, n)
		}
	}
}

// dashboardChecks are the plausibility checks of every metric the
// dashboard queries, for the load of TestDashboardSeries.
func dashboardChecks(known, flow string, sent, acked, later, size int) map[string]func(map[string]*dto.MetricFamily) error {
	type fams = map[string]*dto.MetricFamily
	onTopic := func(metric, topic string, ok func(float64) bool, want string) func(fams) error {
		return func(f fams) error {
			v, found := valueWhere(f, metric, map[string]string{"topic": topic, "namespace": "public/default", "cluster": "standalone"})
			if !found || !ok(v) {
				return fmt.Errorf("%s = %v (found %v), want %s", topic, v, found, want)
			}
			return nil
		}
	}
	eq := func(want float64) func(float64) bool { return func(v float64) bool { return v == want } }
	positive := func(v float64) bool { return v > 0 }
	atLeast := func(min float64) func(float64) bool { return func(v float64) bool { return v >= min } }
	node := func(metric string, want map[string]string, ok func(float64) bool, desc string) func(fams) error {
		return func(f fams) error {
			var sum float64
			n := 0
		next:
			for _, m := range seriesOf(f, metric) {
				for k, w := range want {
					if labelOf(m, k) != w {
						continue next
					}
				}
				sum += metricValue(m)
				n++
			}
			if n == 0 || !ok(sum) {
				return fmt.Errorf("%v: %v over %d series, want %s", want, sum, n, desc)
			}
			return nil
		}
	}
	sub := func(metric string, want float64) func(fams) error {
		return func(f fams) error {
			v, found := valueWhere(f, metric, map[string]string{"topic": known, "subscription": "sub"})
			if !found || v != want {
				return fmt.Errorf("%s sub = %v (found %v), want %v", known, v, found, want)
			}
			return nil
		}
	}
	backlog := float64(sent + later - acked)
	checks := map[string]func(fams) error{
		"pulsar_topics_count":        node("pulsar_topics_count", map[string]string{"namespace": "public/default", "cluster": "standalone"}, eq(2), "2 (the two topics)"),
		"pulsar_producers_count":     onTopic("pulsar_producers_count", known, eq(1), "1"),
		"pulsar_consumers_count":     onTopic("pulsar_consumers_count", known, eq(1), "1"),
		"pulsar_subscriptions_count": onTopic("pulsar_subscriptions_count", known, eq(1), "1"),
		"pulsar_rate_in":             onTopic("pulsar_rate_in", flow, positive, "> 0"),
		"pulsar_rate_out":            onTopic("pulsar_rate_out", flow, positive, "> 0"),
		"pulsar_throughput_in":       onTopic("pulsar_throughput_in", flow, atLeast(float64(size)), "≥ one payload per second"),
		"pulsar_throughput_out":      onTopic("pulsar_throughput_out", flow, atLeast(float64(size)), "≥ one payload per second"),
		"pulsar_storage_size": onTopic("pulsar_storage_size", known, func(v float64) bool {
			return v >= float64((sent+later)*size) && v <= float64((sent+later)*size*2)
		}, "the payload bytes of the records (with their metadata)"),
		"pulsar_msg_backlog":                              onTopic("pulsar_msg_backlog", known, eq(backlog), fmt.Sprint(backlog)),
		"pulsar_subscription_back_log":                    sub("pulsar_subscription_back_log", backlog),
		"pulsar_subscription_unacked_messages":            sub("pulsar_subscription_unacked_messages", backlog),
		"pulsar_subscription_blocked_on_unacked_messages": sub("pulsar_subscription_blocked_on_unacked_messages", 0),
		"pulsar_subscription_msg_rate_redeliver":          node("pulsar_subscription_msg_rate_redeliver", map[string]string{"topic": flow, "subscription": "flow"}, positive, "> 0"),
		"pulsar_storage_write_latency_count":              onTopic("pulsar_storage_write_latency_count", known, eq(float64(sent+later)), fmt.Sprint(sent+later)),
		"pulsar_storage_write_latency_sum":                onTopic("pulsar_storage_write_latency_sum", known, positive, "> 0"),
		"pulsar_active_connections":                       node("pulsar_active_connections", nil, atLeast(1), "≥ 1"),
		"pulsar_connection_created_total_count":           node("pulsar_connection_created_total_count", nil, atLeast(1), "≥ 1"),
		"pulsar_connection_closed_total_count":            node("pulsar_connection_closed_total_count", nil, atLeast(0), "present"),
		"pulsar_connection_create_fail_count":             node("pulsar_connection_create_fail_count", nil, eq(0), "0 (no limit refused one)"),
		"lakegate_table_lag_records":                      onTopicLakegate("lakegate_table_lag_records", known, eq(float64(later)), fmt.Sprint(later)),
		"lakegate_table_lag_seconds":                      onTopicLakegate("lakegate_table_lag_seconds", known, func(v float64) bool { return v > 0 && v < 120 }, "the age of the first record after the table: > 0, < the test's 120 s"),
		"lakegate_materialization_runs_total":             node("lakegate_materialization_runs_total", map[string]string{"result": "materialized"}, eq(1), "1"),
		"lakegate_commit_log_fold_lag_records":            node("lakegate_commit_log_fold_lag_records", nil, atLeast(0), "present"),
		"lakegate_commit_log_fold_lag_seconds":            node("lakegate_commit_log_fold_lag_seconds", nil, func(v float64) bool { return v >= 0 && v < 60 }, "< 60 s (folds run every few seconds)"),
		"lakegate_object_request_seconds_bucket":          node("lakegate_object_request_seconds_bucket", map[string]string{"op": "put"}, atLeast(1), "≥ 1 PUT observed"),
		"lakegate_object_requests_total":                  node("lakegate_object_requests_total", map[string]string{"op": "put", "result": "ok"}, atLeast(1), "≥ 1"),
		"lakegate_etcd_txn_seconds_bucket":                node("lakegate_etcd_txn_seconds_bucket", nil, atLeast(1), "≥ 1 transaction observed"),
		"lakegate_etcd_txns_total":                        node("lakegate_etcd_txns_total", map[string]string{"result": "ok"}, atLeast(1), "≥ 1"),
		"pulsar_storage_write_latency_le_overflow":        latencyBuckets(known, sent+later),
	}
	// Every bucket exists on the topic; together they hold every append.
	for _, b := range []string{"0_5", "1", "5", "10", "20", "50", "100", "200", "1000"} {
		checks["pulsar_storage_write_latency_le_"+b] = latencyBuckets(known, sent+later)
	}
	return checks
}

// onTopicLakegate checks lakegate's topic-labelled gauge of topic.
func onTopicLakegate(metric, topic string, ok func(float64) bool, want string) func(map[string]*dto.MetricFamily) error {
	return func(f map[string]*dto.MetricFamily) error {
		v, found := valueWhere(f, metric, map[string]string{"topic": topic})
		if !found || !ok(v) {
			return fmt.Errorf("%s = %v (found %v), want %s", topic, v, found, want)
		}
		return nil
	}
}

// latencyBuckets checks that topic has every pulsar_storage_write_latency
// bucket and that they add up to appends.
func latencyBuckets(topic string, appends int) func(map[string]*dto.MetricFamily) error {
	return func(f map[string]*dto.MetricFamily) error {
		var sum float64
		for _, b := range []string{"0_5", "1", "5", "10", "20", "50", "100", "200", "1000", "overflow"} {
			v, found := valueWhere(f, "pulsar_storage_write_latency_le_"+b, map[string]string{"topic": topic})
			if !found {
				return fmt.Errorf("no pulsar_storage_write_latency_le_%s series of %s", b, topic)
			}
			sum += v
		}
		if sum != float64(appends) {
			return fmt.Errorf("the buckets of %s hold %v appends, want %d", topic, sum, appends)
		}
		return nil
	}
}

// TestDashboardCluster: three `lakegate serve` processes (real etcd, a
// shared file:// store) started with the consumer-level switch on the
// command line, a topic of 6 partitions spread over them. Each node
// exports only the partitions it serves, so every partition's series is on
// exactly one node and the sums over the nodes are the topic's: 60
// appends in the latency buckets, a backlog of 60 (nothing acknowledged),
// 6 topics, and the consumer series the flag turned on.
func TestDashboardCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	c := startLGCluster(t, 3, "file://"+filepath.ToSlash(t.TempDir()), "--metrics-expose-consumer-level-metrics-in-prometheus=true")
	ctx := ctxFor(t, 2*time.Minute)
	const name, parts, sent = "dash-cluster", 6, 60
	topic := "persistent://public/default/" + name
	if code := admDo(t, http.MethodPut, c.nodes[0].httpURL+"/admin/v2/persistent/public/default/"+name+"/partitions", "application/json", fmt.Sprint(parts), nil); code/100 != 2 {
		t.Fatalf("create %s: HTTP %d", name, code)
	}
	cl := c.client(c.serviceURL())
	cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", ReceiverQueueSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := range sent {
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Key: fmt.Sprint("k", i), Payload: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	for range sent {
		if _, err := cons.Receive(ctx); err != nil {
			t.Fatal(err)
		}
	}

	var failures []string
	deadline := time.Now().Add(60 * time.Second)
	for {
		failures = failures[:0]
		owners := map[string]int{} // partition → nodes exporting it
		sums := map[string]float64{}
		for _, n := range c.nodes {
			fams := scrape(t, n.httpURL+"/metrics")
			for _, m := range seriesOf(fams, "pulsar_storage_write_latency_count") {
				if tp := labelOf(m, "topic"); strings.HasPrefix(tp, topic+broker.PartitionSuffix) {
					owners[tp]++
					sums["latency_count"] += metricValue(m)
				}
			}
			for _, fam := range []string{"pulsar_subscription_back_log", "pulsar_consumer_unacked_messages"} {
				for _, m := range seriesOf(fams, fam) {
					if strings.HasPrefix(labelOf(m, "topic"), topic+broker.PartitionSuffix) && labelOf(m, "subscription") == "s" {
						sums[fam] += metricValue(m)
					}
				}
			}
			v, _ := valueWhere(fams, "pulsar_topics_count", map[string]string{"namespace": "public/default"})
			sums["topics"] += v
		}
		if len(owners) != parts {
			failures = append(failures, fmt.Sprintf("%d partitions exported, want %d: %v", len(owners), parts, owners))
		}
		for tp, n := range owners {
			if n != 1 {
				failures = append(failures, fmt.Sprintf("%s exported by %d nodes, want 1", tp, n))
			}
		}
		for k, want := range map[string]float64{"latency_count": sent, "pulsar_subscription_back_log": sent,
			"pulsar_consumer_unacked_messages": sent, "topics": parts} {
			if sums[k] != want {
				failures = append(failures, fmt.Sprintf("sum over nodes of %s = %v, want %v", k, sums[k], want))
			}
		}
		if len(failures) == 0 || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(250 * time.Millisecond): // scrape interval while polling
		}
	}
	if len(failures) > 0 {
		t.Fatalf("three nodes:\n  %s", strings.Join(failures, "\n  "))
	}
}
