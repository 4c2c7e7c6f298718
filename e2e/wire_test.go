package e2e

// Raw-protocol tests: a hand-driven connection (protocol package codec over
// TCP) checks the handshake, lookups, and that bad input closes only the
// offending connection.

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

type rawConn struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, c *cluster) *rawConn {
	t.Helper()
	conn, err := net.Dial("tcp", c.gw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	// Bound every read so a broken gateway fails the test instead of hanging it.
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	return &rawConn{t: t, c: conn, br: bufio.NewReader(conn)}
}

func (r *rawConn) write(f protocol.Frame) {
	r.t.Helper()
	if err := protocol.WriteFrame(r.c, f); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rawConn) cmd(c *pb.BaseCommand) { r.write(protocol.Frame{Cmd: c}) }

func (r *rawConn) read() *pb.BaseCommand {
	r.t.Helper()
	for {
		f, err := protocol.ReadFrame(r.br, 0)
		if err != nil {
			r.t.Fatalf("read: %v", err)
		}
		if f.Cmd.GetType() == pb.BaseCommand_PING {
			continue
		}
		return f.Cmd
	}
}

// expectClosed reads until the gateway closes the connection.
func (r *rawConn) expectClosed() {
	r.t.Helper()
	for {
		_, err := protocol.ReadFrame(r.br, 0)
		if err == nil {
			continue
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
			return
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			r.t.Fatalf("connection not closed: %v", err)
		}
		return // connection reset
	}
}

func (r *rawConn) connect() *pb.CommandConnected {
	r.t.Helper()
	r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: &pb.CommandConnect{
		ClientVersion: proto.String("raw-test"), ProtocolVersion: proto.Int32(99),
	}})
	c := r.read()
	if c.GetType() != pb.BaseCommand_CONNECTED {
		r.t.Fatalf("got %s, want CONNECTED", c.GetType())
	}
	return c.GetConnected()
}

func TestWireHandshakeLookupPing(t *testing.T) {
	c := startCluster(t)
	c.createPartitioned("persistent://public/default/wire-p", 4)
	r := dialRaw(t, c)
	conn := r.connect()
	if conn.GetProtocolVersion() != protocol.ProtocolVersion || conn.GetMaxMessageSize() != protocol.DefaultMaxMessageSize {
		t.Fatalf("CONNECTED %v", conn)
	}
	r.cmd(protocol.Ping())
	if got := r.read().GetType(); got != pb.BaseCommand_PONG {
		t.Fatalf("PING answered with %s", got)
	}
	r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_LOOKUP.Enum(), LookupTopic: &pb.CommandLookupTopic{
		Topic: proto.String("persistent://public/default/wire-p-partition-2"), RequestId: proto.Uint64(1),
	}})
	lr := r.read().GetLookupTopicResponse()
	if lr.GetResponse() != pb.CommandLookupTopicResponse_Connect || !lr.GetAuthoritative() ||
		lr.GetBrokerServiceUrl() != c.gw.ServiceURL() || lr.GetRequestId() != 1 {
		t.Fatalf("lookup response %v", lr)
	}
	for topic, want := range map[string]uint32{
		"persistent://public/default/wire-p":             4,
		"persistent://public/default/wire-p-partition-1": 0,
		"persistent://public/default/wire-auto":          0,
	} {
		r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_PARTITIONED_METADATA.Enum(), PartitionMetadata: &pb.CommandPartitionedTopicMetadata{
			Topic: proto.String(topic), RequestId: proto.Uint64(2),
		}})
		pm := r.read().GetPartitionMetadataResponse()
		if pm.GetResponse() != pb.CommandPartitionedTopicMetadataResponse_Success || pm.GetPartitions() != want {
			t.Fatalf("%s: partitioned metadata %v, want %d", topic, pm, want)
		}
	}
	r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_LOOKUP.Enum(), LookupTopic: &pb.CommandLookupTopic{
		Topic: proto.String("persistent://only-two/parts"), RequestId: proto.Uint64(3),
	}})
	if lr := r.read().GetLookupTopicResponse(); lr.GetResponse() != pb.CommandLookupTopicResponse_Failed || lr.GetError() != pb.ServerError_InvalidTopicName {
		t.Fatalf("bad name lookup %v", lr)
	}
}

