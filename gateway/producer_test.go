package gateway

import (
	"bufio"
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

// fakeCatalog serves one non-partitioned stream backed by log.
type fakeCatalog struct {
	lakestream.StreamCatalog // nil: other methods panic (recovered per session)
	log                      lakestream.Log
}

func (c *fakeCatalog) LoadStream(ctx context.Context, id lakestream.StreamIdentifier) (lakestream.StreamMetadata, error) {
	return lakestream.StreamMetadata{ID: id}, nil
}

func (c *fakeCatalog) OpenLog(ctx context.Context, id lakestream.StreamIdentifier, partition int) (lakestream.Log, error) {
	return c.log, nil
}

// LoadNamespace: a topic load reads the namespace's deduplication policy.
func (c *fakeCatalog) LoadNamespace(ctx context.Context, name string) (lakestream.Namespace, error) {
	return lakestream.Namespace{Name: name}, nil
}

// orderedLog is a Log whose appends take their offset when enqueued and
// complete only when the test releases them.
type orderedLog struct {
	lakestream.Log
	notify bool // call AppendOptions.OnEnqueued

	mu       sync.Mutex
	next     int64
	inflight int
	maxIn    int
	started  chan int64              // offset of each enqueued append
	release  map[int64]chan struct{} // closed by the test
}

func newOrderedLog(notify bool) *orderedLog {
	return &orderedLog{notify: notify, started: make(chan int64, 100), release: map[int64]chan struct{}{}}
}

func (l *orderedLog) ID() lakestream.LogID { return 7 }

func (l *orderedLog) releaseOf(off int64) chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	ch := l.release[off]
	if ch == nil {
		ch = make(chan struct{})
		l.release[off] = ch
	}
	return ch
}

func (l *orderedLog) appendNotify(ctx context.Context, records int, onEnqueued func()) (lakestream.EntryHeader, error) {
	l.mu.Lock()
	off := l.next
	l.next += int64(records)
	l.inflight++
	l.maxIn = max(l.maxIn, l.inflight)
	l.mu.Unlock()
	if onEnqueued != nil {
		onEnqueued()
	}
	l.started <- off
	<-l.releaseOf(off)
	l.mu.Lock()
	l.inflight--
	l.mu.Unlock()
	return lakestream.EntryHeader{Offset: off, Records: int32(records)}, nil
}

func (l *orderedLog) Append(ctx context.Context, records int, payload []byte, opts ...lakestream.AppendOption) (lakestream.EntryHeader, error) {
	var onEnqueued func()
	if l.notify {
		onEnqueued = lakestream.ApplyAppendOptions(opts).OnEnqueued
	}
	return l.appendNotify(ctx, records, onEnqueued)
}

