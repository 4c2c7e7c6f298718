package gateway

import (
	"bufio"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/internal/testmember"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

// Unit tests of the limits' building blocks (limits.go; the token buckets: broker/rate_test.go), on an
// injected clock; the limits themselves are tested end to end with real
// clients in e2e/limits_test.go.

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
	srv, err := Serve(&failingListener{Listener: ln}, Config{Catalog: &fakeCatalog{}, Membership: testmember.New(selfOf("test", ln, nil))})
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