func TestWireBadChecksumGetsSendError(t *testing.T) {
	c := startCluster(t)
	r := dialRaw(t, c)
	r.connect()
	r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: &pb.CommandProducer{
		Topic: proto.String("persistent://public/default/crc"), ProducerId: proto.Uint64(1), RequestId: proto.Uint64(1),
	}})
	if ps := r.read().GetProducerSuccess(); ps == nil || ps.GetProducerName() == "" {
		t.Fatalf("PRODUCER: %v", ps)
	}
	md, _ := protocol.MarshalMetadata(&pb.MessageMetadata{ProducerName: proto.String("x"), SequenceId: proto.Uint64(0), PublishTime: proto.Uint64(1)})
	b, err := protocol.AppendFrame(nil, protocol.Frame{
		Cmd: &pb.BaseCommand{Type: pb.BaseCommand_SEND.Enum(), Send: &pb.CommandSend{
			ProducerId: proto.Uint64(1), SequenceId: proto.Uint64(0)}},
		Metadata: md, Payload: []byte("hello"),
	})
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 0xff // corrupt the payload under the CRC
	if _, err := r.c.Write(b); err != nil {
		t.Fatal(err)
	}
	se := r.read().GetSendError()
	if se.GetError() != pb.ServerError_ChecksumError || se.GetSequenceId() != 0 {
		t.Fatalf("SEND_ERROR %v", se)
	}
	// The connection still works: a good SEND gets its receipt at offset 0.
	r.write(protocol.Frame{Cmd: &pb.BaseCommand{Type: pb.BaseCommand_SEND.Enum(), Send: &pb.CommandSend{
		ProducerId: proto.Uint64(1), SequenceId: proto.Uint64(1)}}, Metadata: md, Payload: []byte("hello")})
	rc := r.read().GetSendReceipt()
	if rc.GetSequenceId() != 1 || rc.GetMessageId().GetEntryId() != 0 {
		t.Fatalf("receipt %v", rc)
	}
}

// TestWireBadInputClosesOnlyThatConnection sends each kind of bad input on
// its own connection while a real client keeps producing on another.
func TestWireBadInputClosesOnlyThatConnection(t *testing.T) {
	c := startCluster(t)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://public/default/survivor", DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	frame := func(cmd *pb.BaseCommand) []byte {
		b, err := protocol.AppendCommand(nil, cmd)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tooLarge := binary.BigEndian.AppendUint32(nil, protocol.DefaultMaxFrameSize+1)
	garbage := append(binary.BigEndian.AppendUint32(nil, 12), binary.BigEndian.AppendUint32(nil, 8)...)
	garbage = append(garbage, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
	ping := frame(protocol.Ping())
	cases := map[string]struct {
		connect bool
		bytes   []byte
	}{
		"command before CONNECT": {false, ping},
		"frame above the limit":  {true, tooLarge},
		"garbage protobuf":       {true, garbage},
		"truncated frame":        {true, ping[:len(ping)-1]},
		"second CONNECT":         {true, frame(&pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: &pb.CommandConnect{ClientVersion: proto.String("x")}})},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := dialRaw(t, c)
			if tc.connect {
				r.connect()
			}
			if _, err := r.c.Write(tc.bytes); err != nil {
				t.Fatal(err)
			}
			if name == "truncated frame" {
				r.c.(*net.TCPConn).CloseWrite()
			}
			r.expectClosed()
			if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(name)}); err != nil {
				t.Fatalf("the other connection broke: %v", err)
			}
		})
	}
}

func TestProducerNamesAndAccessModes(t *testing.T) {
	c := startCluster(t)
	cl := c.client()
	topic := "persistent://public/default/names"
	p1, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	defer p1.Close()
	if p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "alice"}); err == nil {
		p.Close()
		t.Fatal("duplicate producer name accepted")
	} else if !containsAny(err.Error(), "ProducerBusy", "producer busy") {
		t.Fatalf("duplicate name: %v", err)
	}
	p2, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	if p2.Name() == "" || p2.Name() == "alice" {
		t.Fatalf("assigned name %q", p2.Name())
	}
	// An Exclusive producer is fenced while shared ones exist.
	if p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, ProducerAccessMode: pulsar.ProducerAccessModeExclusive}); err == nil {
		p.Close()
		t.Fatal("exclusive producer accepted next to shared ones")
	} else if !containsAny(err.Error(), "ProducerFenced", "fenced") {
		t.Fatalf("exclusive: %v", err)
	}
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		for i := 0; i+len(sub) <= len(s); i++ {
			if s[i:i+len(sub)] == sub {
				return true
			}
		}
	}
	return false
}
