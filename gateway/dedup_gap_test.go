package gateway

// TestDedupFailedFlush: with deduplication on, a SEND whose WAL flush
// failed is not followed into the log by the producer's later SENDs (a
// later flush must not commit them), so that after a restart — or an
// ownership move: the new owner rebuilds the deduplication state from the
// log — the client's resend of the failed SEND is stored, not answered as a
// duplicate of something never stored ("restart"), and so that on the
// same node the resends are stored in order ("reconnect"). The real gateway, partition actor
// and engine on in-memory stores; the object store fails the first WAL
// object's PUT while the next one goes through (objstore.Faulty); the
// client is a raw protocol connection doing what the Pulsar clients do: on
// SEND_ERROR it closes the connection and resends everything not
// acknowledged, in order, on a new one.
//
//	go test -count=1 -run TestDedupFailedFlush ./gateway/

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/engine"
	"github.com/lakegate/lakegate/engine/catalog"
	"github.com/lakegate/lakegate/meta"
	"github.com/lakegate/lakegate/objstore"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

func TestDedupFailedFlush(t *testing.T) {
	for _, restart := range []bool{true, false} {
		name := map[bool]string{true: "restart", false: "reconnect"}[restart]
		t.Run(name, func(t *testing.T) { testDedupFailedFlush(t, restart) })
	}
}

