package engine_test

// The kill -9 restart test. TestKill9Restart re-executes this test binary
// (os.Args[0] -test.run '^TestKill9Writer$' with LAKEGATE_KILL9_DIR set):
// the child starts a node on a data dir and appends to several logs from
// several goroutines, printing one line per acknowledged append; the parent
// SIGKILLs it mid-stream, starts a node on the same dir, and checks that
//
//   - every append the child reported acknowledged is there, at the
//     reported offset, with its payload and header;
//   - each log is gap-free from 0 to its head, and holds nothing but the
//     child's appends: per writer goroutine, exactly its sequence numbers
//     0..m in order, where m is its last acknowledged append or the one
//     after it (in flight when killed: committed or not, never torn);
//   - appends continue at the head, and GC then deletes only orphans.
//
//	go test -p 1 -run TestKill9Restart -v ./engine/

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lakegate/lakegate/engine"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/node"
)

const (
	envKill9Dir = "LAKEGATE_KILL9_DIR" // set: this process is the child writer

	kill9Logs          = 4
	kill9WritersPerLog = 4
	kill9ChildMax      = 2 * time.Minute
	// kill9FlushBytes is the child's FlushBytes: small, so that objects
	// are cut by size every few entries and several are being PUT and
	// committed at any moment (with the default linger every kill would
	// land between a commit and the next flush).
	kill9FlushBytes = 150
)

// kill9AcksBeforeKill is when the parent kills the child: after reading
// this many acks, varied from run to run.
var kill9AcksBeforeKill = 200 + rand.IntN(300)

// kill9Payload is the payload of append seq of writer w on log id; its
// record count is 1 + seq%3.
func kill9Payload(id lakestream.LogID, w, seq int) []byte {
	b := fmt.Appendf(nil, "log=%d writer=%d seq=%d;", id, w, seq)
	return append(b, bytes.Repeat([]byte{byte('a' + seq%26)}, seq%50)...)
}

func parseKill9Payload(p []byte) (id lakestream.LogID, w, seq int, ok bool) {
	i := bytes.IndexByte(p, ';')
	if i < 0 {
		return 0, 0, 0, false
	}
	if _, err := fmt.Sscanf(string(p[:i]), "log=%d writer=%d seq=%d", &id, &w, &seq); err != nil {
		return 0, 0, 0, false
	}
	return id, w, seq, bytes.Equal(p, kill9Payload(id, w, seq))
}

