package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// TestMemoryBudget: a standalone process given memory.limit stays under it
// (its peak resident set, VmHWM) while three things that take memory run
// at once (docs/memory.md): producers at full speed on four partitions, a
// consumer catching up from the earliest message while they produce, and
// table compaction of what was written (age 1 s). The budget is small
// (256 MiB) so that the shares — chunk cache, publish buffer, pending
// appends, compaction input — are what bounds the process, not the load
// being too light to reach them: the test fails if the consumer did not
// catch up from behind or nothing was compacted.
//
//	LAKEGATE_MEMORY_SECONDS=60 go test -run TestMemoryBudget -v ./e2e/   a longer run
func TestMemoryBudget(t *testing.T) {
	const limit = 384 << 20
	produceFor := 12 * time.Second
	if s := os.Getenv("LAKEGATE_MEMORY_SECONDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("LAKEGATE_MEMORY_SECONDS=%q: %v", s, err)
		}
		produceFor = time.Duration(n) * time.Second
	}
	bin := lakegateBinary(t)
	node := startLakegate(t, bin, t.TempDir(), "--memory-limit", strconv.Itoa(limit),
		"--tables-age", "1s", "--tables-interval", "1s", "--tables-scan-interval", "1s")
	pid := node.cmd.Process.Pid

	topic := "persistent://public/default/memory-budget"
	if code, body := httpDo(t, context.Background(), "PUT", node.httpURL+"/admin/v2/persistent/public/default/memory-budget/partitions", "4"); code/100 != 2 {
		t.Fatalf("create partitioned topic: HTTP %d %s", code, body)
	}
	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: node.pulsarURL, OperationTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	// The subscription exists before the first message: everything
	// produced is its backlog, read later from behind.
	consumer, err := client.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "catch-up",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, ReceiverQueueSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()

	var (
		acked    atomic.Int64
		received atomic.Int64
		failed   atomic.Int64
	)
	payload := make([]byte, 1024)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	ctx, cancel := context.WithTimeout(context.Background(), produceFor+3*time.Minute)
	defer cancel()
	stopProducing := time.Now().Add(produceFor)
	var producers sync.WaitGroup
	for p := 0; p < 4; p++ {
		producer, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic, MaxPendingMessages: 1000,
			BatchingMaxPublishDelay: 2 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer producer.Close()
		producers.Add(1)
		go func() {
			defer producers.Done()
			for i := 0; time.Now().Before(stopProducing); i++ {
				producer.SendAsync(ctx, &pulsar.ProducerMessage{Payload: payload, Key: strconv.Itoa(i)},
					func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
						if err != nil {
							failed.Add(1)
							return
						}
						acked.Add(1)
					})
			}
			if err := producer.FlushWithCtx(ctx); err != nil {
				t.Errorf("flush: %v", err)
			}
		}()
	}
	// The peak of each part of the resident set, sampled (VmHWM is the
	// exact peak of the sum; these say what it was made of).
	var peakAnon, peakFile atomic.Int64
	sampling := make(chan struct{})
	defer close(sampling)
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-sampling:
				return
			case <-tick.C:
			}
			st, ok := procStatus(pid)
			if !ok {
				return
			}
			a, f := st["RssAnon"], st["RssFile"]+st["RssShmem"]
			if a > peakAnon.Load() {
				peakAnon.Store(a)
			}
			if f > peakFile.Load() {
				peakFile.Store(f)
			}
		}
	}()
	produced := make(chan struct{})
	go func() { producers.Wait(); close(produced) }()

	// The consumer starts once a third of the producing is done, so it
	// reads from behind (the cache, then the WAL objects and tables)
	// while the producers go on; it stops when it has every acknowledged
	// message.
	select {
	case <-time.After(produceFor / 3):
	case <-ctx.Done():
	}
	for done := produced; ; {
		if done == nil && received.Load() >= acked.Load() {
			break
		}
		select {
		case msg := <-consumer.Chan():
			received.Add(1)
			consumer.Ack(msg)
		case <-done:
			done = nil // every send answered: acked is final
		case <-ctx.Done():
			t.Fatalf("consumer: %v (received %d of %d)", ctx.Err(), received.Load(), acked.Load())
		}
	}
	if failed.Load() > 0 {
		t.Fatalf("%d sends failed", failed.Load())
	}

	// Compaction ran while this happened.
	var materialized float64
	waitFor(t, ctx, "compaction of the produced messages", func() bool {
		materialized, _ = familyValue(scrape(t, node.httpURL+"/metrics")["lakegate_engine_materialized_records_total"], nil)
		return materialized > 0
	})

	st, ok := procStatus(pid)
	if !ok || st["VmHWM"] == 0 {
		t.Fatalf("/proc/%d/status: no VmHWM (the process is gone?)", pid)
	}
	hwm, rss := st["VmHWM"], st["VmRSS"]
	t.Logf("produced %d messages of 1 KiB in %s (%.0f msg/s), read %d from behind, %.0f materialized; peak RSS %.0f MiB, now %.0f MiB (sampled peaks: anonymous %.0f, mapped files %.0f), budget %d MiB",
		acked.Load(), produceFor, float64(acked.Load())/produceFor.Seconds(), received.Load(), materialized,
		float64(hwm)/1024, float64(rss)/1024, float64(peakAnon.Load())/1024, float64(peakFile.Load())/1024, limit>>20)
	if acked.Load() < 10000 {
		t.Fatalf("only %d messages acknowledged: too light a load to test the budget", acked.Load())
	}
	if hwm*1024 > limit {
		t.Fatalf("peak RSS %.0f MiB exceeds memory.limit %d MiB", float64(hwm)/1024, limit>>20)
	}
}

// procStatus reads the kB fields of /proc/<pid>/status (VmHWM, VmRSS,
// RssAnon, …) in KiB; ok is false once the process is gone.
func procStatus(pid int) (kib map[string]int64, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, false
	}
	kib = map[string]int64{}
	for _, line := range strings.Split(string(b), "\n") {
		name, v, found := strings.Cut(line, ":")
		if !found {
			continue
		}
		v, isKiB := strings.CutSuffix(strings.TrimSpace(v), "kB")
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && isKiB {
			kib[name] = n
		}
	}
	return kib, true
}
