package gateway

// FuzzSession: no input from a client may take a node down. Arbitrary
// frame sequences go into a real session (after a valid CONNECT) of a real
// gateway over a real engine on in-memory stores (mem:// objects, the
// in-memory metadata store); after each input a second, well-behaved
// connection must still produce a message, get its receipt and consume it.
// A panic anywhere in the process (session, producer, subscription actor,
// engine writer) fails the input. Seeds are real frame sequences of every
// command the gateway serves, and truncations of them. Run:
//
//	go test -run '^$' -fuzz '^FuzzSession$' -fuzztime 2000x ./gateway/

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/engine"
	"github.com/lakegate/lakegate/engine/catalog"
	"github.com/lakegate/lakegate/meta"
	"github.com/lakegate/lakegate/objstore"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

// fuzzIOTimeout bounds every socket operation of one fuzz input: a node
// that stops answering fails the input rather than hanging the fuzzer.
const fuzzIOTimeout = 10 * time.Second

// startMemGateway starts a gateway over an engine on in-memory stores;
// tweaks adjust its configuration.
func startMemGateway(tb testing.TB, tweaks ...func(*Config)) *Server {
	tb.Helper()
	store, err := objstore.Open(context.Background(), "mem://")
	if err != nil {
		tb.Fatal(err)
	}
	ms := meta.NewMem(meta.MemOptions{})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	e, err := engine.New(store, ms, engine.Options{Linger: time.Millisecond, Logger: quiet})
	if err != nil {
		tb.Fatal(err)
	}
	cat := catalog.New(ms, e, catalog.Options{})
	if _, err := cat.CreateNamespace(context.Background(), "public/default", nil); err != nil {
		tb.Fatal(err)
	}
	// Small bounds keep one input's work small; the handshake timeout ends
	// a session the input left waiting.
	cfg := Config{Catalog: cat, Logger: quiet, HandshakeTimeout: fuzzIOTimeout, IdleTimeout: time.Minute}
	for _, f := range tweaks {
		f(&cfg)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	cfg.Membership = engineMember(tb, e, "fuzz", ln, nil)
	srv, err := Serve(ln, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		srv.Close()
		cat.Close()
		e.Close()
		ms.Close()
		store.Close()
	})
	return srv
}

// frameBytes encodes frames (commands, and SENDs with their payload).
func frameBytes(tb testing.TB, fs ...protocol.Frame) []byte {
	tb.Helper()
	var b []byte
	for _, f := range fs {
		var err error
		if b, err = protocol.AppendFrame(b, f); err != nil {
			tb.Fatal(err)
		}
	}
	return b
}

func cmdFrame(t pb.BaseCommand_Type, fill func(*pb.BaseCommand)) protocol.Frame {
	c := &pb.BaseCommand{Type: t.Enum()}
	fill(c)
	return protocol.Frame{Cmd: c}
}

func connectFrame() protocol.Frame {
	return cmdFrame(pb.BaseCommand_CONNECT, func(c *pb.BaseCommand) {
		c.Connect = &pb.CommandConnect{ClientVersion: proto.String("fuzz"), ProtocolVersion: proto.Int32(21)}
	})
}

func producerFrame(topic string, producerID, requestID uint64) protocol.Frame {
	return cmdFrame(pb.BaseCommand_PRODUCER, func(c *pb.BaseCommand) {
		c.Producer = &pb.CommandProducer{Topic: proto.String(topic), ProducerId: proto.Uint64(producerID), RequestId: proto.Uint64(requestID)}
	})
}

func sendFrame(producerID, seq uint64, batch int32, payload []byte) protocol.Frame {
	md := &pb.MessageMetadata{ProducerName: proto.String("fuzz"), SequenceId: proto.Uint64(seq), PublishTime: proto.Uint64(1_700_000_000_000)}
	if batch > 0 {
		md.NumMessagesInBatch = proto.Int32(batch)
	}
	raw, err := protocol.MarshalMetadata(md)
	if err != nil {
		panic(err) // a valid message cannot fail to marshal
	}
	return protocol.Frame{
		Cmd: &pb.BaseCommand{Type: pb.BaseCommand_SEND.Enum(), Send: &pb.CommandSend{
			ProducerId: proto.Uint64(producerID), SequenceId: proto.Uint64(seq), NumMessages: proto.Int32(max(batch, 1))}},
		Metadata: raw, Payload: payload,
	}
}