// TestKill9Writer is the child of TestKill9Restart; it is skipped in a
// normal run.
func TestKill9Writer(t *testing.T) {
	dir := os.Getenv(envKill9Dir)
	if dir == "" {
		t.Skip("the child process of TestKill9Restart")
	}
	ctx, cancel := context.WithTimeout(context.Background(), kill9ChildMax)
	defer cancel()
	n, err := node.Start(ctx, node.Config{DataDir: dir, Engine: engine.Options{FlushBytes: kill9FlushBytes}})
	if err != nil {
		t.Fatalf("child: StartNode: %v", err)
	}
	var (
		outMu sync.Mutex
		wg    sync.WaitGroup
	)
	for id := lakestream.LogID(1); id <= kill9Logs; id++ {
		for w := range kill9WritersPerLog {
			wg.Go(func() {
				for seq := 0; ctx.Err() == nil; seq++ {
					h, err := n.Engine.Append(ctx, id, 1+seq%3, kill9Payload(id, w, seq))
					if err != nil {
						if ctx.Err() == nil {
							fmt.Fprintf(os.Stderr, "child: log %d writer %d append %d: %v\n", id, w, seq, err)
							os.Exit(3)
						}
						return
					}
					outMu.Lock()
					// One write(2) per line, unbuffered: a line the parent
					// reads was printed after the ack.
					fmt.Fprintf(os.Stdout, "ACK %d %d %d %d %d %d %d %d %d\n", id, w, seq,
						h.Offset, h.Records, h.Size, h.CumulativeSize, h.PublishTimeMs, h.WriteTimeMs)
					outMu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	t.Fatalf("child: not killed within %v", kill9ChildMax)
}

type kill9Ack struct {
	id   lakestream.LogID
	w    int
	seq  int
	head lakestream.EntryHeader
}

func parseKill9Ack(line string) (kill9Ack, bool) {
	var a kill9Ack
	h := &a.head
	_, err := fmt.Sscanf(line, "ACK %d %d %d %d %d %d %d %d %d", &a.id, &a.w, &a.seq,
		&h.Offset, &h.Records, &h.Size, &h.CumulativeSize, &h.PublishTimeMs, &h.WriteTimeMs)
	return a, err == nil
}

// lockedBuffer collects the child's stderr.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestKill9Restart(t *testing.T) {
	if os.Getenv(envKill9Dir) != "" {
		t.Skip("in the child")
	}
	ctx := restartCtx(t)
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKill9Writer$", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), envKill9Dir+"="+dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := false
	t.Cleanup(func() { // on failure paths: never leave the child running
		if !waited {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()

	acks := map[[3]int]kill9Ack{} // (log, writer, seq) → ack
	take := func(line string) {
		if !strings.HasPrefix(line, "ACK ") {
			return
		}
		a, ok := parseKill9Ack(line)
		if !ok {
			t.Fatalf("bad line from child: %q", line)
		}
		acks[[3]int{int(a.id), a.w, a.seq}] = a
	}
	deadline := time.NewTimer(restartTimeout)
	defer deadline.Stop()
	for len(acks) < kill9AcksBeforeKill {
		select {
		case line, ok := <-lines:
			if !ok {
				err := cmd.Wait()
				waited = true
				t.Fatalf("child exited before it was killed (%v) after %d acks; stderr:\n%s", err, len(acks), stderr.String())
			}
			take(line)
		case <-deadline.C:
			t.Fatalf("child acknowledged %d appends in %v; stderr:\n%s", len(acks), restartTimeout, stderr.String())
		}
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	for line := range lines { // what the child printed before it died
		take(line)
	}
	err = cmd.Wait()
	waited = true
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ProcessState.String() != "signal: killed" {
		t.Fatalf("child: %v, want killed by SIGKILL; stderr:\n%s", err, stderr.String())
	}
	t.Logf("child killed after %d acknowledged appends (kill sent after %d)", len(acks), kill9AcksBeforeKill)

	// Restart on the same dir. Intents of the dead writer are treated as
	// expired, so GC below may delete its uncommitted objects.
	n, _ := startNode(t, dir, engine.Options{PendingIntentTTL: time.Nanosecond})
	last := map[[2]int]int{} // (log, writer) → highest acknowledged seq
	for k := range acks {
		lw := [2]int{k[0], k[1]}
		if s, ok := last[lw]; !ok || k[2] > s {
			last[lw] = k[2]
		}
	}
	heads := map[lakestream.LogID]int64{}
	check := func(what string, e *engine.Engine) {
		t.Helper()
		found, unreported := 0, 0
		for id := lakestream.LogID(1); id <= kill9Logs; id++ {
			l, err := e.Log(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			first, err1 := l.FirstOffset(ctx)
			next, err2 := l.NextOffset(ctx)
			if err := errors.Join(err1, err2); err != nil || first != 0 {
				t.Fatalf("%s: log %d first %d: %v", what, id, first, err)
			}
			es, err := l.ReadEntries(ctx, 0, math.MaxInt32, math.MaxInt64)
			if err != nil {
				t.Fatalf("%s: log %d: read: %v", what, id, err)
			}
			next2 := int64(0)
			nextSeq := map[int]int{}
			for i, en := range es {
				if en.Offset != next2 {
					t.Fatalf("%s: log %d: entry %d at offset %d, want %d (gap or overlap)", what, id, i, en.Offset, next2)
				}
				next2 = en.End()
				pid, w, seq, ok := parseKill9Payload(en.Payload)
				if !ok || pid != id || en.Records != int32(1+seq%3) {
					t.Fatalf("%s: log %d offset %d: %d records, payload %q: not an append of the child", what, id, en.Offset, en.Records, en.Payload)
				}
				if seq != nextSeq[w] {
					t.Fatalf("%s: log %d offset %d: writer %d seq %d, want seq %d (lost, duplicated or reordered append)", what, id, en.Offset, w, seq, nextSeq[w])
				}
				nextSeq[w]++
				if a, ok := acks[[3]int{int(id), w, seq}]; ok {
					found++
					if a.head != en.EntryHeader {
						t.Fatalf("%s: log %d writer %d seq %d: header %+v, child was told %+v", what, id, w, seq, en.EntryHeader, a.head)
					}
				}
			}
			if next2 != next {
				t.Fatalf("%s: log %d: entries end at %d, head %d", what, id, next2, next)
			}
			for w := range kill9WritersPerLog {
				l, ok := last[[2]int{int(id), w}]
				if !ok {
					l = -1
				}
				got := nextSeq[w] - 1
				if got < l || got > l+1 {
					t.Fatalf("%s: log %d writer %d: log holds seqs 0..%d, child acknowledged up to %d (at most one more may have committed unacknowledged)", what, id, w, got, l)
				}
				if got == l+1 {
					unreported++
				}
			}
			heads[id] = next
		}
		if found != len(acks) {
			t.Fatalf("%s: %d of %d acknowledged appends found", what, found, len(acks))
		}
		t.Logf("%s: all %d acknowledged appends found; %d committed appends the child did not live to report", what, found, unreported)
	}
	check("after restart", n.Engine)

	// Appends go on at the head.
	for id := lakestream.LogID(1); id <= kill9Logs; id++ {
		h, err := n.Engine.Append(ctx, id, 1, kill9Payload(id, 99, 0))
		if err != nil || h.Offset != heads[id] {
			t.Fatalf("log %d: append after restart at %d (%v), want the head %d", id, h.Offset, err, heads[id])
		}
	}
	// GC deletes the dead writer's uncommitted objects (if any) and nothing
	// that is referenced: a fresh engine (cold cache) still reads it all.
	st, err := n.Engine.CollectGarbage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("GC after the crash: %+v", st)
	fresh, err := engine.New(n.Store, n.Meta, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	for id := lakestream.LogID(1); id <= kill9Logs; id++ {
		es, err := fresh.ReadEntries(ctx, id, heads[id], 10, math.MaxInt64)
		if err != nil || len(es) != 1 || !bytes.Equal(es[0].Payload, kill9Payload(id, 99, 0)) {
			t.Fatalf("log %d after GC: entry at the old head: %v %v", id, es, err)
		}
	}
	checkAfterGC(t, ctx, fresh, acks)
}

// checkAfterGC reads every acknowledged append from e.
func checkAfterGC(t *testing.T, ctx context.Context, e *engine.Engine, acks map[[3]int]kill9Ack) {
	t.Helper()
	for k, a := range acks {
		en, err := func() (lakestream.Entry, error) {
			l, err := e.Log(ctx, a.id)
			if err != nil {
				return lakestream.Entry{}, err
			}
			return l.ReadEntry(ctx, a.head.Offset)
		}()
		if err != nil || en.EntryHeader != a.head || !bytes.Equal(en.Payload, kill9Payload(a.id, a.w, a.seq)) {
			t.Fatalf("after GC: ack %v: entry %+v %v, want %+v", k, en.EntryHeader, err, a.head)
		}
	}
}