func startFake(t *testing.T, log lakestream.Log) (*Server, net.Conn, *bufio.Reader) {
	t.Helper()
	srv, err := Listen("127.0.0.1:0", Config{Catalog: &fakeCatalog{log: log}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	conn, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(conn)
	write := func(c *pb.BaseCommand) {
		if err := protocol.WriteFrame(conn, protocol.Frame{Cmd: c}); err != nil {
			t.Fatal(err)
		}
	}
	write(&pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: &pb.CommandConnect{ClientVersion: proto.String("t"), ProtocolVersion: proto.Int32(21)}})
	write(&pb.BaseCommand{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: &pb.CommandProducer{
		Topic: proto.String("persistent://public/default/t"), ProducerId: proto.Uint64(1), RequestId: proto.Uint64(1)}})
	for _, want := range []pb.BaseCommand_Type{pb.BaseCommand_CONNECTED, pb.BaseCommand_PRODUCER_SUCCESS} {
		if got := readCmd(t, br).GetType(); got != want {
			t.Fatalf("got %s, want %s", got, want)
		}
	}
	return srv, conn, br
}

func readCmd(t *testing.T, br *bufio.Reader) *pb.BaseCommand {
	t.Helper()
	f, err := protocol.ReadFrame(br, 0)
	if err != nil {
		t.Fatal(err)
	}
	return f.Cmd
}

func sendN(t *testing.T, conn net.Conn, n int) {
	t.Helper()
	md, _ := protocol.MarshalMetadata(&pb.MessageMetadata{ProducerName: proto.String("p"), SequenceId: proto.Uint64(0), PublishTime: proto.Uint64(1)})
	for i := range n {
		err := protocol.WriteFrame(conn, protocol.Frame{
			Cmd: &pb.BaseCommand{Type: pb.BaseCommand_SEND.Enum(), Send: &pb.CommandSend{
				ProducerId: proto.Uint64(1), SequenceId: proto.Uint64(uint64(i)), HighestSequenceId: proto.Uint64(uint64(i))}},
			Metadata: md, Payload: []byte{byte(i)},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// With a log that calls OnEnqueued, a producer's appends are all in
// flight at once, complete in any order, and the receipts still go out in
// SEND order with offsets in SEND order.
func TestProducerPipelinesAppendsReceiptsInOrder(t *testing.T) {
	log := newOrderedLog(true)
	_, conn, br := startFake(t, log)
	const n = 5
	sendN(t, conn, n)
	for range n { // every append starts before any completes: pipelined
		<-log.started
	}
	for off := int64(n - 1); off >= 0; off-- { // complete them backwards
		close(log.releaseOf(off))
	}
	for i := range n {
		r := readCmd(t, br).GetSendReceipt()
		if r.GetSequenceId() != uint64(i) || r.GetHighestSequenceId() != uint64(i) ||
			r.GetMessageId().GetEntryId() != uint64(i) || r.GetMessageId().GetLedgerId() != 7 {
			t.Fatalf("receipt %d: %v", i, r)
		}
	}
	if log.maxIn != n {
		t.Fatalf("max appends in flight %d, want %d", log.maxIn, n)
	}
}

// With one that does not, the next append starts only when the previous one returned
// (order first); receipts are still FIFO.
func TestProducerSerialisesAppendsWithoutEnqueueNotice(t *testing.T) {
	log := newOrderedLog(false)
	_, conn, br := startFake(t, log)
	const n = 4
	sendN(t, conn, n)
	for off := range int64(n) {
		if got := <-log.started; got != off {
			t.Fatalf("append %d started, want %d", got, off)
		}
		close(log.releaseOf(off))
	}
	for i := range n {
		if r := readCmd(t, br).GetSendReceipt(); r.GetSequenceId() != uint64(i) || r.GetMessageId().GetEntryId() != uint64(i) {
			t.Fatalf("receipt %d: %v", i, r)
		}
	}
	if log.maxIn != 1 {
		t.Fatalf("max appends in flight %d, want 1", log.maxIn)
	}
}

func TestParseTopicName(t *testing.T) {
	for in, want := range map[string]TopicName{
		"t":                               {"public", "default", "t", -1},
		"a/b/t":                           {"a", "b", "t", -1},
		"persistent://a/b/t-partition-3":  {"a", "b", "t-partition-3", 3},
		"persistent://a/b/t-partition-x":  {"a", "b", "t-partition-x", -1},
		"persistent://a/b/-partition-1":   {"a", "b", "-partition-1", -1},
		"persistent://a/b/t-partition-12": {"a", "b", "t-partition-12", 12},
	} {
		got, err := ParseTopicName(in)
		if err != nil || got != want {
			t.Errorf("%q: %+v, %v; want %+v", in, got, err, want)
		}
	}
	if got, _ := ParseTopicName("persistent://a/b/t-partition-3"); got.Base().Local != "t" || got.StreamID().String() != "a/b/t" {
		t.Errorf("base %+v", got.Base())
	}
	for _, bad := range []string{"non-persistent://a/b/t", "persistent://a/t", "persistent://a/b/c/d", "persistent:///b/t", ""} {
		if _, err := ParseTopicName(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