func subscribeFrame(topic, sub string, consumerID, requestID uint64, st pb.CommandSubscribe_SubType) protocol.Frame {
	return cmdFrame(pb.BaseCommand_SUBSCRIBE, func(c *pb.BaseCommand) {
		c.Subscribe = &pb.CommandSubscribe{Topic: proto.String(topic), Subscription: proto.String(sub), SubType: st.Enum(),
			ConsumerId: proto.Uint64(consumerID), RequestId: proto.Uint64(requestID),
			InitialPosition: pb.CommandSubscribe_Earliest.Enum()}
	})
}

func flowFrame(consumerID uint64, permits uint32) protocol.Frame {
	return cmdFrame(pb.BaseCommand_FLOW, func(c *pb.BaseCommand) {
		c.Flow = &pb.CommandFlow{ConsumerId: proto.Uint64(consumerID), MessagePermits: proto.Uint32(permits)}
	})
}

func ackFrame(consumerID uint64, id *pb.MessageIdData) protocol.Frame {
	return cmdFrame(pb.BaseCommand_ACK, func(c *pb.BaseCommand) {
		c.Ack = &pb.CommandAck{ConsumerId: proto.Uint64(consumerID), AckType: pb.CommandAck_Individual.Enum(), MessageId: []*pb.MessageIdData{id}}
	})
}

// sessionSeeds are frame sequences a client sends after CONNECT.
func sessionSeeds(tb testing.TB) [][]byte {
	const topic = "persistent://public/default/fuzz"
	id := &pb.MessageIdData{LedgerId: proto.Uint64(1), EntryId: proto.Uint64(0)}
	seqs := [][]protocol.Frame{
		{producerFrame(topic, 1, 1), sendFrame(1, 0, 0, []byte("hello")), sendFrame(1, 1, 3, []byte("batch"))},
		{producerFrame(topic, 1, 1), sendFrame(1, 0, 1<<20, []byte("many records"))},
		{subscribeFrame(topic, "s", 1, 1, pb.CommandSubscribe_Shared), flowFrame(1, 100), ackFrame(1, id)},
		{subscribeFrame(topic, "k", 2, 1, pb.CommandSubscribe_Key_Shared), flowFrame(2, 1)},
		{subscribeFrame(topic, "f", 3, 1, pb.CommandSubscribe_Failover), flowFrame(3, 10),
			cmdFrame(pb.BaseCommand_REDELIVER_UNACKNOWLEDGED_MESSAGES, func(c *pb.BaseCommand) {
				c.RedeliverUnacknowledgedMessages = &pb.CommandRedeliverUnacknowledgedMessages{ConsumerId: proto.Uint64(3)}
			}),
			cmdFrame(pb.BaseCommand_SEEK, func(c *pb.BaseCommand) {
				c.Seek = &pb.CommandSeek{ConsumerId: proto.Uint64(3), RequestId: proto.Uint64(2), MessageId: id}
			}),
			cmdFrame(pb.BaseCommand_UNSUBSCRIBE, func(c *pb.BaseCommand) {
				c.Unsubscribe = &pb.CommandUnsubscribe{ConsumerId: proto.Uint64(3), RequestId: proto.Uint64(3)}
			})},
		{cmdFrame(pb.BaseCommand_LOOKUP, func(c *pb.BaseCommand) {
			c.LookupTopic = &pb.CommandLookupTopic{Topic: proto.String(topic), RequestId: proto.Uint64(1)}
		}), cmdFrame(pb.BaseCommand_PARTITIONED_METADATA, func(c *pb.BaseCommand) {
			c.PartitionMetadata = &pb.CommandPartitionedTopicMetadata{Topic: proto.String(topic + "-p"), RequestId: proto.Uint64(2)}
		}), cmdFrame(pb.BaseCommand_GET_TOPICS_OF_NAMESPACE, func(c *pb.BaseCommand) {
			c.GetTopicsOfNamespace = &pb.CommandGetTopicsOfNamespace{Namespace: proto.String("public/default"), RequestId: proto.Uint64(3)}
		}), cmdFrame(pb.BaseCommand_GET_LAST_MESSAGE_ID, func(c *pb.BaseCommand) {
			c.GetLastMessageId = &pb.CommandGetLastMessageId{ConsumerId: proto.Uint64(9), RequestId: proto.Uint64(4)}
		})},
		{cmdFrame(pb.BaseCommand_GET_OR_CREATE_SCHEMA, func(c *pb.BaseCommand) {
			c.GetOrCreateSchema = &pb.CommandGetOrCreateSchema{Topic: proto.String(topic), RequestId: proto.Uint64(1),
				Schema: &pb.Schema{Name: proto.String("s"), Type: pb.Schema_Json.Enum(), SchemaData: []byte(`{"type":"record","name":"r","fields":[]}`)}}
		}), cmdFrame(pb.BaseCommand_GET_SCHEMA, func(c *pb.BaseCommand) {
			c.GetSchema = &pb.CommandGetSchema{Topic: proto.String(topic), RequestId: proto.Uint64(2)}
		})},
		{producerFrame(topic, 1, 1), cmdFrame(pb.BaseCommand_CLOSE_PRODUCER, func(c *pb.BaseCommand) {
			c.CloseProducer = &pb.CommandCloseProducer{ProducerId: proto.Uint64(1), RequestId: proto.Uint64(2)}
		}), cmdFrame(pb.BaseCommand_CLOSE_CONSUMER, func(c *pb.BaseCommand) {
			c.CloseConsumer = &pb.CommandCloseConsumer{ConsumerId: proto.Uint64(1), RequestId: proto.Uint64(3)}
		})},
		{connectFrame()}, // a second CONNECT
	}
	var out [][]byte
	for _, fs := range seqs {
		b := frameBytes(tb, fs...)
		out = append(out, b, b[:len(b)/2], b[:len(b)-1])
	}
	return append(out, nil, []byte{0, 0, 0, 0}, []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1})
}

