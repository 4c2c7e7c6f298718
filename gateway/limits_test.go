package gateway

import (
	"bufio"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

// Unit tests of the limits' building blocks (limits.go, rate.go), on an
// injected clock; the limits themselves are tested end to end with real
// clients in e2e/limits_test.go.

func TestTokenBucketPacesToItsRate(t *testing.T) {
	var b tokenBucket
	b.set(RateLimit{Msgs: 10}) // 10 messages per second, a burst of 10
	t0 := time.Unix(1000, 0)
	if d := b.delay(t0); d != 0 {
		t.Fatalf("a fresh bucket asks to wait %v", d)
	}
	if n := b.budget(t0); n != 10 {
		t.Fatalf("budget %d, want the burst of 10", n)
	}
	// A read of 25 goes through (what was read is not refused), leaving a
	// debt of 15: the next message waits 1.6 s (16 tokens at 10/s).
	if d := b.take(t0, 25, 0); d != 1600*time.Millisecond {
		t.Fatalf("after 25: wait %v, want 1.6s", d)
	}
	if d := b.delay(t0.Add(time.Second)); d != 600*time.Millisecond {
		t.Fatalf("1 s later: wait %v, want 0.6s", d)
	}
	if d := b.delay(t0.Add(1600 * time.Millisecond)); d != 0 {
		t.Fatalf("1.6 s later: wait %v, want none", d)
	}
	if n := b.budget(t0.Add(1600 * time.Millisecond)); n != 1 {
		t.Fatalf("budget %d, want 1", n)
	}
	// Idle for long: tokens are capped at one period's worth.
	if n := b.budget(t0.Add(time.Hour)); n != 10 {
		t.Fatalf("budget after an hour %d, want 10", n)
	}
}

func TestTokenBucketBytesAndPeriod(t *testing.T) {
	var b tokenBucket
	b.set(RateLimit{Bytes: 1000, Period: 2 * time.Second}) // 1000 bytes per 2 s
	t0 := time.Unix(1000, 0)
	if d := b.take(t0, 1, 1000); d <= 0 {
		t.Fatal("a bucket spent to 0 bytes lets the next one go")
	}
	if n := b.budget(t0); n != 0 {
		t.Fatalf("budget %d, want 0 (messages not limited)", n)
	}
	if d := b.delay(t0.Add(2 * time.Second)); d != 0 {
		t.Fatalf("a period later: wait %v", d)
	}
	// A changed limit starts full; the same limit keeps the state.
	b.take(t0.Add(2*time.Second), 1, 5000)
	b.set(RateLimit{Bytes: 1000, Period: 2 * time.Second})
	if d := b.delay(t0.Add(2 * time.Second)); d == 0 {
		t.Fatal("set with the same limit forgot the debt")
	}
	b.set(RateLimit{})
	if d := b.take(t0, 1000, 1<<30); d != 0 {
		t.Fatalf("an unlimited bucket asks to wait %v", d)
	}
}

func TestGateClosesAtLimitOpensAtHalf(t *testing.T) {
	g := gate{limit: 4}
	for range 3 {
		g.add(1)
	}
	if g.closed() != nil {
		t.Fatal("closed below the limit")
	}
	g.add(1)
	ch := g.closed()
	if ch == nil {
		t.Fatal("open at the limit")
	}
	g.add(-1) // 3: above half
	select {
	case <-ch:
		t.Fatal("opened above half the limit")
	default:
	}
	g.add(-1) // 2 = half
	select {
	case <-ch:
	default:
		t.Fatal("still closed at half the limit")
	}
	if g.closed() != nil {
		t.Fatal("closed after opening")
	}
	unlimited := gate{}
	unlimited.add(1 << 40)
	if unlimited.closed() != nil {
		t.Fatal("a gate without a limit closed")
	}
}

// failingListener fails its first Accept with a passing error (as EMFILE:
// the process is out of file descriptors), then accepts.
type failingListener struct {
	net.Listener
	failed atomic.Bool
}

func (l *failingListener) Accept() (net.Conn, error) {
	if !l.failed.Swap(true) {
		return nil, errors.New("accept tcp: too many open files")
	}
	return l.Listener.Accept()
}

// The accept loop outlives a failed Accept (out of file descriptors): it
// waits and accepts again; the listener is not left unserved.
func TestAcceptSurvivesAFailedAccept(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := Serve(&failingListener{Listener: ln}, Config{Catalog: &fakeCatalog{}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	protocol.WriteFrame(conn, protocol.Frame{Cmd: &pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(),
		Connect: &pb.CommandConnect{ClientVersion: proto.String("t"), ProtocolVersion: proto.Int32(6)}}})
	if c := readCmd(t, bufio.NewReader(conn)); c.GetType() != pb.BaseCommand_CONNECTED {
		t.Fatalf("got %s, want CONNECTED", c.GetType())
	}
}
