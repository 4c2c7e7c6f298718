package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/gateway"
	"github.com/lakegate/lakegate/internal/testnode"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/node"
)

// Tests of retention, message TTL and backlog quotas (gateway/policies.go,
// docs/policies.md), set through the admin API with pulsaradmin and met by
// real Go clients. The node checks policies every policyTick; "the check
// ran and did nothing" is observed through lakegate_policy_checks_total,
// never by sleeping.

const policyTick = 100 * time.Millisecond

func startPolicyNode(t *testing.T, cfg testnode.Config) *cluster {
	t.Helper()
	cfg.HTTP = true
	cfg.Gateway.PolicyCheckInterval = policyTick
	return startNode(t, cfg)
}

// policyChecks is lakegate_policy_checks_total.
func policyChecks(t *testing.T, c *cluster) float64 {
	t.Helper()
	v, _ := familyValue(scrape(t, c.tn.HTTP.URL+"/metrics")["lakegate_policy_checks_total"], nil)
	return v
}

// afterChecks waits until n more policy checks have completed.
func afterChecks(t *testing.T, ctx context.Context, c *cluster, n float64) {
	t.Helper()
	want := policyChecks(t, c) + n
	waitFor(t, ctx, fmt.Sprintf("%v policy checks", n), func() bool { return policyChecks(t, c) >= want })
}

func firstOffset(t *testing.T, ctx context.Context, c *cluster, stream string) int64 {
	t.Helper()
	lg, err := c.catalog.OpenLog(ctx, lakestream.MustParseStreamID(stream), 0)
	if err != nil {
		t.Fatal(err)
	}
	f, err := lg.FirstOffset(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func produceNumbered(t *testing.T, ctx context.Context, p pulsar.Producer, from, n int, size int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		payload := []byte(fmt.Sprintf("%-*d", size, i))
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: payload}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
}

// TestRetentionAndTTL: a retention policy trims what every durable
// subscription acknowledged — never more: an idle subscription created by
// the admin API holds everything, a consumer's unacknowledged messages
// stay and are redelivered —, and a message TTL expires what nobody
// acknowledged, which retention then trims.
func TestRetentionAndTTL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := startPolicyNode(t, testnode.Config{})
	a := admClient(t, admServer(t, c))
	const name = "persistent://public/default/retained"
	tn := admTopic(t, name)
	if err := a.Topics().Create(tn, 0); err != nil {
		t.Fatal(err)
	}
	if err := a.Subscriptions().Create(tn, "idle", utils.Earliest); err != nil {
		t.Fatal(err)
	}
	cl := c.client()
	cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: name, SubscriptionName: "s", Type: pulsar.Shared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	prod, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: name, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	produceNumbered(t, ctx, prod, 0, 30, 10)
	for i := range 30 {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if i < 20 {
			cons.Ack(m) // the last 10 stay unacknowledged
		}
	}
	if err := a.Topics().SetRetention(tn, utils.RetentionPolicies{RetentionTimeInMinutes: 0, RetentionSizeInMB: 0}); err != nil {
		t.Fatal(err)
	}
	if r, err := a.Topics().GetRetention(tn, false); err != nil || r == nil || r.RetentionSizeInMB != 0 {
		t.Fatalf("retention read back: %+v, %v", r, err)
	}
	afterChecks(t, ctx, c, 3)
	if f := firstOffset(t, ctx, c, "public/default/retained"); f != 0 {
		t.Fatalf("trimmed to %d while the idle subscription has acknowledged nothing", f)
	}
	if err := a.Subscriptions().Delete(tn, "idle"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the trim up to what subscription s acknowledged", func() bool {
		return firstOffset(t, ctx, c, "public/default/retained") == 20
	})
	afterChecks(t, ctx, c, 2)
	if f := firstOffset(t, ctx, c, "public/default/retained"); f != 20 {
		t.Fatalf("trimmed to %d, past the unacknowledged message 20", f)
	}
	// The unacknowledged messages are still there: redelivered.
	cons.Close()
	cons, err = cl.Subscribe(pulsar.ConsumerOptions{Topic: name, SubscriptionName: "s", Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for i := range 10 {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(m.Payload())); got != fmt.Sprint(20+i) {
			t.Fatalf("redelivered %s, want %d", got, 20+i)
		}
	}
	// TTL: nothing is acknowledged, yet the messages expire, and retention
	// then trims them.
	if err := a.Topics().SetMessageTTL(tn, 1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the TTL expiry of every message", func() bool {
		st, err := a.Topics().GetStats(tn)
		return err == nil && st.Subscriptions["s"].MsgBacklog == 0
	})
	waitFor(t, ctx, "the trim of the expired messages", func() bool {
		return firstOffset(t, ctx, c, "public/default/retained") == 30
	})
	// The counter moves just after the trim is applied: wait for it too.
	waitFor(t, ctx, "two retention_trim actions counted", func() bool {
		v, _ := familyValue(scrape(t, c.tn.HTTP.URL+"/metrics")["lakegate_policy_actions_total"], map[string]string{"action": "retention_trim"})
		return v >= 2
	})
	// Namespace policies: set, read back in the namespace policies.
	ns, _ := utils.GetNamespaceName("public/default")
	if err := a.Namespaces().SetRetention(ns.String(), utils.RetentionPolicies{RetentionTimeInMinutes: 60, RetentionSizeInMB: 100}); err != nil {
		t.Fatal(err)
	}
	pol, err := a.Namespaces().GetPolicies(ns.String())
	if err != nil || pol.RetentionPolicies == nil || pol.RetentionPolicies.RetentionTimeInMinutes != 60 {
		t.Fatalf("namespace policies %+v, %v", pol, err)
	}
	err = a.Topics().SetRetention(tn, utils.RetentionPolicies{RetentionTimeInMinutes: -2, RetentionSizeInMB: 0})
	admWantCode(t, err, 412)
}