func testDedupFailedFlush(t *testing.T, restart bool) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	mem, err := objstore.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	store := objstore.NewFaulty(mem, 1)
	ms := meta.NewMem(meta.MemOptions{})
	t.Cleanup(func() { ms.Close(); mem.Close() })
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	// The first WAL object's PUT is held until released, then fails (every
	// attempt: the flush fails at its CommitTimeout); later objects go
	// through, each announced on later.
	var (
		mu      sync.Mutex
		first   string
		held    = make(chan struct{})
		release = make(chan struct{})
		later   = make(chan string, 64)
	)
	store.SetHook(func(ctx context.Context, op objstore.Op, key string) error {
		if op&(objstore.OpPutIfAbsent|objstore.OpPut) == 0 || !strings.Contains(key, "wal/") {
			return nil
		}
		mu.Lock()
		if first == "" {
			first = key
			close(held)
		}
		isFirst := key == first
		mu.Unlock()
		if !isFirst {
			later <- key
			return nil
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return objstore.ErrInjected
	})

	type node struct {
		srv  *Server
		e    *engine.Engine
		stop func()
	}
	starts := 0
	start := func() node {
		e, err := engine.New(store, ms, engine.Options{Linger: time.Millisecond, CommitTimeout: time.Second, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		cat := catalog.New(ms, e, catalog.Options{})
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		starts++
		m := engineMember(t, e, fmt.Sprint("node-", starts), ln, nil)
		srv, err := Serve(ln, Config{Catalog: cat, Logger: quiet, Membership: m})
		if err != nil {
			t.Fatal(err)
		}
		return node{srv: srv, e: e, stop: func() { srv.Close(); m.Close(context.Background()); cat.Close(); e.Close() }}
	}
	n1 := start()
	{
		cat := catalog.New(ms, n1.e, catalog.Options{})
		if _, err := cat.CreateNamespace(ctx, "public/default", map[string]string{"lakegate.dedup": "true"}); err != nil {
			t.Fatal(err)
		}
	}
	const topic = "persistent://public/default/dedup-gap"

	type conn struct {
		c  net.Conn
		br *bufio.Reader
	}
	dial := func(n node) (conn, int64) {
		c, err := net.Dial("tcp", n.srv.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(time.Minute))
		cn := conn{c: c, br: bufio.NewReader(c)}
		write := frameBytes(t, connectFrame(), cmdFrame(pb.BaseCommand_PRODUCER, func(c *pb.BaseCommand) {
			c.Producer = &pb.CommandProducer{Topic: proto.String(topic), ProducerId: proto.Uint64(1), RequestId: proto.Uint64(1),
				ProducerName: proto.String("p")}
		}))
		if _, err := c.Write(write); err != nil {
			t.Fatal(err)
		}
		if r := readCmd(t, cn.br); r.GetType() != pb.BaseCommand_CONNECTED {
			t.Fatalf("CONNECT: %v", r)
		}
		r := readCmd(t, cn.br)
		if r.GetType() != pb.BaseCommand_PRODUCER_SUCCESS {
			t.Fatalf("PRODUCER: %v", r)
		}
		return cn, r.GetProducerSuccess().GetLastSequenceId()
	}
	send := func(cn conn, seq uint64) {
		t.Helper()
		md, err := protocol.MarshalMetadata(&pb.MessageMetadata{ProducerName: proto.String("p"), SequenceId: proto.Uint64(seq),
			PublishTime: proto.Uint64(1_700_000_000_000)})
		if err != nil {
			t.Fatal(err)
		}
		f := protocol.Frame{Cmd: &pb.BaseCommand{Type: pb.BaseCommand_SEND.Enum(), Send: &pb.CommandSend{
			ProducerId: proto.Uint64(1), SequenceId: proto.Uint64(seq), NumMessages: proto.Int32(1)}},
			Metadata: md, Payload: []byte{byte('0' + seq)}}
		if _, err := cn.c.Write(frameBytes(t, f)); err != nil {
			t.Fatal(err)
		}
	}
	// answer reads the answer to SEND seq: "stored", "dup" or "error".
	answer := func(cn conn, seq uint64) string {
		t.Helper()
		r := readCmd(t, cn.br)
		switch {
		case r.GetType() == pb.BaseCommand_SEND_RECEIPT && r.GetSendReceipt().GetSequenceId() == seq:
			if id := r.GetSendReceipt().GetMessageId(); int64(id.GetLedgerId()) == -1 && int64(id.GetEntryId()) == -1 {
				return "dup"
			}
			return "stored"
		case r.GetType() == pb.BaseCommand_SEND_ERROR && r.GetSendError().GetSequenceId() == seq:
			// A code on which the Pulsar clients reconnect and resend.
			if code := r.GetSendError().GetError(); code != pb.ServerError_PersistenceError {
				t.Errorf("SEND_ERROR of %d: %v (%s), want PersistenceError", seq, code, r.GetSendError().GetMessage())
			}
			return "error"
		}
		t.Fatalf("answer to SEND %d: %v", seq, r)
		return ""
	}

	// SEND 0 is in the first object, whose PUT is held; SEND 1 goes into
	// the next object, whose PUT succeeds; then the first PUT fails.
	c1, _ := dial(n1)
	send(c1, 0)
	select {
	case <-held:
	case <-ctx.Done():
		t.Fatal("the first WAL PUT never came")
	}
	send(c1, 1)
	select {
	case <-later:
	case <-ctx.Done():
		t.Fatal("the second WAL PUT never came")
	}
	close(release)
	if a := answer(c1, 0); a != "error" {
		t.Fatalf("SEND 0 (its object's PUT failed): %s, want error", a)
	}
	// A SEND the client had pipelined before it saw the error.
	send(c1, 2)
	acked := map[uint64]string{}
	for seq := uint64(1); seq <= 2; seq++ {
		if a := answer(c1, seq); a != "error" {
			acked[seq] = a
			t.Logf("SEND %d after the failed SEND 0 on the same connection: %s", seq, a)
		}
	}
	// The client leaves (a real one just closes the connection; closing
	// the producer first makes its name free before the test goes on).
	if _, err := c1.c.Write(frameBytes(t, cmdFrame(pb.BaseCommand_CLOSE_PRODUCER, func(c *pb.BaseCommand) {
		c.CloseProducer = &pb.CommandCloseProducer{ProducerId: proto.Uint64(1), RequestId: proto.Uint64(2)}
	}))); err != nil {
		t.Fatal(err)
	}
	if r := readCmd(t, c1.br); r.GetType() != pb.BaseCommand_SUCCESS {
		t.Fatalf("CLOSE_PRODUCER: %v", r)
	}
	c1.c.Close()

	// The client resends 0..2 on a new connection: to the same node, or
	// after the node restarted (as a new owner would, it rebuilds the
	// deduplication state from the log).
	n2 := n1
	if restart {
		n1.stop()
		store.SetHook(nil)
		n2 = start()
	}
	defer n2.stop()
	c2, last := dial(n2)
	defer c2.c.Close()
	t.Logf("last_sequence_id on the new connection: %d", last)
	for seq := uint64(0); seq <= 2; seq++ {
		send(c2, seq)
	}
	for seq := uint64(0); seq <= 2; seq++ {
		switch a := answer(c2, seq); a {
		case "error":
			t.Fatalf("resend of %d failed", seq)
		default:
			acked[seq] = a
		}
	}

	// Every acknowledged SEND is in the log, once and in order.
	tn, err := broker.ParseTopicName(topic)
	if err != nil {
		t.Fatal(err)
	}
	st, err := catalog.New(ms, n2.e, catalog.Options{}).Stream(ctx, tn.StreamID())
	if err != nil {
		t.Fatal(err)
	}
	log, err := st.Log(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	es, err := log.ReadEntries(ctx, 0, 100, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var stored []uint64
	for _, e := range es {
		raw, _, err := protocol.SplitEntry(e.Payload)
		if err != nil {
			t.Fatal(err)
		}
		md, err := protocol.ParseMetadata(raw)
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, md.GetSequenceId())
	}
	t.Logf("acknowledged %v; stored in the log: %v", acked, stored)
	for seq, a := range acked {
		found := false
		for _, s := range stored {
			found = found || s == seq
		}
		if !found {
			t.Errorf("SEND %d acknowledged (%s) but not stored", seq, a)
		}
	}
	for i := 1; i < len(stored); i++ {
		if stored[i] <= stored[i-1] {
			t.Errorf("log holds the producer's sequence ids %v: not once each in order", stored)
			break
		}
	}
}
