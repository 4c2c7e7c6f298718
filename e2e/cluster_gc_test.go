package e2e

// GC across processes against WAL segments (docs/gc.md; docs/index-format.md,
// "WAL segments"): three `lakegate serve` nodes on one file store each
// append their flushes to an open segment, and each node's GC — every
// 300 ms — lists the other nodes' open segments among the objects it may
// delete, while a deleted topic gives it garbage to delete (whole segments
// whose chunks are gone, next to open segments whose first chunks are gone
// too). No open segment may go: after the run every node is killed and
// restarted, so that every acknowledged message is read back from the
// store, not from a cache. The engine's TestWALSegmentOutlivesItsChunks
// and TestWALSegmentRollsWithAge check the rule behind it on one process.

import (
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

func TestClusterGCKeepsWALSegments(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	c := startLGCluster(t, 3, "file://"+filepath.ToSlash(t.TempDir()), append(keepAllFlags, "--engine-gc-interval", "300ms",
		// Small segments, so that some hold gc-gone's chunks only.
		"--engine-wal-segment-bytes", "4096")...)
	ctx := ctxFor(t, 2*time.Minute)
	cl := c.client(c.serviceURL())
	const parts, perRound = 12, 600
	topic := func(name string) string { return "persistent://public/default/" + name }
	for _, name := range []string{"gc-gone", "gc-keep"} {
		if code := admDo(t, http.MethodPut, c.nodes[0].httpURL+"/admin/v2/persistent/public/default/"+name+"/partitions", "application/json", fmt.Sprint(parts), nil); code/100 != 2 {
			t.Fatalf("create %s: HTTP %d", name, code)
		}
	}
	// produce sends n messages to a topic (its partitions spread over the
	// nodes) and waits for every acknowledgement.
	sent := map[string]bool{}
	produce := func(name string, round int) {
		t.Helper()
		p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic(name)})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range perRound {
			payload := fmt.Sprintf("%s-%d-%d", name, round, i)
			wg.Add(1)
			p.SendAsync(ctx, &pulsar.ProducerMessage{Key: fmt.Sprint(i), Payload: []byte(payload)},
				func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
					defer wg.Done()
					if err != nil {
						t.Errorf("send %s: %v", payload, err)
						return
					}
					if name == "gc-keep" {
						mu.Lock()
						sent[payload] = true
						mu.Unlock()
					}
				})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
	}
	metric := func(n *lakegateProc, name string) float64 {
		v, _ := familyValue(scrape(t, n.httpURL+"/metrics")[name], nil)
		return v
	}

	// gc-gone's objects become garbage once the topic is deleted; gc-keep
	// is written meanwhile, in rounds, until some node's GC has deleted
	// objects — with the writers' open segments listed next to them.
	produce("gc-gone", 0)
	if code := admDo(t, http.MethodDelete, c.nodes[0].httpURL+"/admin/v2/persistent/public/default/gc-gone/partitions?force=true", "", "", nil); code/100 != 2 {
		t.Fatalf("delete gc-gone: HTTP %d", code)
	}
	// gc-gone's segments are collectable once closed and their windows'
	// intents are gone (up to 10 s): a round every half second meanwhile.
	round, last := 0, time.Time{}
	waitFor(t, ctx, "GC to delete gc-gone's objects", func() bool {
		if time.Since(last) >= 500*time.Millisecond {
			round++
			produce("gc-keep", round)
			last = time.Now()
		}
		deleted := 0.0
		for _, n := range c.nodes {
			deleted += metric(n, "lakegate_engine_gc_deleted_objects_total")
		}
		return deleted > 0
	})
	produce("gc-keep", round+1) // once more with GC deleting on every pass

	appending := 0
	for _, n := range c.nodes {
		if fb := metric(n, "lakegate_engine_wal_segment_fallbacks_total"); fb != 0 {
			t.Fatalf("%s: %v flushes could not go to a WAL segment (the log says why)", n.name, fb)
		}
		if v, _ := familyValue(scrape(t, n.httpURL+"/metrics")["lakegate_object_requests_total"], map[string]string{"op": "append", "result": "ok"}); v > 0 {
			appending++
		}
	}
	if appending < 2 {
		t.Fatalf("only %d node(s) appended to WAL segments; the test needs several writers", appending)
	}
	// Cold caches: every node killed and started again.
	for _, n := range c.nodes {
		n.kill(t)
	}
	for _, n := range slices.Clone(c.nodes) {
		c.restart(n)
	}

	// Every acknowledged message of gc-keep is there, read through a fresh
	// client from the objects GC left.
	reader := c.client(c.serviceURL())
	got := map[string]bool{}
	for p := range parts {
		r, err := reader.CreateReader(pulsar.ReaderOptions{Topic: fmt.Sprintf("%s-partition-%d", topic("gc-keep"), p), StartMessageID: pulsar.EarliestMessageID()})
		if err != nil {
			t.Fatal(err)
		}
		for r.HasNext() {
			m, err := r.Next(ctx)
			if err != nil {
				t.Fatalf("partition %d: %v", p, err)
			}
			got[string(m.Payload())] = true
		}
		r.Close()
	}
	for s := range sent {
		if !got[s] {
			t.Fatalf("acknowledged message %s is gone (read %d of %d)", s, len(got), len(sent))
		}
	}
	if len(got) != len(sent) {
		t.Fatalf("read %d messages, %d were acknowledged", len(got), len(sent))
	}
	t.Logf("%d rounds of %d messages while GC ran on every node; %d nodes appended to WAL segments", round+1, perRound, appending)
}
