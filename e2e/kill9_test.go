package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
)

// TestKill9 runs the real binary (`lakegate standalone`), kills it with
// SIGKILL while a producer has sends in flight, starts it again on the same
// data dir and checks, per subscription created before the kill:
//
//   - every message whose send receipt the producer got is delivered if it
//     is above the subscription's acknowledged prefix (missing = 0);
//   - acknowledged messages come back only as a contiguous tail of the
//     acknowledged prefix (the cursor persisted at most
//     engine.cursorPersistInterval late), never out of order or twice;
//   - "reset": a position written by the admin reset cursor (persisted when
//     it returns) survives exactly: nothing below it is redelivered.
//
// Batching is off so that message i is one entry and ids are exact.
func TestKill9(t *testing.T) {
	bin := lakegateBinary(t)
	dir := t.TempDir()
	const (
		n1       = 1000 // produced, then consumed and partly acknowledged
		n2       = 1000 // produced while the node is killed
		ackBelow = 600  // acknowledged prefix [0, ackBelow)
		killAt   = 500  // kill after this many phase-2 receipts
	)
	topic := "persistent://public/default/kill9"
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	node := startLakegate(t, bin, dir)
	cl := crashClient(t, node.pulsarURL)
	subOpts := func(name string) pulsar.ConsumerOptions {
		return pulsar.ConsumerOptions{
			Topic: topic, SubscriptionName: name, Type: pulsar.Exclusive,
			SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
			AckWithResponse:             true,
		}
	}
	acked, err := cl.Subscribe(subOpts("acked"))
	if err != nil {
		t.Fatal(err)
	}
	reset, err := cl.Subscribe(subOpts("reset"))
	if err != nil {
		t.Fatal(err)
	}
	reset.Close()

	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		ids    = make([]pulsar.MessageID, n1+n2) // nil: no receipt
		nAcked int
		frozen bool // receipts counted: later callbacks are ignored
	)
	reachedKill := make(chan struct{})
	send := func(ctx context.Context, p pulsar.Producer, i int, wg *sync.WaitGroup) {
		wg.Add(1)
		p.SendAsync(ctx, &pulsar.ProducerMessage{
			Payload:    []byte("payload-" + strconv.Itoa(i)),
			Properties: map[string]string{"i": strconv.Itoa(i)},
		}, func(id pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			defer wg.Done()
			if err != nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if frozen {
				return
			}
			ids[i] = id
			if nAcked++; nAcked == n1+killAt {
				close(reachedKill)
			}
		})
	}
	var wg1 sync.WaitGroup
	for i := range n1 {
		send(ctx, p, i, &wg1)
	}
	if err := p.FlushWithCtx(ctx); err != nil {
		t.Fatal(err)
	}
	wg1.Wait()
	for i := range n1 {
		if ids[i] == nil {
			t.Fatalf("phase 1: message %d not acknowledged", i)
		}
	}

	for want := range n1 {
		m, err := acked.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if i := msgIndex(t, m); i != want {
			t.Fatalf("before the kill got %d, want %d", i, want)
		}
		if want == ackBelow-1 {
			if err := acked.AckCumulative(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	adm, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: node.httpURL})
	if err != nil {
		t.Fatal(err)
	}
	at := ids[ackBelow]
	if err := adm.Subscriptions().ResetCursorToMessageID(admTopic(t, topic), "reset",
		utils.MessageID{LedgerID: at.LedgerID(), EntryID: at.EntryID(), PartitionIndex: -1}); err != nil {
		t.Fatal(err)
	}

	// Phase 2: sends in flight when the node dies. A short send timeout
	// fails those within 5 s instead of the default 30 s (an error in
	// phase 2 only makes a message unconfirmed).
	p2, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true, SendTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithCancel(ctx)
	var wg2 sync.WaitGroup // not waited for: the client loses some callbacks of a dead connection
	senderDone := make(chan struct{})
	go func() {
		defer close(senderDone)
		for i := n1; i < n1+n2 && ctx2.Err() == nil; i++ {
			send(ctx2, p2, i, &wg2)
		}
	}()
	select {
	case <-reachedKill:
	case <-ctx.Done():
		t.Fatal("phase 2 receipts did not come")
	}
	node.kill(t)
	cancel2()
	<-senderDone // no SendAsync may race with Close (a data race in the client)
	cl.Close()   // fails what is still pending
	mu.Lock()
	frozen = true
	receipts := 0
	for _, id := range ids {
		if id != nil {
			receipts++
		}
	}
	mu.Unlock()

	node = startLakegate(t, bin, dir)
	cl = binClient(t, node.pulsarURL)
	for _, sub := range []struct {
		name     string
		ackBelow int
		exact    bool // the persisted position is exactly ackBelow
	}{{"acked", ackBelow, false}, {"reset", ackBelow, true}} {
		cons, err := cl.Subscribe(subOpts(sub.name))
		if err != nil {
			t.Fatal(err)
		}
		expectOnlySentinelAfter := func() []int {
			p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("sentinel")}); err != nil {
				t.Fatal(err)
			}
			var got []int
			for {
				m, err := cons.Receive(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if string(m.Payload()) == "sentinel" {
					return got
				}
				got = append(got, msgIndex(t, m))
			}
		}
		got := expectOnlySentinelAfter()
		cons.Close()
		delivered := make([]bool, n1+n2)
		duplicated, unconfirmed := 0, 0
		for k, i := range got {
			if k > 0 && i <= got[k-1] {
				t.Fatalf("%s: %d delivered after %d", sub.name, i, got[k-1])
			}
			delivered[i] = true
			switch {
			case i < sub.ackBelow:
				duplicated++
			case ids[i] == nil:
				unconfirmed++ // stored, but its receipt was lost with the node
			}
		}
		missing := 0
		for i := sub.ackBelow; i < n1+n2; i++ {
			if ids[i] != nil && !delivered[i] {
				missing++
			}
		}
		t.Logf("%s: sent %d, receipts %d, acknowledged below %d, received %d (first %d), missing %d, duplicated %d, stored without receipt %d",
			sub.name, n1+n2, receipts, sub.ackBelow, len(got), firstOr(got, -1), missing, duplicated, unconfirmed)
		if missing != 0 {
			t.Errorf("%s: %d acknowledged messages missing", sub.name, missing)
		}
		if duplicated > 0 && (got[0] != sub.ackBelow-duplicated || sub.exact) {
			t.Errorf("%s: %d acknowledged messages redelivered starting at %d", sub.name, duplicated, got[0])
		}
	}
}

