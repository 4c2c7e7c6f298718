package gateway

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

// A client that stops answering is pinged after IdleTimeout/2 of silence
// and disconnected after IdleTimeout; one that answers PINGs stays.
func TestIdleConnectionIsPingedThenClosed(t *testing.T) {
	srv, err := listenTest(t, Config{Catalog: &fakeCatalog{}, IdleTimeout: 300 * time.Millisecond})
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

// Before CONNECT a connection may send nothing but a CONNECT of at most
// preConnectFrameMax bytes: a larger announced frame, an unknown command
// or any other command closes it at once (not at the handshake timeout,
// which junk never extends), and a CONNECT just under the limit is
// answered.
func TestPreConnectInputIsBounded(t *testing.T) {
	srv, err := listenTest(t, Config{Catalog: &fakeCatalog{}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	dial := func() (net.Conn, *bufio.Reader) {
		conn, err := net.Dial("tcp", srv.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		// Far below the 30 s handshake timeout: a connection still open
		// by then was not closed for its input.
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		return conn, bufio.NewReader(conn)
	}
	expectClosed := func(t *testing.T, br *bufio.Reader) {
		t.Helper()
		f, err := protocol.ReadFrame(br, 0)
		var ne net.Error
		if err == nil || errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("connection still open: %v %v", f.Cmd.GetType(), err)
		}
	}
	connect := &pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(),
		Connect: &pb.CommandConnect{ClientVersion: proto.String("t"), ProtocolVersion: proto.Int32(6)}}

	t.Run("announced length over the limit", func(t *testing.T) {
		for _, total := range []uint32{preConnectFrameMax + 1, 5 << 20, 1 << 31} {
			conn, br := dial()
			conn.Write(binary.BigEndian.AppendUint32(nil, total))
			expectClosed(t, br)
		}
	})
	t.Run("unknown commands", func(t *testing.T) {
		conn, br := dial()
		// BaseCommand{type: 999}: well formed, of a type nobody knows.
		unknown := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 999)
		frame := binary.BigEndian.AppendUint32(nil, uint32(4+len(unknown)))
		frame = binary.BigEndian.AppendUint32(frame, uint32(len(unknown)))
		frame = append(frame, unknown...)
		go func() {
			// Junk every 10 ms: the server must not keep waiting for more.
			for range 1000 {
				if _, err := conn.Write(frame); err != nil {
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
		expectClosed(t, br)
	})
	t.Run("PING", func(t *testing.T) {
		conn, br := dial()
		protocol.WriteFrame(conn, protocol.Frame{Cmd: protocol.Ping()})
		expectClosed(t, br)
	})
	t.Run("CONNECT just under the limit", func(t *testing.T) {
		conn, br := dial()
		c := proto.Clone(connect).(*pb.BaseCommand)
		c.Connect.AuthMethodName = proto.String("none")
		b, _ := protocol.AppendCommand(nil, c)
		c.Connect.AuthData = make([]byte, preConnectFrameMax-len(b)-8)
		b, _ = protocol.AppendCommand(nil, c)
		if total := len(b) - 4; total > preConnectFrameMax || total < preConnectFrameMax-16 {
			t.Fatalf("CONNECT of %d bytes, want just under %d", total, preConnectFrameMax)
		}
		conn.Write(b)
		if got := readCmd(t, br).GetType(); got != pb.BaseCommand_CONNECTED {
			t.Fatalf("got %s, want CONNECTED", got)
		}
	})
}

// The handshake deadline runs from accept: a CONNECT trickled byte by byte
// past it is not waited for.
func TestHandshakeDeadlineFromAccept(t *testing.T) {
	srv, err := listenTest(t, Config{Catalog: &fakeCatalog{}, HandshakeTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	b, _ := protocol.AppendCommand(nil, &pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(),
		Connect: &pb.CommandConnect{ClientVersion: proto.String("t"), ProtocolVersion: proto.Int32(6)}})
	start := time.Now()
	go func() {
		for _, c := range b { // about 100 ms a byte: seconds for the frame
			if _, err := conn.Write([]byte{c}); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	f, err := protocol.ReadFrame(bufio.NewReader(conn), 0)
	if err == nil {
		t.Fatalf("got %s on a trickled CONNECT", f.Cmd.GetType())
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("connection not closed at the handshake deadline")
	}
	if took := time.Since(start); took > time.Duration(len(b))*100*time.Millisecond {
		t.Fatalf("closed after %v: the whole frame was waited for", took)
	}
}

// The names given to unnamed producers differ from one start of a server
// to the next (with deduplication a reused name would inherit an earlier
// producer's last sequence id), and carry the member id.
func TestProducerNamePrefixUniquePerStart(t *testing.T) {
	seen := map[string]bool{}
	for range 2 {
		srv, err := listenTest(t, Config{Catalog: &fakeCatalog{}})
		if err != nil {
			t.Fatal(err)
		}
		srv.Close()
		p := srv.namePrefix
		if !strings.HasPrefix(p, "lakegate-test-") || len(p) <= len("lakegate-test-") {
			t.Fatalf("prefix %q: want lakegate-<member id>-<random>", p)
		}
		if seen[p] {
			t.Fatalf("prefix %q repeated by a restart", p)
		}
		seen[p] = true
	}
}

// A gateway is always a cluster member (standalone: the only one).
func TestServeRequiresMembership(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := Serve(ln, Config{Catalog: &fakeCatalog{}}); err == nil || !strings.Contains(err.Error(), "Membership is required") {
		t.Fatalf("Serve without a membership: %v", err)
	}
}
