package e2e

// Hostile clients against a node process: sockets that announce huge
// frames and then trickle or stall must not make the node allocate what
// they announce (docs/security.md, "Frames and connection queues").

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

// TestHostileHugeFrameLengths: 1 000 sockets announce a 5 MiB frame and
// then stall or trickle, against a `lakegate standalone` process:
//   - 500 before CONNECT, each sending 512 KiB of the frame and stalling:
//     refused at the length (over the 64 KiB pre-CONNECT limit), closed at
//     once, not at the 30 s handshake timeout;
//   - 500 after CONNECT (a SEND frame's length), each trickling 1 KiB
//     every 200 ms: the frame's buffer grows as the bytes arrive.
//
// The node's RSS (/proc/<pid>/status) and Go heap (its /metrics) stay
// within 200 MiB of the idle baseline, and a well-behaved Go client keeps
// producing and consuming meanwhile; its throughput with and without the
// attack is logged. On a node that allocated the announced length (before
// this test existed) the heap grew by 5 GiB and RSS by the 512 KiB sent
// per socket before CONNECT.
func TestHostileHugeFrameLengths(t *testing.T) {
	const (
		preConnect   = 500
		postConnect  = 500
		announced    = 5 << 20
		sentBefore   = 512 << 10
		trickleChunk = 1 << 10
		growthMax    = 200 << 20
		msgs         = 20000
	)
	bin := lakegateBinary(t)
	node := startLakegate(t, bin, t.TempDir())
	pid := node.cmd.Process.Pid
	ctx := ctxFor(t, 3*time.Minute)
	addr := strings.TrimPrefix(node.pulsarURL, "pulsar://")

	cl := crashClient(t, node.pulsarURL)
	topic := "persistent://public/default/hostile-frames"
	cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	prod, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	idle := timedProduceConsume(t, ctx, prod, cons, msgs)
	t.Logf("well-behaved client without attack: %d messages in %v (%.0f msg/s)", msgs, idle, msgs/idle.Seconds())
	baseRSS, baseHeap, err := nodeMemory(pid, node.httpURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("idle baseline: RSS %d MiB, Go heap %d MiB", baseRSS>>20, baseHeap>>20)

	// The attack.
	attackCtx, stopAttack := context.WithCancel(ctx)
	defer stopAttack()
	var (
		wg                        sync.WaitGroup
		dialed, refusedEarly, bad atomic.Int64
		ready                     sync.WaitGroup
	)
	sem := make(chan struct{}, 64) // dials at once
	header := func(total uint32) []byte { return binary.BigEndian.AppendUint32(nil, total) }
	start := time.Now()
	for i := range preConnect + postConnect {
		wg.Add(1)
		ready.Add(1)
		go func() {
			defer wg.Done()
			readyOnce := sync.OnceFunc(ready.Done)
			defer readyOnce()
			sem <- struct{}{}
			conn, err := net.DialTimeout("tcp", addr, 30*time.Second)
			<-sem
			if err != nil {
				bad.Add(1)
				t.Errorf("dial: %v", err)
				return
			}
			defer conn.Close()
			go func() { <-attackCtx.Done(); conn.Close() }()
			dialed.Add(1)
			if i < preConnect {
				conn.Write(header(announced))
				conn.Write(make([]byte, sentBefore)) // fails once the node closed: fine
				readyOnce()
				// The node closes the connection: the read ends well
				// before the handshake timeout (30 s).
				conn.SetReadDeadline(time.Now().Add(20 * time.Second))
				if _, err := io.Copy(io.Discard, conn); err == nil || !isTimeout(err) && !errors.Is(err, net.ErrClosed) {
					refusedEarly.Add(1)
				}
				return
			}
			br := bufio.NewReader(conn)
			if err := protocol.WriteFrame(conn, protocol.Frame{Cmd: &pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(),
				Connect: &pb.CommandConnect{ClientVersion: proto.String("hostile"), ProtocolVersion: proto.Int32(21)}}}); err != nil {
				bad.Add(1)
				return
			}
			conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			if f, err := protocol.ReadFrame(br, 0); err != nil || f.Cmd.GetType() != pb.BaseCommand_CONNECTED {
				bad.Add(1)
				t.Errorf("CONNECT: %v %v", f.Cmd.GetType(), err)
				return
			}
			conn.Write(header(announced))
			readyOnce()
			chunk := make([]byte, trickleChunk)
			tick := time.NewTicker(200 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-attackCtx.Done():
					return
				case <-tick.C:
					if _, err := conn.Write(chunk); err != nil {
						return
					}
				}
			}
		}()
	}
	ready.Wait()
	t.Logf("attack: %d sockets connected and sent their lengths in %v", dialed.Load(), time.Since(start).Round(time.Millisecond))

	// Sample the node's memory while the well-behaved client works.
	var (
		peakMu            sync.Mutex
		peakRSS, peakHeap int64
	)
	sample := func() {
		rss, heap, err := nodeMemory(pid, node.httpURL)
		if err != nil {
			t.Errorf("sampling the node's memory: %v", err)
			return
		}
		peakMu.Lock()
		peakRSS, peakHeap = max(peakRSS, rss), max(peakHeap, heap)
		peakMu.Unlock()
	}
	sample()
	samplerDone := make(chan struct{})
	samplerCtx, stopSampler := context.WithCancel(ctx)
	go func() {
		defer close(samplerDone)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-samplerCtx.Done():
				return
			case <-tick.C:
				sample()
			}
		}
	}()
	under := timedProduceConsume(t, ctx, prod, cons, msgs)
	sample()
	stopSampler()
	<-samplerDone
	t.Logf("well-behaved client under attack: %d messages in %v (%.0f msg/s)", msgs, under, msgs/under.Seconds())
	t.Logf("under attack: peak RSS %d MiB (+%d MiB), peak Go heap %d MiB (+%d MiB)",
		peakRSS>>20, (peakRSS-baseRSS)>>20, peakHeap>>20, (peakHeap-baseHeap)>>20)

	stopAttack()
	wg.Wait()
	if n := bad.Load(); n > 0 {
		t.Fatalf("%d attacking sockets failed to set up", n)
	}
	if got := refusedEarly.Load(); got != preConnect {
		t.Errorf("%d of %d sockets announcing %d bytes before CONNECT were closed before the handshake timeout", got, preConnect, announced)
	}
	if d := peakRSS - baseRSS; d > growthMax {
		t.Errorf("RSS grew by %d MiB under attack (bound %d MiB)", d>>20, growthMax>>20)
	}
	if d := peakHeap - baseHeap; d > growthMax {
		t.Errorf("Go heap grew by %d MiB under attack (bound %d MiB)", d>>20, growthMax>>20)
	}
}