// probe is the well-behaved connection: a producer and an exclusive
// consumer on one topic of its own.
type probe struct {
	conn net.Conn
	br   *bufio.Reader
	seq  uint64
}

func newProbe(tb testing.TB, srv *Server) *probe { return newProbeConnect(tb, srv, connectFrame()) }

// newProbeConnect is newProbe with its own CONNECT (credentials).
func newProbeConnect(tb testing.TB, srv *Server, connect protocol.Frame) *probe {
	tb.Helper()
	conn, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	p := &probe{conn: conn, br: bufio.NewReader(conn)}
	// A topic no input can name (a mutated seed could otherwise produce
	// to it).
	topic := fmt.Sprintf("persistent://public/default/probe-%x", rand.Uint64())
	conn.SetDeadline(time.Now().Add(fuzzIOTimeout))
	if _, err := conn.Write(frameBytes(tb, connect, producerFrame(topic, 1, 1),
		subscribeFrame(topic, "probe", 1, 2, pb.CommandSubscribe_Exclusive), flowFrame(1, 1<<30))); err != nil {
		tb.Fatal(err)
	}
	for _, want := range []pb.BaseCommand_Type{pb.BaseCommand_CONNECTED, pb.BaseCommand_PRODUCER_SUCCESS, pb.BaseCommand_SUCCESS} {
		if c, err := p.next(); err != nil || c.Cmd.GetType() != want {
			tb.Fatalf("probe set-up: got %v (%v), want %s", c.Cmd.GetType(), err, want)
		}
	}
	return p
}

