package gateway

// Transactions are not supported yet. So that a client asking for them
// gets a clear error instead of a dropped connection, every transaction
// request a client sends is answered with its response command carrying
// ServerError NotAllowedError and errTxnUnsupported's text, and the
// transaction coordinator's assignment topic (which the Java client looks
// up when built with enableTransaction) is refused the same way.

import (
	"errors"
	"strings"

	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/protocol/pb"
	"google.golang.org/protobuf/proto"
)

// errTxnUnsupported is the reason every transaction request gets.
var errTxnUnsupported = errors.New("transactions are not supported by lakegate")

// txnCoordinatorAssignTopic is Pulsar's transaction coordinator topic; its
// partitions are the coordinators.
const txnCoordinatorAssignTopic = "persistent://pulsar/system/transaction_coordinator_assign"

// isTxnCoordinatorTopic reports whether name is the coordinator topic or
// one of its partitions.
func isTxnCoordinatorTopic(name string) bool {
	return name == txnCoordinatorAssignTopic || strings.HasPrefix(name, txnCoordinatorAssignTopic+broker.PartitionSuffix)
}

// handleTxn answers a transaction request with NotAllowedError; it
// reports false for any other command.
func (s *session) handleTxn(cmd *pb.BaseCommand) bool {
	code := pb.ServerError_NotAllowedError.Enum()
	msg := proto.String(errTxnUnsupported.Error())
	var out *pb.BaseCommand
	switch cmd.GetType() {
	case pb.BaseCommand_TC_CLIENT_CONNECT_REQUEST:
		c := cmd.GetTcClientConnectRequest()
		out = &pb.BaseCommand{Type: pb.BaseCommand_TC_CLIENT_CONNECT_RESPONSE.Enum(),
			TcClientConnectResponse: &pb.CommandTcClientConnectResponse{RequestId: c.RequestId, Error: code, Message: msg}}
	case pb.BaseCommand_NEW_TXN:
		c := cmd.GetNewTxn()
		out = &pb.BaseCommand{Type: pb.BaseCommand_NEW_TXN_RESPONSE.Enum(),
			NewTxnResponse: &pb.CommandNewTxnResponse{RequestId: c.RequestId, Error: code, Message: msg}}
	case pb.BaseCommand_ADD_PARTITION_TO_TXN:
		c := cmd.GetAddPartitionToTxn()
		out = &pb.BaseCommand{Type: pb.BaseCommand_ADD_PARTITION_TO_TXN_RESPONSE.Enum(),
			AddPartitionToTxnResponse: &pb.CommandAddPartitionToTxnResponse{RequestId: c.RequestId,
				TxnidLeastBits: c.TxnidLeastBits, TxnidMostBits: c.TxnidMostBits, Error: code, Message: msg}}
	case pb.BaseCommand_ADD_SUBSCRIPTION_TO_TXN:
		c := cmd.GetAddSubscriptionToTxn()
		out = &pb.BaseCommand{Type: pb.BaseCommand_ADD_SUBSCRIPTION_TO_TXN_RESPONSE.Enum(),
			AddSubscriptionToTxnResponse: &pb.CommandAddSubscriptionToTxnResponse{RequestId: c.RequestId,
				TxnidLeastBits: c.TxnidLeastBits, TxnidMostBits: c.TxnidMostBits, Error: code, Message: msg}}
	case pb.BaseCommand_END_TXN:
		c := cmd.GetEndTxn()
		out = &pb.BaseCommand{Type: pb.BaseCommand_END_TXN_RESPONSE.Enum(),
			EndTxnResponse: &pb.CommandEndTxnResponse{RequestId: c.RequestId,
				TxnidLeastBits: c.TxnidLeastBits, TxnidMostBits: c.TxnidMostBits, Error: code, Message: msg}}
	default:
		return false
	}
	s.send(out)
	return true
}