// timedProduceConsume publishes n messages and receives them on cons (which
// acknowledges them); it returns the time from the first send to the
// last receive.
func timedProduceConsume(t *testing.T, ctx context.Context, prod pulsar.Producer, cons pulsar.Consumer, n int) time.Duration {
	t.Helper()
	start := time.Now()
	payload := make([]byte, 1024)
	sendErr := make(chan error, 1)
	go func() {
		var failed atomic.Bool
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			prod.SendAsync(ctx, &pulsar.ProducerMessage{Payload: payload, Key: strconv.Itoa(i)}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
				if err != nil && failed.CompareAndSwap(false, true) {
					sendErr <- err
				}
				wg.Done()
			})
		}
		wg.Wait()
		close(sendErr)
	}()
	for i := range n {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatalf("receive %d of %d: %v", i, n, err)
		}
		cons.Ack(m)
	}
	if err := <-sendErr; err != nil {
		t.Fatalf("send: %v", err)
	}
	return time.Since(start)
}

// nodeMemory returns a node process's resident set (VmRSS) and its Go
// heap in use (go_memstats_heap_inuse_bytes on /metrics), in bytes.
func nodeMemory(pid int, httpURL string) (rss, heap int64, err error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, 0, fmt.Errorf("VmRSS %q: %w", v, err)
			}
			rss = kb << 10
		}
	}
	resp, err := http.Get(httpURL + "/metrics")
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_heap_inuse_bytes "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, 0, fmt.Errorf("heap %q: %w", v, err)
			}
			heap = int64(f)
		}
	}
	if rss == 0 || heap == 0 {
		return 0, 0, fmt.Errorf("no VmRSS (%d) or Go heap (%d) for pid %d", rss, heap, pid)
	}
	return rss, heap, nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