// next reads the next frame that is not a PING (answered).
func (p *probe) next() (protocol.Frame, error) {
	for {
		f, err := protocol.ReadFrame(p.br, 0)
		if err != nil {
			return f, err
		}
		if f.Cmd.GetType() == pb.BaseCommand_PING {
			if err := protocol.WriteFrame(p.conn, protocol.Frame{Cmd: protocol.Pong()}); err != nil {
				return f, err
			}
			continue
		}
		return f, nil
	}
}

// roundTrip produces one message, waits for its receipt and consumes and
// acknowledges it.
func (p *probe) roundTrip() error {
	p.conn.SetDeadline(time.Now().Add(fuzzIOTimeout))
	payload := fmt.Appendf(nil, "probe %d", p.seq)
	if err := protocol.WriteFrame(p.conn, sendFrame(1, p.seq, 0, payload)); err != nil {
		return fmt.Errorf("probe send: %w", err)
	}
	p.seq++
	var receipt, msg bool
	for !receipt || !msg {
		f, err := p.next()
		if err != nil {
			return fmt.Errorf("probe: %w", err)
		}
		switch f.Cmd.GetType() {
		case pb.BaseCommand_SEND_RECEIPT:
			receipt = true
		case pb.BaseCommand_MESSAGE:
			if !bytes.Equal(f.Payload, payload) {
				return fmt.Errorf("probe consumed %q, want %q", f.Payload, payload)
			}
			msg = true
			if err := protocol.WriteFrame(p.conn, ackFrame(1, f.Cmd.GetMessage().GetMessageId())); err != nil {
				return err
			}
		case pb.BaseCommand_SEND_ERROR, pb.BaseCommand_ERROR, pb.BaseCommand_CLOSE_PRODUCER, pb.BaseCommand_CLOSE_CONSUMER:
			return fmt.Errorf("probe: %s: %v", f.Cmd.GetType(), f.Cmd)
		}
	}
	return nil
}

// feedSession opens a connection, writes CONNECT, in and a PING, closes
// its write side (so a frame the input left incomplete ends there), and
// waits until the session has handled all of it: the PING's PONG, or the
// connection's end. It fails only when the session does neither within
// fuzzIOTimeout.
func feedSession(srv *Server, connect, in, ping []byte) error {
	conn, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(fuzzIOTimeout))
	msg := append(append(append([]byte(nil), connect...), in...), ping...)
	if _, err := conn.Write(msg); isTimeout(err) {
		return fmt.Errorf("the session stopped reading: %w", err)
	}
	conn.(*net.TCPConn).CloseWrite()
	br := bufio.NewReader(conn)
	for {
		fr, err := protocol.ReadFrame(br, 0)
		switch {
		case isTimeout(err):
			return fmt.Errorf("the session neither answered the PING nor closed within %s", fuzzIOTimeout)
		case err != nil:
			return nil // closed
		case fr.Cmd.GetType() == pb.BaseCommand_PONG:
			return nil
		}
	}
}

func FuzzSession(f *testing.F) {
	for _, s := range sessionSeeds(f) {
		f.Add(s)
	}
	srv := startMemGateway(f)
	p := newProbe(f, srv)
	connect := frameBytes(f, connectFrame())
	ping := frameBytes(f, protocol.Frame{Cmd: protocol.Ping()})
	f.Fuzz(func(t *testing.T, in []byte) {
		if err := feedSession(srv, connect, in, ping); err != nil {
			t.Fatal(err)
		}
		if err := p.roundTrip(); err != nil {
			t.Fatalf("the well-behaved connection stopped working: %v", err)
		}
	})
}

// TestSessionSeedsKeepTheNodeUp runs FuzzSession's seeds as a plain test.
func TestSessionSeedsKeepTheNodeUp(t *testing.T) {
	srv := startMemGateway(t)
	p := newProbe(t, srv)
	connect := frameBytes(t, connectFrame())
	ping := frameBytes(t, protocol.Frame{Cmd: protocol.Ping()})
	for i, s := range sessionSeeds(t) {
		if err := feedSession(srv, connect, s, ping); err != nil {
			t.Fatalf("seed %d: %v", i, err)
		}
		if err := p.roundTrip(); err != nil {
			t.Fatalf("after seed %d: %v", i, err)
		}
	}
}
