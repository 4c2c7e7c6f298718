package e2e

// /metrics after a real load: a node (engine on embedded etcd and file
// objects, gateway on 127.0.0.1) and its HTTP handler (nodehttp,
// the same one `lakegate serve` mounts); pulsar-client-go produces and
// consumes, the engine compacts into a table, then the test scrapes
// /metrics over HTTP and checks every family of docs/metrics.md has
// non-zero values. Run: go test -p 1 -count=1 -run Metrics ./e2e/

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/lakegate/lakegate/engine"
	"github.com/lakegate/lakegate/gateway"
	"github.com/lakegate/lakegate/internal/testnode"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/node"
	"github.com/lakegate/lakegate/tables"
)

// scrape GETs url and parses the Prometheus text format.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return fams
}

// familyValue sums a family's series whose labels include want (counter,
// gauge: value; histogram: sample count).
func familyValue(f *dto.MetricFamily, want map[string]string) (sum float64, series int) {
	if f == nil {
		return 0, 0
	}
next:
	for _, m := range f.GetMetric() {
		for k, v := range want {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == k && l.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		series++
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum, series
}

func TestMetricsAfterLoad(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var cfg node.Config
	cfg.Tables.CompactAge = time.Millisecond // chunks are eligible at once
	cfg.Engine.CacheBytes = 1                // reads miss the cache: object GETs
	c := startNode(t, testnode.Config{Node: cfg, HTTP: true})
	n, srv := c.node, c.tn.HTTP

	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s", path, resp.Status)
		}
	}

	const topic = "persistent://public/default/metrics-load"
	const sent, acked, later = 200, 120, 30
	cl := c.client()
	cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "sub",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, ReceiverQueueSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	payload := []byte(strings.Repeat("m", 100))
	var logID int64
	for i := range sent {
		id, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: payload, Key: fmt.Sprint("k", i)})
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

	// Compact everything so far into a table, then produce more: the
	// compaction lag is then exactly `later` records.
	st, err := n.Tables.Materialize(ctx, lakestream.LogID(logID), tables.Target{Root: "tables/public/default/metrics-load", Partition: -1, Delta: true})
	if err != nil {
		t.Fatal(err)
	}
	if st.Records != sent {
		t.Fatalf("compacted %d records, want %d", st.Records, sent)
	}
	// A second call finds nothing new, reading the table's log.
	if _, err := n.Tables.Materialize(ctx, lakestream.LogID(logID), tables.Target{Root: "tables/public/default/metrics-load", Partition: -1, Delta: true}); !errors.Is(err, engine.ErrNothingToCompact) {
		t.Fatalf("second compaction: %v, want ErrNothingToCompact", err)
	}
	for range later {
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: payload}); err != nil {
			t.Fatal(err)
		}
	}

	type check struct {
		family string
		labels map[string]string
		min    float64 // the sum must be at least this (and > 0)
	}
	sub := map[string]string{"topic": topic, "subscription": "sub"}
	checks := []check{
		{"lakegate_published_messages_total", nil, sent + later},
		{"lakegate_published_bytes_total", nil, (sent + later) * 100},
		{"lakegate_publish_latency_seconds", nil, sent + later},
		{"lakegate_dispatched_messages_total", nil, sent},
		{"lakegate_dispatched_bytes_total", nil, sent * 100},
		{"lakegate_connections", nil, 1},
		{"lakegate_connections_opened_total", nil, 1},
		{"lakegate_producers", nil, 1},
		{"lakegate_consumers", nil, 1},
		{"lakegate_subscription_backlog_messages", sub, sent + later - acked},
		{"lakegate_subscription_unacked_entries", sub, sent - acked},
		{"lakegate_wal_flush_seconds", map[string]string{"result": "ok"}, 1},
		{"lakegate_wal_flush_bytes", nil, 1},
		{"lakegate_object_requests_total", map[string]string{"op": "put", "result": "ok"}, 1},
		{"lakegate_object_requests_total", map[string]string{"op": "get", "result": "ok"}, 1},
		{"lakegate_object_request_seconds", map[string]string{"op": "put"}, 1},
		{"lakegate_etcd_txn_seconds", nil, 1},
		{"lakegate_etcd_txns_total", map[string]string{"result": "ok"}, 1},
		{"lakegate_materialization_runs_total", map[string]string{"result": "materialized"}, 1},
		{"lakegate_materialization_runs_total", map[string]string{"result": "nothing"}, 1},
		{"lakegate_materialization_seconds", nil, 1},
		{"lakegate_engine_materialized_records_total", nil, sent},
		{"lakegate_engine_materialized_bytes_total", nil, 1},
		{"lakegate_materialization_lag_records", nil, later},
		// The old names, aliases for one release (docs/metrics.md).
		{"lakegate_compaction_runs_total", map[string]string{"result": "compacted"}, 1},
		{"lakegate_compaction_runs_total", map[string]string{"result": "nothing"}, 1},
		{"lakegate_compaction_seconds", nil, 1},
		{"lakegate_engine_compacted_records_total", nil, sent},
		{"lakegate_engine_compacted_bytes_total", nil, 1},
		{"lakegate_compaction_lag_records", nil, later},
		{"lakegate_engine_appends_total", nil, sent + later},
	}
	// Error and conflict series exist (zero on a healthy run).
	present := []check{
		{"lakegate_object_requests_total", map[string]string{"op": "put", "result": "error"}, 0},
		{"lakegate_object_requests_total", map[string]string{"op": "get", "result": "error"}, 0},
		{"lakegate_etcd_txns_total", map[string]string{"result": "conflict"}, 0},
		{"lakegate_etcd_txns_total", map[string]string{"result": "error"}, 0},
		{"lakegate_publish_errors_total", nil, 0},
		{"lakegate_dispatch_deferred_entries_total", nil, 0},
		{"lakegate_connections_overflowed_total", nil, 0},
		{"lakegate_subscription_series_dropped", nil, 0},
	}

	// Acks and cursor state travel asynchronously: poll until the gauges
	// settle, with a deadline.
	var fams map[string]*dto.MetricFamily
	var failures []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		fams = scrape(t, srv.URL+"/metrics")
		failures = failures[:0]
		for _, ck := range checks {
			v, series := familyValue(fams[ck.family], ck.labels)
			if series == 0 || v <= 0 || v < ck.min {
				failures = append(failures, fmt.Sprintf("%s %v = %v over %d series, want ≥ %v and > 0", ck.family, ck.labels, v, series, ck.min))
			}
		}
		for _, ck := range present {
			if _, series := familyValue(fams[ck.family], ck.labels); series == 0 {
				failures = append(failures, fmt.Sprintf("%s %v: no series", ck.family, ck.labels))
			}
		}
		// Exact values where the load fixes them. The client sends its
		// acks in groups (every 100 ms), so the backlog may still count
		// them at the first scrapes.
		if v, _ := familyValue(fams["lakegate_subscription_backlog_messages"], sub); v != sent+later-acked {
			failures = append(failures, fmt.Sprintf("backlog = %v, want %d", v, sent+later-acked))
		}
		if v, _ := familyValue(fams["lakegate_compaction_lag_records"], nil); v != later {
			failures = append(failures, fmt.Sprintf("compaction lag = %v, want %d", v, later))
		}
		if len(failures) == 0 || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(100 * time.Millisecond): // scrape interval while polling
		}
	}
	if len(failures) > 0 {
		t.Fatalf("after load:\n  %s", strings.Join(failures, "\n  "))
	}
	for _, ck := range checks {
		v, _ := familyValue(fams[ck.family], ck.labels)
		t.Logf("%s %v = %v", ck.family, ck.labels, v)
	}
}

