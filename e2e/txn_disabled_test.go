package e2e

// With transactions off (transactions.enabled: false), every transaction
// request, and the lookup of the transaction coordinator topic, is
// answered with NotAllowedError and a message saying so, and the
// connection stays usable (regression: the gateway used to close the
// connection, which clients report as an unexplained disconnect). Run:
// go test -p 1 -count=1 -run TxnDisabled ./e2e/

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/internal/testnode"
	"github.com/lakegate/lakegate/protocol/pb"
)

func TestTxnDisabledAnswersNotAllowed(t *testing.T) {
	c := startNode(t, testnode.Config{DisableTransactions: true})
	r := dialRaw(t, c)
	r.connect()
	const tc = "persistent://pulsar/system/transaction_coordinator_assign"
	wantErr := func(what string, code pb.ServerError, msg string) {
		t.Helper()
		if code != pb.ServerError_NotAllowedError || !strings.Contains(msg, "transactions are disabled") {
			t.Fatalf("%s: error %v %q, want NotAllowedError saying transactions are disabled", what, code, msg)
		}
	}
	r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_PARTITIONED_METADATA.Enum(), PartitionMetadata: &pb.CommandPartitionedTopicMetadata{
		Topic: proto.String(tc), RequestId: proto.Uint64(1)}})
	if m := r.read().GetPartitionMetadataResponse(); m == nil || m.GetResponse() != pb.CommandPartitionedTopicMetadataResponse_Failed {
		t.Fatalf("PARTITIONED_METADATA of the coordinator topic: %v", m)
	} else {
		wantErr("PARTITIONED_METADATA", m.GetError(), m.GetMessage())
	}
	r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_LOOKUP.Enum(), LookupTopic: &pb.CommandLookupTopic{
		Topic: proto.String(tc + "-partition-0"), RequestId: proto.Uint64(2)}})
	if m := r.read().GetLookupTopicResponse(); m == nil || m.GetResponse() != pb.CommandLookupTopicResponse_Failed {
		t.Fatalf("LOOKUP of a coordinator: %v", m)
	} else {
		wantErr("LOOKUP", m.GetError(), m.GetMessage())
	}
	r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_TC_CLIENT_CONNECT_REQUEST.Enum(), TcClientConnectRequest: &pb.CommandTcClientConnectRequest{
		RequestId: proto.Uint64(3), TcId: proto.Uint64(0)}})
	if m := r.read().GetTcClientConnectResponse(); m == nil || m.GetRequestId() != 3 {
		t.Fatalf("TC_CLIENT_CONNECT: %v", m)
	} else {
		wantErr("TC_CLIENT_CONNECT", m.GetError(), m.GetMessage())
	}
	r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_NEW_TXN.Enum(), NewTxn: &pb.CommandNewTxn{RequestId: proto.Uint64(4)}})
	if m := r.read().GetNewTxnResponse(); m == nil || m.GetRequestId() != 4 {
		t.Fatalf("NEW_TXN: %v", m)
	} else {
		wantErr("NEW_TXN", m.GetError(), m.GetMessage())
	}
	r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_ADD_PARTITION_TO_TXN.Enum(), AddPartitionToTxn: &pb.CommandAddPartitionToTxn{
		RequestId: proto.Uint64(5), TxnidMostBits: proto.Uint64(7), TxnidLeastBits: proto.Uint64(9), Partitions: []string{"persistent://public/default/x"}}})
	if m := r.read().GetAddPartitionToTxnResponse(); m == nil || m.GetRequestId() != 5 || m.GetTxnidMostBits() != 7 || m.GetTxnidLeastBits() != 9 {
		t.Fatalf("ADD_PARTITION_TO_TXN: %v", m)
	} else {
		wantErr("ADD_PARTITION_TO_TXN", m.GetError(), m.GetMessage())
	}
	r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_ADD_SUBSCRIPTION_TO_TXN.Enum(), AddSubscriptionToTxn: &pb.CommandAddSubscriptionToTxn{
		RequestId: proto.Uint64(6), TxnidMostBits: proto.Uint64(7), TxnidLeastBits: proto.Uint64(9)}})
	if m := r.read().GetAddSubscriptionToTxnResponse(); m == nil || m.GetRequestId() != 6 {
		t.Fatalf("ADD_SUBSCRIPTION_TO_TXN: %v", m)
	} else {
		wantErr("ADD_SUBSCRIPTION_TO_TXN", m.GetError(), m.GetMessage())
	}
	r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_END_TXN.Enum(), EndTxn: &pb.CommandEndTxn{
		RequestId: proto.Uint64(7), TxnidMostBits: proto.Uint64(7), TxnidLeastBits: proto.Uint64(9), TxnAction: pb.TxnAction_COMMIT.Enum()}})
	if m := r.read().GetEndTxnResponse(); m == nil || m.GetRequestId() != 7 {
		t.Fatalf("END_TXN: %v", m)
	} else {
		wantErr("END_TXN", m.GetError(), m.GetMessage())
	}
	// The connection still works.
	r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_PING.Enum(), Ping: &pb.CommandPing{}})
	if got := r.read(); got.GetType() != pb.BaseCommand_PONG {
		t.Fatalf("after the transaction requests: %v, want PONG", got.GetType())
	}
}
