package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/lakegate/lakegate/internal/testnode"
	"github.com/lakegate/lakegate/node"
)

// kv is a received message: key, value, and the offset of its record
// (entry id + batch index: docs/message-ids.md).
type kv struct {
	key, value string
	record     int64
}

func recordOf(id pulsar.MessageID) int64 { return id.EntryID() + int64(max(id.BatchIdx(), 0)) }

// readAll reads messages from a reader until n were read.
func readAll(t *testing.T, ctx context.Context, r pulsar.Reader, n int) []kv {
	t.Helper()
	var out []kv
	for len(out) < n {
		m, err := r.Next(ctx)
		if err != nil {
			t.Fatalf("read (after %v): %v", out, err)
		}
		out = append(out, kv{m.Key(), string(m.Payload()), recordOf(m.ID())})
	}
	return out
}

func compactAndWait(t *testing.T, ctx context.Context, a pulsaradmin.Client, tn utils.TopicName) {
	t.Helper()
	if err := a.Topics().Compact(tn); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the compaction to succeed", func() bool {
		st, err := a.Topics().CompactStatus(tn)
		if err == nil && st.Status == utils.ERROR {
			t.Fatalf("compaction failed: %s", st.LastError)
		}
		return err == nil && st.Status == utils.SUCCESS
	})
}

// TestCompactedTopic: after `topics compact`, a readCompacted reader or
// consumer sees the latest message of each key up to the compaction
// horizon — tombstoned and keyless messages gone, batches thinned to their
// surviving messages, each message at its original record offset — then
// the tail; a reader
// without readCompacted sees everything. A second compaction builds on the
// first; the compacted view survives a restart; the compaction threshold
// policy compacts by itself.
func TestCompactedTopic(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	c := startPolicyNode(t, testnode.Config{Node: node.Config{DataDir: dir}})
	a := admClient(t, admServer(t, c))
	const topic = "persistent://public/default/compacted"
	tn := admTopic(t, topic)
	cl := c.client()
	// Batched: several keys share an entry, so compaction keeps parts of
	// batches.
	prod, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, BatchingMaxMessages: 4, BatchingMaxPublishDelay: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	send := func(key, value string) {
		msg := &pulsar.ProducerMessage{Key: key, Payload: []byte(value)}
		if key == "" {
			msg = &pulsar.ProducerMessage{Payload: []byte(value)}
		}
		prod.SendAsync(ctx, msg, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			if err != nil {
				t.Errorf("send %s=%s: %v", key, value, err)
			}
		})
	}
	for _, m := range [][2]string{{"k1", "v1"}, {"k2", "v1"}, {"k1", "v2"}, {"k3", "v1"},
		{"k2", ""}, {"", "no-key"}, {"k1", "v3"}, {"k4", "v1"}, {"k4", "v2"}} {
		send(m[0], m[1])
	}
	if err := prod.FlushWithCtx(ctx); err != nil {
		t.Fatal(err)
	}
	full, err := cl.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	all := readAll(t, ctx, full, 9)
	full.Close()
	recordOfKV := map[string]int64{} // key=value → record offset
	for _, m := range all {
		recordOfKV[m.key+"="+m.value] = m.record
	}

	if st, err := a.Topics().CompactStatus(tn); err != nil || st.Status != utils.NOTRUN {
		t.Fatalf("status before any compaction: %+v, %v", st, err)
	}
	compactAndWait(t, ctx, a, tn)
	send("k2", "v9") // after the horizon
	send("k3", "v2")
	if err := prod.FlushWithCtx(ctx); err != nil {
		t.Fatal(err)
	}

	wantView := []string{"k1=v3", "k4=v2", "k2=v9", "k3=v2"}
	// k3=v1 is superseded by k3=v2 only after the horizon: the compacted
	// part still has it.
	wantCompacted := append([]string{"k3=v1"}, wantView...)
	// Offset order: k3=v1 (4th) before k1=v3 (7th) and k4=v2 (9th).
	check := func(what string, got []kv, want []string) {
		t.Helper()
		var s []string
		for _, m := range got {
			s = append(s, m.key+"="+m.value)
			if rec, ok := recordOfKV[m.key+"="+m.value]; ok && rec != m.record {
				t.Fatalf("%s: %s is record %d, want its original record %d", what, m.key+"="+m.value, m.record, rec)
			}
		}
		if !slices.Equal(s, want) {
			t.Fatalf("%s read %v, want %v", what, s, want)
		}
	}
	r, err := cl.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID(), ReadCompacted: true})
	if err != nil {
		t.Fatal(err)
	}
	check("a readCompacted reader", readAll(t, ctx, r, len(wantCompacted)), wantCompacted)
	r.Close()

	cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "compacted", ReadCompacted: true,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	var got []kv
	for range wantCompacted {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, kv{m.Key(), string(m.Payload()), recordOf(m.ID())})
		cons.Ack(m)
	}
	check("a readCompacted consumer", got, wantCompacted)
	waitFor(t, ctx, "the compacted consumer's backlog to be 0", func() bool {
		st, err := a.Topics().GetStats(tn)
		return err == nil && st.Subscriptions["compacted"].MsgBacklog == 0
	})
	cons.Close()
	if _, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "shared-compacted", Type: pulsar.Shared, ReadCompacted: true}); err == nil {
		t.Fatal("a Shared readCompacted consumer was accepted")
	}

	// A second compaction takes in what came after the first.
	compactAndWait(t, ctx, a, tn)
	var ts struct {
		Compaction struct {
			LastCompactionSucceedTimestamp int64 `json:"lastCompactionSucceedTimestamp"`
		} `json:"compaction"`
	}
	if code := admDo(t, "GET", c.tn.HTTP.URL+"/admin/v2/persistent/public/default/compacted/stats", "", "", &ts); code != 200 || ts.Compaction.LastCompactionSucceedTimestamp == 0 {
		t.Fatalf("compaction stats %d %+v", code, ts)
	}
	c.stop()

	// The compacted view survives a restart (any owner reads it).
	c = startPolicyNode(t, testnode.Config{Node: node.Config{DataDir: dir}})
	a = admClient(t, admServer(t, c))
	cl = c.client()
	r, err = cl.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID(), ReadCompacted: true})
	if err != nil {
		t.Fatal(err)
	}
	check("a readCompacted reader after a restart", readAll(t, ctx, r, len(wantView)), wantView)
	r.Close()

	// The threshold policy: one byte past the horizon starts a compaction.
	if err := a.Topics().SetCompactionThreshold(tn, 1); err != nil {
		t.Fatal(err)
	}
	prod, err = cl.CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Key: "k1", Payload: []byte("v4")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "a compaction started by the threshold", func() bool {
		st, err := a.Topics().CompactStatus(tn)
		return err == nil && st.Status == utils.SUCCESS
	})
	r, err = cl.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID(), ReadCompacted: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got = readAll(t, ctx, r, 4)
	var keys []string
	for _, m := range got {
		keys = append(keys, fmt.Sprintf("%s=%s", m.key, m.value))
	}
	if !slices.Equal(keys, []string{"k4=v2", "k2=v9", "k3=v2", "k1=v4"}) {
		t.Fatalf("after the threshold compaction: %v", keys)
	}
}