// TestMetricsSubscriptionSeriesCap: with MetricsSubscriptionsMax 2 and
// three live subscriptions, a scrape exports two backlog series (the first
// by topic and name) and reports one dropped.
func TestMetricsSubscriptionSeriesCap(t *testing.T) {
	c := startNode(t, testnode.Config{Gateway: gateway.Config{MetricsSubscriptionsMax: 2}, HTTP: true})
	srv := c.tn.HTTP

	cl := c.client()
	const topic = "persistent://public/default/metrics-cap"
	for _, sub := range []string{"c", "a", "b"} {
		cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: sub})
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
	}
	fams := scrape(t, srv.URL+"/metrics")
	var subs []string
	for _, m := range fams["lakegate_subscription_backlog_messages"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "subscription" {
				subs = append(subs, l.GetValue())
			}
		}
	}
	if strings.Join(subs, ",") != "a,b" {
		t.Errorf("backlog series for %v, want a,b", subs)
	}
	if v, _ := familyValue(fams["lakegate_subscription_series_dropped"], nil); v != 1 {
		t.Errorf("dropped = %v, want 1", v)
	}
	if v, _ := familyValue(fams["lakegate_consumers"], nil); v != 3 {
		t.Errorf("consumers = %v, want 3 (counted past the cap)", v)
	}
}

// TestMetricsPulsarSeriesCaps: with MetricsTopicsMax 2 and three topics,
// the Pulsar topic families cover the first two by name and one topic is
// reported dropped (pulsar_topics_count still counts three); with
// MetricsSubscriptionsMax 2 and three subscriptions on the first topic,
// two pulsar_subscription_* series are exported and one is dropped.
func TestMetricsPulsarSeriesCaps(t *testing.T) {
	c := startNode(t, testnode.Config{Gateway: gateway.Config{MetricsTopicsMax: 2, MetricsSubscriptionsMax: 2}, HTTP: true})
	cl := c.client()
	for _, topic := range []string{"cap-c", "cap-a", "cap-b"} {
		subs := []string{"s"}
		if topic == "cap-a" {
			subs = []string{"z", "x", "y"}
		}
		for _, sub := range subs {
			cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: "persistent://public/default/" + topic, SubscriptionName: sub})
			if err != nil {
				t.Fatal(err)
			}
			defer cons.Close()
		}
	}
	fams := scrape(t, c.tn.HTTP.URL+"/metrics")
	labels := func(family, label string) string {
		var vs []string
		for _, m := range fams[family].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					vs = append(vs, strings.TrimPrefix(l.GetValue(), "persistent://public/default/"))
				}
			}
		}
		return strings.Join(vs, ",")
	}
	if got := labels("pulsar_rate_in", "topic"); got != "cap-a,cap-b" {
		t.Errorf("pulsar_rate_in topics %q, want cap-a,cap-b", got)
	}
	if got := labels("pulsar_subscription_back_log", "subscription"); got != "x,y" {
		t.Errorf("pulsar_subscription_back_log subscriptions %q, want x,y (cap-a's first two; cap-b's dropped too)", got)
	}
	for level, want := range map[string]float64{"topic": 1, "subscription": 2} {
		if v, _ := familyValue(fams["lakegate_metrics_series_dropped"], map[string]string{"level": level}); v != want {
			t.Errorf("lakegate_metrics_series_dropped{level=%q} = %v, want %v", level, v, want)
		}
	}
	if v, _ := familyValue(fams["pulsar_topics_count"], nil); v != 3 {
		t.Errorf("pulsar_topics_count = %v, want 3 (not capped)", v)
	}
}