func firstOr(s []int, def int) int {
	if len(s) == 0 {
		return def
	}
	return s[0]
}

func msgIndex(t *testing.T, m pulsar.Message) int {
	t.Helper()
	i, err := strconv.Atoi(m.Properties()["i"])
	if err != nil || string(m.Payload()) != "payload-"+strconv.Itoa(i) {
		t.Fatalf("message %v: payload %q properties %v", m.ID(), m.Payload(), m.Properties())
	}
	return i
}

func binClient(t *testing.T, url string) pulsar.Client {
	t.Helper()
	return binClientTimeout(t, url, 30*time.Second)
}

// crashClient is binClient for a client that outlives its node's kill -9:
// its producers and consumers then reconnect to an address that is gone,
// each attempt retrying its lookup for up to the operation timeout, and
// Close waits for the attempt under way. A short timeout bounds that wait.
func crashClient(t *testing.T, url string) pulsar.Client {
	t.Helper()
	return binClientTimeout(t, url, 3*time.Second)
}

func binClientTimeout(t *testing.T, url string, op time.Duration) pulsar.Client {
	t.Helper()
	cl, err := pulsar.NewClient(pulsar.ClientOptions{
		URL: url, OperationTimeout: op, ConnectionTimeout: 10 * time.Second,
		Logger: plog.DefaultNopLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// lakegateProc is a running lakegate process (standalone or serve).
type lakegateProc struct {
	name      string
	cmd       *exec.Cmd
	ready     bool
	pulsarURL string // "" without a plain listener
	httpURL   string // "" without a plain listener
	// pulsarTLSURL and httpsURL are the TLS listeners' ("" without).
	pulsarTLSURL, httpsURL string
	// kafkaAddr is the Kafka listener's bound address ("" without one).
	kafkaAddr string
	exited    chan struct{}

	logMu   sync.Mutex
	logs    []string
	logLine chan struct{} // closed and replaced at every line
}

// startLakegate starts `lakegate standalone` on dir with every listener on
// a free port (cluster_harness_test.go: startLakegateArgs). flags are added
// to the command line. The process is killed at cleanup.
func startLakegate(t *testing.T, bin, dir string, flags ...string) *lakegateProc {
	t.Helper()
	return startLakegateArgs(t, bin, append([]string{"standalone", "--data-dir", dir,
		"--pulsar-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"}, flags...))
}

// kill sends SIGKILL and waits for the process to be gone; idempotent.
func (p *lakegateProc) kill(t *testing.T) {
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("kill: %v", err)
	}
	<-p.exited
}

// logAttr returns the value of key=value in a slog text line.
func logAttr(line, key string) string {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

// TestCloseThenKill9: acknowledgements of a consumer that closed cleanly
// are persisted by the close itself, so a kill -9 right after it redelivers
// none of them (without waiting for the periodic cursor persistence).
func TestCloseThenKill9(t *testing.T) {
	bin := lakegateBinary(t)
	dir := t.TempDir()
	const n, ackBelow = 300, 200
	topic := "persistent://public/default/close-kill9"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	node := startLakegate(t, bin, dir)
	cl := crashClient(t, node.pulsarURL)
	opts := pulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "s", Type: pulsar.Exclusive,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, AckWithResponse: true,
	}
	cons, err := cl.Subscribe(opts)
	if err != nil {
		t.Fatal(err)
	}
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{
			Payload: []byte("payload-" + strconv.Itoa(i)), Properties: map[string]string{"i": strconv.Itoa(i)},
		}); err != nil {
			t.Fatal(err)
		}
	}
	for want := range n {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if i := msgIndex(t, m); i != want {
			t.Fatalf("got %d, want %d", i, want)
		}
		if want < ackBelow {
			if err := cons.Ack(m); err != nil { // with a response: processed when it returns
				t.Fatal(err)
			}
		}
	}
	cons.Close()
	node.kill(t)
	cl.Close()

	node = startLakegate(t, bin, dir)
	cl = binClient(t, node.pulsarURL)
	cons, err = cl.Subscribe(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	m, err := cons.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if i := msgIndex(t, m); i != ackBelow {
		t.Fatalf("after close and kill -9 the first message is %d, want %d (acknowledged before the close: redelivered %d)", i, ackBelow, ackBelow-i)
	}
}