// TestRetentionKeepsWhatTheTableNeeds: on a materialized stream, retention
// trims the log only below what compaction has put into the table; the
// table keeps every row.
func TestRetentionKeepsWhatTheTableNeeds(t *testing.T) { retentionKeepsTable(t, true) }

// TestDefaultRetentionKeepsWhatTheTableNeeds: the same under the node's
// default retention (Pulsar's 0/0), no policy set: the table is a
// consumer too.
func TestDefaultRetentionKeepsWhatTheTableNeeds(t *testing.T) { retentionKeepsTable(t, false) }

// retentionKeepsTable runs TestRetentionKeepsWhatTheTableNeeds, with a
// topic retention policy of 0/0 or (explicit false) none.
func retentionKeepsTable(t *testing.T, explicit bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var ncfg node.Config
	ncfg.Tables.CompactAge = 200 * time.Millisecond
	on := true
	c := startPolicyNode(t, testnode.Config{
		Node:            ncfg,
		Materialization: &lakestream.TableMaterializationPolicy{Enabled: &on},
		Materializer: &actors.MaterializationWorkerOptions{
			ScanInterval: 200 * time.Millisecond,
			Policy:       actors.MaterializationPolicy{Interval: 100 * time.Millisecond, BackoffMin: 100 * time.Millisecond, BackoffMax: time.Second},
		},
	})
	a := admClient(t, admServer(t, c))
	const name = "persistent://public/default/retained-table"
	id := lakestream.MustParseStreamID("public/default/retained-table")
	prod, err := c.client().CreateProducer(pulsar.ProducerOptions{Topic: name, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if explicit {
		if err := a.Topics().SetRetention(admTopic(t, name), utils.RetentionPolicies{RetentionTimeInMinutes: 0, RetentionSizeInMB: 0}); err != nil {
			t.Fatal(err)
		}
	}
	const n = 40
	produceNumbered(t, ctx, prod, 0, n, 8)
	s, err := c.catalog.Stream(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for {
		first := firstOffset(t, ctx, c, id.String())
		info, err := s.Table().Info(ctx)
		var end int64
		if err == nil {
			end = info.Partitions[0].CompactedEnd
		} else if !errors.Is(err, lakestream.ErrNotMaterialized) {
			t.Fatal(err)
		}
		// Read the table after the log: the table only grows, so a first
		// offset past this end was past the table when it was read.
		if first > end {
			t.Fatalf("log trimmed to %d, past the table's end %d", first, end)
		}
		if first == n {
			rows := info.Formats[0].Rows
			for _, f := range info.Formats {
				rows = min(rows, f.Rows)
			}
			if rows != n {
				t.Fatalf("table has %d rows after the trim, want %d", rows, n)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("log first offset %d, table end %d", first, end)
		}
		time.Sleep(20 * time.Millisecond) // polling observable states
	}
}

// quotaTopic creates name with a subscription "slow" at the earliest
// position, fills it with n messages of size bytes from a producer it
// returns, and then sets the given backlog quota on it.
func quotaTopic(t *testing.T, ctx context.Context, a pulsaradmin.Client, cl pulsar.Client, name string, n, size int,
	q utils.BacklogQuota, typ utils.BacklogQuotaType) (utils.TopicName, pulsar.Producer) {
	t.Helper()
	tn := admTopic(t, name)
	if err := a.Topics().Create(tn, 0); err != nil {
		t.Fatal(err)
	}
	if err := a.Subscriptions().Create(tn, "slow", utils.Earliest); err != nil {
		t.Fatal(err)
	}
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: name, DisableBatching: true, SendTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	produceNumbered(t, ctx, p, 0, n, size)
	if err := a.Topics().SetBacklogQuota(tn, q, typ); err != nil {
		t.Fatal(err)
	}
	return tn, p
}

// drain receives and acknowledges n messages of subscription sub.
func drain(t *testing.T, ctx context.Context, cl pulsar.Client, topic, sub string, n int) []string {
	t.Helper()
	cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: sub, AckWithResponse: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var got []string
	for range n {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatalf("drain %s after %v: %v", sub, got, err)
		}
		got = append(got, strings.TrimSpace(string(m.Payload())))
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
	return got
}

// TestBacklogQuotaPolicies: a subscription over a destination_storage
// quota blocks producers (producer_exception: sends fail and new producers
// are refused; producer_request_hold: new producers are refused with the
// retryable error and a held send goes through once the backlog is
// consumed) or loses its oldest messages (consumer_backlog_eviction); a
// message_age quota evicts by age.
func TestBacklogQuotaPolicies(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := startPolicyNode(t, testnode.Config{Gateway: gateway.Config{}})
	a := admClient(t, admServer(t, c))
	cl := c.client()
	const limit = 1000 // bytes; 20 messages of 100 bytes exceed it

	t.Run("producer_exception", func(t *testing.T) {
		const name = "persistent://public/default/quota-exception"
		tn, p := quotaTopic(t, ctx, a, cl, name, 20, 100, utils.NewBacklogQuota(limit, 0, utils.ProducerException), utils.DestinationStorage)
		waitFor(t, ctx, "the producer disconnected", func() bool {
			st, err := a.Topics().GetStats(tn)
			return err == nil && len(st.Publishers) == 0
		})
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("blocked")}); err == nil || !strings.Contains(err.Error(), "ProducerBlockedQuotaExceededException") {
			t.Fatalf("send over the quota: %v, want ProducerBlockedQuotaExceededException", err)
		}
		if _, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: name}); err == nil || !strings.Contains(err.Error(), "ProducerBlockedQuotaExceededException") {
			t.Fatalf("new producer over the quota: %v", err)
		}
		drain(t, ctx, cl, name, "slow", 20)
		p2, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: name})
		if err != nil {
			t.Fatalf("producer after the backlog was consumed: %v", err)
		}
		p2.Close()
	})

	t.Run("producer_request_hold", func(t *testing.T) {
		const name = "persistent://public/default/quota-hold"
		tn, p := quotaTopic(t, ctx, a, cl, name, 20, 100, utils.NewBacklogQuota(limit, 0, utils.ProducerRequestHold), utils.DestinationStorage)
		waitFor(t, ctx, "the producer disconnected", func() bool {
			st, err := a.Topics().GetStats(tn)
			return err == nil && len(st.Publishers) == 0
		})
		var err error
		held := make(chan error, 1)
		p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: []byte("held")}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) { held <- err })
		// Another client is refused with the retryable error.
		other := c.client()
		_, err = other.CreateProducer(pulsar.ProducerOptions{Topic: name})
		if err == nil || !strings.Contains(err.Error(), "ProducerBlockedQuotaExceededError") {
			t.Fatalf("new producer over a hold quota: %v, want ProducerBlockedQuotaExceededError", err)
		}
		select {
		case err := <-held:
			t.Fatalf("the held send completed while the quota was exceeded: %v", err)
		default:
		}
		got := drain(t, ctx, cl, name, "slow", 20)
		if got[0] != "0" {
			t.Fatalf("drained %v", got)
		}
		select {
		case err := <-held:
			if err != nil {
				t.Fatalf("held send: %v", err)
			}
		case <-ctx.Done():
			t.Fatal("the held send never completed")
		}
		if got := drain(t, ctx, cl, name, "slow", 1); got[0] != "held" {
			t.Fatalf("after the hold got %v", got)
		}
	})

	t.Run("consumer_backlog_eviction", func(t *testing.T) {
		const name = "persistent://public/default/quota-evict"
		tn, _ := quotaTopic(t, ctx, a, cl, name, 20, 100, utils.NewBacklogQuota(limit, 0, utils.ConsumerBacklogEviction), utils.DestinationStorage)
		var backlog int64
		waitFor(t, ctx, "the backlog evicted down to the quota", func() bool {
			st, err := a.Topics().GetStats(tn)
			ss := st.Subscriptions["slow"]
			backlog = ss.MsgBacklog
			return err == nil && ss.BacklogSize <= limit && ss.MsgBacklog < 20
		})
		if backlog == 0 {
			t.Fatal("eviction dropped the whole backlog; the newest messages fit the quota")
		}
		if got := drain(t, ctx, cl, name, "slow", 1); got[0] != fmt.Sprint(20-backlog) {
			t.Fatalf("after eviction the oldest message is %s, want %d (the newest %d fit the quota)", got[0], 20-backlog, backlog)
		}
		m, err := a.Topics().GetBacklogQuotaMap(tn, false)
		if err != nil || m[utils.DestinationStorage].Policy != utils.ConsumerBacklogEviction {
			t.Fatalf("quota map %+v, %v", m, err)
		}
	})

	t.Run("message_age", func(t *testing.T) {
		const name = "persistent://public/default/quota-age"
		start := time.Now()
		tn, _ := quotaTopic(t, ctx, a, cl, name, 5, 10, utils.NewBacklogQuota(0, 1, utils.ConsumerBacklogEviction), utils.MessageAge)
		waitFor(t, ctx, "the backlog evicted by age", func() bool {
			st, err := a.Topics().GetStats(tn)
			return err == nil && st.Subscriptions["slow"].MsgBacklog == 0
		})
		if d := time.Since(start); d < time.Second {
			t.Fatalf("evicted after %v, before the messages were 1 s old", d)
		}
		admWantCode(t, a.Topics().SetBacklogQuota(tn, utils.NewBacklogQuota(0, 0, "bogus"), utils.MessageAge), 400)
	})
}
