package e2e

// GC across processes against prepared WAL objects (docs/gc.md;
// docs/storage.md, "Prepared objects"): three `lakegate serve` nodes on one
// file store each prepare the objects of their next flushes, and each
// node's GC — every 300 ms — lists the other nodes' prepared files among
// the objects it may delete, while a deleted topic gives it garbage to
// delete. No prepared file may go before its flush (the engine counts
// those: lakegate_engine_prepared_objects_gone_total) and no acknowledged
// message may be lost. The engine's TestPreparedObjectsOutliveTheirWindow
// checks the rule behind it on a controlled clock (a prepared name keeps
// its window's intent after the window is over).

import (
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

func TestClusterGCKeepsPreparedObjects(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	c := startLGCluster(t, 3, "file://"+filepath.ToSlash(t.TempDir()), append(keepAllFlags, "--engine-gc-interval", "300ms")...)
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
	// objects — with the writers' prepared files listed next to them.
	produce("gc-gone", 0)
	if code := admDo(t, http.MethodDelete, c.nodes[0].httpURL+"/admin/v2/persistent/public/default/gc-gone/partitions?force=true", "", "", nil); code/100 != 2 {
		t.Fatalf("delete gc-gone: HTTP %d", code)
	}
	round := 0
	waitFor(t, ctx, "GC to delete gc-gone's objects", func() bool {
		round++
		produce("gc-keep", round)
		deleted := 0.0
		for _, n := range c.nodes {
			deleted += metric(n, "lakegate_engine_gc_deleted_objects_total")
		}
		return deleted > 0
	})
	produce("gc-keep", round+1) // once more with GC deleting on every pass

	filling := 0
	for _, n := range c.nodes {
		if gone := metric(n, "lakegate_engine_prepared_objects_gone_total"); gone != 0 {
			t.Fatalf("%s: %v prepared WAL objects were deleted before their flush (GC took protected objects)", n.name, gone)
		}
		if metric(n, "lakegate_engine_prepared_objects_filled_total") > 0 {
			filling++
		}
	}
	if filling < 2 {
		t.Fatalf("only %d node(s) filled prepared objects; the test needs several writers", filling)
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
	t.Logf("%d rounds of %d messages while GC ran on every node; %d nodes filled prepared objects", round+1, perRound, filling)
}
