package gateway_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/engine"
	"github.com/lakegate/lakegate/engine/catalog"
	"github.com/lakegate/lakegate/gateway"
	"github.com/lakegate/lakegate/meta"
	"github.com/lakegate/lakegate/objstore"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

// BenchmarkSend measures the gateway's cost per SEND: one producer over a
// real TCP connection pipelining b.N SENDs of a 1 KiB message (up to 1000
// outstanding, as the Go client's default) into an in-memory engine (mem
// store and metadata, 1 ms linger), reading every receipt. ns/op, B/op and
// allocs/op are per SEND, for the whole node (gateway, actors, engine) plus
// the raw client's reads of receipts (its frames are built beforehand).
//
//	go test -run '^$' -bench BenchmarkSend -benchmem ./gateway/
func BenchmarkSend(b *testing.B) {
	ctx := context.Background()
	st, err := objstore.Open(ctx, "mem://")
	if err != nil {
		b.Fatal(err)
	}
	ms := meta.NewMem(meta.MemOptions{})
	e, err := engine.New(st, ms, engine.Options{Linger: time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	cat := catalog.New(ms, e, catalog.Options{})
	if _, err := cat.CreateNamespace(ctx, "public/default", nil); err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	// A node on its own is the one member of its cluster.
	m, err := e.JoinCluster(ctx, engine.MembershipConfig{ID: "bench", Endpoints: map[string]string{"pulsar": "pulsar://" + ln.Addr().String()}})
	if err != nil {
		b.Fatal(err)
	}
	srv, err := gateway.Serve(ln, gateway.Config{Catalog: cat, Logger: slog.New(slog.DiscardHandler), Membership: m})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { srv.Close(); m.Close(ctx); e.Close(); ms.Close(); st.Close() }()

	conn, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReaderSize(conn, 64<<10)
	bw := bufio.NewWriterSize(conn, 64<<10)
	cmd := func(c *pb.BaseCommand) {
		if err := protocol.WriteFrame(bw, protocol.Frame{Cmd: c}); err != nil {
			b.Fatal(err)
		}
		bw.Flush()
	}
	read := func() *pb.BaseCommand {
		f, err := protocol.ReadFrame(br, 0)
		if err != nil {
			b.Fatal(err)
		}
		return f.Cmd
	}
	cmd(&pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: &pb.CommandConnect{ClientVersion: proto.String("bench"), ProtocolVersion: proto.Int32(21)}})
	read()
	cmd(&pb.BaseCommand{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: &pb.CommandProducer{
		Topic: proto.String("persistent://public/default/bench-send"), ProducerId: proto.Uint64(1), RequestId: proto.Uint64(1), ProducerName: proto.String("bench")}})
	if r := read(); r.GetType() != pb.BaseCommand_PRODUCER_SUCCESS {
		b.Fatalf("PRODUCER: %v", r)
	}
	payload := make([]byte, 1024)
	md, err := protocol.MarshalMetadata(&pb.MessageMetadata{ProducerName: proto.String("bench"), SequenceId: proto.Uint64(0),
		PublishTime: proto.Uint64(uint64(time.Now().UnixMilli()))})
	if err != nil {
		b.Fatal(err)
	}
	frame := func(seq uint64) []byte {
		f, err := protocol.AppendFrame(nil, protocol.Frame{
			Cmd:      &pb.BaseCommand{Type: pb.BaseCommand_SEND.Enum(), Send: &pb.CommandSend{ProducerId: proto.Uint64(1), SequenceId: proto.Uint64(seq)}},
			Metadata: md, Payload: payload,
		})
		if err != nil {
			b.Fatal(err)
		}
		return f
	}
	frames := make([][]byte, b.N) // built before the clock starts: only the node is measured
	for i := range frames {
		frames[i] = frame(uint64(i))
	}
	const window = 1000 // SENDs outstanding, as the Go client's default
	slots := make(chan struct{}, window)
	receipts := make(chan error, 1)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	b.ResetTimer()
	go func() {
		for i := range b.N {
			c := read()
			if c.GetType() != pb.BaseCommand_SEND_RECEIPT || c.GetSendReceipt().GetSequenceId() != uint64(i) {
				receipts <- fmt.Errorf("receipt %d: %v", i, c)
				return
			}
			<-slots
		}
		receipts <- nil
	}()
	for i := range b.N {
		select {
		case slots <- struct{}{}:
		default:
			bw.Flush() // the window is full: let the node see what is written
			slots <- struct{}{}
		}
		bw.Write(frames[i])
	}
	bw.Flush()
	if err := <-receipts; err != nil {
		b.Fatal(err)
	}
}
