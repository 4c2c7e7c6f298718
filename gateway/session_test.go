package gateway

import (
	"bufio"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

// A client that stops answering is pinged after IdleTimeout/2 of silence
// and disconnected after IdleTimeout; one that answers PINGs stays.
func TestIdleConnectionIsPingedThenClosed(t *testing.T) {
	srv, err := Listen("127.0.0.1:0", Config{Catalog: &fakeCatalog{}, IdleTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	dial := func() (net.Conn, *bufio.Reader) {
		conn, err := net.Dial("tcp", srv.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(20 * time.Second))
		protocol.WriteFrame(conn, protocol.Frame{Cmd: &pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(),
			Connect: &pb.CommandConnect{ClientVersion: proto.String("t"), ProtocolVersion: proto.Int32(6)}}})
		br := bufio.NewReader(conn)
		c := readCmd(t, br)
		if c.GetConnected().GetProtocolVersion() != 6 {
			t.Fatalf("CONNECTED %v: want the client's lower version", c)
		}
		return conn, br
	}

	silent, br := dial()
	defer silent.Close()
	if got := readCmd(t, br).GetType(); got != pb.BaseCommand_PING {
		t.Fatalf("got %s, want PING", got)
	}
	for {
		f, err := protocol.ReadFrame(br, 0)
		if err == nil && f.Cmd.GetType() == pb.BaseCommand_PING {
			continue // pings go on until the read deadline passes
		}
		if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("silent connection not closed: %v %v", f.Cmd.GetType(), err)
		}
		break
	}

	live, br := dial()
	defer live.Close()
	for range 4 { // four pings answered: well past IdleTimeout
		if got := readCmd(t, br).GetType(); got != pb.BaseCommand_PING {
			t.Fatalf("got %s, want PING", got)
		}
		if err := protocol.WriteFrame(live, protocol.Frame{Cmd: protocol.Pong()}); err != nil {
			t.Fatalf("live connection closed: %v", err)
		}
	}
}
