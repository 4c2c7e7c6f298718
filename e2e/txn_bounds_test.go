package e2e

// A connection may have at most txnRequestsMax (64) coordinator requests
// in flight; past that its reader waits for an answer to leave (gateway
// txn.go). A client that pipelines far more than that on one connection
// must still get every answer, in full, with nothing dropped and the
// connection kept. Run: go test -count=1 -run TxnRequestsPast ./e2e/

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
	"github.com/lakegate/lakegate/txn"
)

func TestTxnRequestsPastTheConnectionBound(t *testing.T) {
	const n = 500 // well past the 64 a connection may have in flight
	c := startCluster(t)
	r := dialRaw(t, c)
	r.connect()
	r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_TC_CLIENT_CONNECT_REQUEST.Enum(), TcClientConnectRequest: &pb.CommandTcClientConnectRequest{
		RequestId: proto.Uint64(1), TcId: proto.Uint64(0)}})
	if m := r.read().GetTcClientConnectResponse(); m == nil || m.Error != nil {
		t.Fatalf("TC_CLIENT_CONNECT: %v", m)
	}

	// pipeline writes n requests from their own goroutine while this one
	// reads, as a client does; the answers may come in any order.
	pipeline := func(build func(i int) *pb.BaseCommand) {
		errc := make(chan error, 1)
		go func() {
			for i := range n {
				if err := writeCmd(r, build(i)); err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
		t.Cleanup(func() {
			if err := <-errc; err != nil {
				t.Errorf("writing the requests: %v", err)
			}
		})
	}

	pipeline(func(i int) *pb.BaseCommand {
		return &pb.BaseCommand{Type: pb.BaseCommand_NEW_TXN.Enum(), NewTxn: &pb.CommandNewTxn{
			RequestId: proto.Uint64(uint64(100 + i)), TcId: proto.Uint64(0), TxnTtlSeconds: proto.Uint64(60_000)}}
	})
	ids := make(map[uint64]txn.ID, n) // by request id
	seen := map[txn.ID]bool{}
	for range n {
		m := r.read().GetNewTxnResponse()
		if m == nil || m.Error != nil {
			t.Fatalf("NEW_TXN answered %v", m)
		}
		req := m.GetRequestId()
		id := txn.ID{Most: m.GetTxnidMostBits(), Least: m.GetTxnidLeastBits()}
		if req < 100 || req >= 100+n {
			t.Fatalf("NEW_TXN answer for request %d, never sent", req)
		}
		if _, dup := ids[req]; dup {
			t.Fatalf("request %d answered twice", req)
		}
		if seen[id] {
			t.Fatalf("transaction %v handed out twice", id)
		}
		ids[req], seen[id] = id, true
	}

	pipeline(func(i int) *pb.BaseCommand {
		id := ids[uint64(100+i)]
		return &pb.BaseCommand{Type: pb.BaseCommand_END_TXN.Enum(), EndTxn: &pb.CommandEndTxn{
			RequestId: proto.Uint64(uint64(1000 + i)), TxnidMostBits: proto.Uint64(id.Most), TxnidLeastBits: proto.Uint64(id.Least),
			TxnAction: pb.TxnAction_ABORT.Enum()}}
	})
	ended := map[uint64]bool{}
	for range n {
		m := r.read().GetEndTxnResponse()
		if m == nil || m.Error != nil {
			t.Fatalf("END_TXN answered %v", m)
		}
		req := m.GetRequestId()
		want, ok := ids[req-900]
		if !ok || ended[req] {
			t.Fatalf("END_TXN answer for request %d: never sent, or answered twice", req)
		}
		if got := (txn.ID{Most: m.GetTxnidMostBits(), Least: m.GetTxnidLeastBits()}); got != want {
			t.Fatalf("END_TXN %d answered for %v, sent for %v", req, got, want)
		}
		ended[req] = true
	}

	// The connection still serves.
	r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_NEW_TXN.Enum(), NewTxn: &pb.CommandNewTxn{RequestId: proto.Uint64(5000), TcId: proto.Uint64(0)}})
	if m := r.read().GetNewTxnResponse(); m == nil || m.Error != nil || m.GetRequestId() != 5000 {
		t.Fatalf("NEW_TXN after the pipelined ones: %v", m)
	}
}

// writeCmd writes one command frame (for a goroutine other than the
// test's, which must not call t.Fatal).
func writeCmd(r *rawConn, c *pb.BaseCommand) error {
	return protocol.WriteFrame(r.c, protocol.Frame{Cmd: c})
}
