package e2e

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/lakegate/lakegate/internal/testnode"
	"github.com/lakegate/lakegate/lakestream"
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

// compactionStatsJSON is the compaction record of Pulsar's topic stats.
type compactionStatsJSON struct {
	LastCompactionRemovedEventCount   int64 `json:"lastCompactionRemovedEventCount"`
	LastCompactionSucceedTimestamp    int64 `json:"lastCompactionSucceedTimestamp"`
	LastCompactionFailedTimestamp     int64 `json:"lastCompactionFailedTimestamp"`
	LastCompactionDurationTimeInMills int64 `json:"lastCompactionDurationTimeInMills"`
}

// compactionStats reads the compaction record of the topic stats at url.
func compactionStats(t *testing.T, url string) compactionStatsJSON {
	t.Helper()
	var ts struct {
		Compaction compactionStatsJSON `json:"compaction"`
	}
	if code := httpJSON(t, "GET", url, &ts); code != 200 {
		t.Fatalf("GET %s: HTTP %d", url, code)
	}
	return ts.Compaction
}

// TestCompactedTopic: after `topics compact`, a readCompacted reader or
// consumer sees the latest message of each key up to the compaction
// horizon — tombstoned and keyless messages gone, batches thinned to their
// surviving messages, each message at its original record offset — then
// the tail; a reader
// without readCompacted sees everything. A second compaction builds on the
// first; the compacted view, the compaction status and stats survive a
// restart; the compaction threshold policy compacts by itself.
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
	statsURL := c.tn.HTTP.URL + "/admin/v2/persistent/public/default/compacted/stats"
	before := compactionStats(t, statsURL)
	if before.LastCompactionSucceedTimestamp == 0 {
		t.Fatalf("compaction stats %+v", before)
	}
	c.stop()

	// The compacted view, the status and the stats survive a restart (any
	// owner reads them).
	c = startPolicyNode(t, testnode.Config{Node: node.Config{DataDir: dir}})
	a = admClient(t, admServer(t, c))
	cl = c.client()
	if st, err := a.Topics().CompactStatus(tn); err != nil || st.Status != utils.SUCCESS {
		t.Fatalf("status after a restart: %+v, %v", st, err)
	}
	statsURL = c.tn.HTTP.URL + "/admin/v2/persistent/public/default/compacted/stats"
	if after := compactionStats(t, statsURL); after != before {
		t.Fatalf("compaction stats after a restart %+v, before %+v", after, before)
	}
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
		return compactionStats(t, statsURL).LastCompactionSucceedTimestamp > before.LastCompactionSucceedTimestamp
	})
	// Pulsar's default retention (0/0) trims what the subscription
	// acknowledged below the horizon; a readCompacted reader from the
	// earliest still reads the whole view, as from the compacted ledger.
	waitFor(t, ctx, "the default retention's trim", func() bool {
		return firstOffset(t, ctx, c, "public/default/compacted") > 0
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

// sendKeyed sends n messages keyed k0…k(keys-1) in turn and closes the
// producer.
func sendKeyed(t *testing.T, ctx context.Context, cl pulsar.Client, topic string, n, keys int) {
	t.Helper()
	prod, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for i := range n {
		if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Key: fmt.Sprintf("k%d", i%keys), Payload: fmt.Appendf(nil, "v%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCompactionFailureRecorded: a failed compaction reports ERROR with its
// reason, and still does after a restart (the next owner reads the
// compaction record); the next compaction succeeds — above the generations
// the failed one tried, whose names stay taken — drops the logs abandoned
// below it, and the stats keep the failure's time.
func TestCompactionFailureRecorded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	c := startPolicyNode(t, testnode.Config{Node: node.Config{DataDir: dir}})
	a := admClient(t, admServer(t, c))
	const topic = "persistent://public/default/compaction-fails"
	tn := admTopic(t, topic)
	// A subscription holds the messages: with the default retention (0/0)
	// a policy round may trim an unsubscribed topic's log before the
	// compaction reads it, and the compaction would then find nothing.
	if err := a.Subscriptions().Create(tn, "holds", utils.Earliest); err != nil {
		t.Fatal(err)
	}
	sendKeyed(t, ctx, c.client(), topic, 6, 2)

	// Streams in the place of the next 8 compacted logs (as many as a
	// compaction tries) make the compaction fail.
	lg, err := c.catalog.OpenLog(ctx, lakestream.MustParseStreamID("public/default/compaction-fails"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.catalog.CreateNamespace(ctx, "__lakegate/compacted", nil); err != nil && !errors.Is(err, lakestream.ErrAlreadyExists) {
		t.Fatal(err)
	}
	var blockers []lakestream.StreamIdentifier
	disabled := false
	for gen := 1; gen <= 8; gen++ {
		id := lakestream.StreamIdentifier{Namespace: "__lakegate/compacted", Name: fmt.Sprintf("%d-%d", lg.ID(), gen)}
		if _, err := c.catalog.CreateStream(ctx, id, lakestream.StreamConfig{}, lakestream.Partitioning{},
			lakestream.SchemaConfig{Type: lakestream.SchemaNone}, nil, &lakestream.TableMaterializationPolicy{Enabled: &disabled}); err != nil {
			t.Fatal(err)
		}
		blockers = append(blockers, id)
	}
	if err := a.Topics().Compact(tn); err != nil {
		t.Fatal(err)
	}
	var failed utils.LongRunningProcessStatus
	waitFor(t, ctx, "the compaction to fail", func() bool {
		st, err := a.Topics().CompactStatus(tn)
		failed = st
		return err == nil && st.Status == utils.ERROR
	})
	if !strings.Contains(failed.LastError, "already exists") {
		t.Fatalf("reason of the failure: %q", failed.LastError)
	}
	statsURL := func() string { return c.tn.HTTP.URL + "/admin/v2/persistent/public/default/compaction-fails/stats" }
	before := compactionStats(t, statsURL())
	if before.LastCompactionFailedTimestamp == 0 || before.LastCompactionSucceedTimestamp != 0 {
		t.Fatalf("stats after a failure: %+v", before)
	}
	c.stop()

	c = startPolicyNode(t, testnode.Config{Node: node.Config{DataDir: dir}})
	a = admClient(t, admServer(t, c))
	if st, err := a.Topics().CompactStatus(tn); err != nil || st != failed {
		t.Fatalf("status after a restart: %+v, %v; before %+v", st, err, failed)
	}
	if after := compactionStats(t, statsURL()); after != before {
		t.Fatalf("stats after a restart %+v, before %+v", after, before)
	}

	// Dropped, their names stay taken: the next compaction starts above
	// the generations the failed one tried (its record says which). The
	// ones still there stand for logs left by a node that died
	// mid-compaction: the successful compaction drops them.
	for _, id := range blockers[:4] {
		if err := c.catalog.DropStream(ctx, id, true); err != nil {
			t.Fatal(err)
		}
	}
	compactAndWait(t, ctx, a, tn)
	left, err := c.catalog.ListStreams(ctx, "__lakegate/compacted")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%d-9", lg.ID()); len(left) != 1 || left[0].Name != want {
		t.Fatalf("compacted logs after the success: %v, want only %s", left, want)
	}
	if st, err := a.Topics().CompactStatus(tn); err != nil || st.LastError != "" {
		t.Fatalf("status after a success: %+v, %v", st, err)
	}
	st := compactionStats(t, statsURL())
	if st.LastCompactionSucceedTimestamp == 0 || st.LastCompactionFailedTimestamp != before.LastCompactionFailedTimestamp || st.LastCompactionRemovedEventCount != 4 {
		t.Fatalf("stats after a success: %+v (after a failure %+v)", st, before)
	}
}

// TestClusterCompactionStatusMoves: the compaction status and stats of a
// topic come from its compaction record, so every owner reports the same:
// after an unload to another node, and after that node is killed, the next
// owner answers SUCCESS with the same stats, without compacting again.
func TestClusterCompactionStatusMoves(t *testing.T) {
	c := startLGCluster(t, 2, "file://"+filepath.ToSlash(t.TempDir()))
	ctx := ctxFor(t, 2*time.Minute)
	const topic = "persistent://public/default/c-compacted"
	tn := admTopic(t, topic)
	adms := make([]pulsaradmin.Client, len(c.nodes))
	for i, n := range c.nodes {
		a, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: n.httpURL})
		if err != nil {
			t.Fatal(err)
		}
		adms[i] = a
	}
	sendKeyed(t, ctx, c.client(c.serviceURL()), topic, 20, 4)
	compactAndWait(t, ctx, adms[0], tn)
	const statsPath = "/admin/v2/persistent/public/default/c-compacted/stats"
	before := compactionStats(t, c.nodes[0].httpURL+statsPath)
	if before.LastCompactionSucceedTimestamp == 0 || before.LastCompactionRemovedEventCount != 16 {
		t.Fatalf("stats after the compaction: %+v", before)
	}
	// Through every node (each forwards to the owner), SUCCESS and the same
	// stats.
	same := func(what string) {
		t.Helper()
		for i, n := range c.nodes {
			if st, err := adms[i].Topics().CompactStatus(tn); err != nil || st.Status != utils.SUCCESS {
				t.Fatalf("%s: status through %s: %+v, %v", what, n.name, st, err)
			}
			if got := compactionStats(t, n.httpURL+statsPath); got != before {
				t.Fatalf("%s: stats through %s %+v, want %+v", what, n.name, got, before)
			}
		}
	}

	owner := c.nodeByURL(c.lookup(c.nodes[0], topic))
	dest := c.nodes[0]
	if dest == owner {
		dest = c.nodes[1]
	}
	if code := httpJSON(t, "PUT", c.nodes[0].httpURL+"/admin/v2/persistent/public/default/c-compacted/unload?destinationBroker="+dest.name, nil); code != 204 {
		t.Fatalf("unload: HTTP %d", code)
	}
	if got := c.lookup(c.nodes[0], topic); got != dest.pulsarURL {
		t.Fatalf("after an unload to %s, the topic is at %s", dest.pulsarURL, got)
	}
	same("after an unload")

	// The owner dies: the other node takes the topic over when the
	// session ends, and reads the same record.
	dest.kill(t)
	alive := slices.Index(c.nodes, owner)
	waitFor(t, ctx, "the other node to answer for the topic", func() bool {
		st, err := adms[alive].Topics().CompactStatus(tn)
		if err == nil && st.Status != utils.SUCCESS {
			t.Fatalf("status after the owner died: %+v", st)
		}
		return err == nil
	})
	if got := compactionStats(t, owner.httpURL+statsPath); got != before {
		t.Fatalf("stats after the owner died %+v, want %+v", got, before)
	}
}
