package gateway

// Transactions (docs/transactions.md): the transaction coordinator's
// commands, served by the broker's coordinator (txn.Coordinator). Each
// request runs on its own goroutine — a commit waits for a metadata
// write and must not hold up the connection's SENDs — at most
// txnRequestsMax of them per connection (the reader waits for a slot:
// backpressure, not a queue). Without a coordinator (transactions off)
// every request is answered NotAllowedError.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
	"github.com/lakegate/lakegate/txn"
	"google.golang.org/protobuf/proto"
)

// errTxnOff is the reason every transaction request gets when
// transactions are off.
var errTxnOff = errors.New("transactions are disabled on this cluster (transactions.enabled)")

// txnRequestsMax bounds a connection's coordinator requests in flight.
const txnRequestsMax = 64

// txnCoordinatorAssignTopic is Pulsar's transaction coordinator topic; its
// partitions are the coordinators.
const txnCoordinatorAssignTopic = "persistent://pulsar/system/transaction_coordinator_assign"

// isTxnCoordinatorTopic reports whether name is the coordinator topic or
// one of its partitions.
func isTxnCoordinatorTopic(name string) bool {
	return name == txnCoordinatorAssignTopic || strings.HasPrefix(name, txnCoordinatorAssignTopic+broker.PartitionSuffix)
}

// txnCoordinatorOf is the coordinator a partition of the assign topic
// names (ok false: not a partition of it).
func txnCoordinatorOf(name string) (uint64, bool) {
	rest, ok := strings.CutPrefix(name, txnCoordinatorAssignTopic+broker.PartitionSuffix)
	if !ok {
		return 0, false
	}
	var tc uint64
	if _, err := fmt.Sscan(rest, &tc); err != nil || fmt.Sprint(tc) != rest {
		return 0, false
	}
	return tc, true
}

// txnRole is the role a transaction belongs to: the client's (the original
// principal when a proxy connects for it).
func (s *session) txnRole() string {
	roles := s.authzRoles()
	return roles[len(roles)-1]
}

// txnError maps a coordinator error onto Pulsar's codes.
func txnError(err error) pb.ServerError {
	switch {
	case errors.Is(err, txn.ErrNotFound):
		return pb.ServerError_TransactionNotFound
	case errors.Is(err, txn.ErrInvalidStatus):
		return pb.ServerError_InvalidTxnStatus
	case errors.Is(err, txn.ErrNotCoordinator):
		return pb.ServerError_TransactionCoordinatorNotFound
	case errors.Is(err, txn.ErrNotOwner):
		return pb.ServerError_NotAllowedError
	case errors.Is(err, txn.ErrTooMany):
		return pb.ServerError_NotAllowedError
	}
	return serverError(err)
}

// handleTxn serves a transaction coordinator request; it reports false for
// any other command.
func (s *session) handleTxn(cmd *pb.BaseCommand) bool {
	tc := s.srv.brk.Txn()
	role := s.txnRole()
	var (
		run func(context.Context) error
		// answer builds the response: err nil is success.
		answer func(err error) *pb.BaseCommand
	)
	switch cmd.GetType() {
	case pb.BaseCommand_TC_CLIENT_CONNECT_REQUEST:
		c := cmd.GetTcClientConnectRequest()
		run = func(ctx context.Context) error { return tc.Serve(ctx, c.GetTcId()) }
		answer = func(err error) *pb.BaseCommand {
			r := &pb.CommandTcClientConnectResponse{RequestId: c.RequestId}
			r.Error, r.Message = txnErrorFields(err)
			return &pb.BaseCommand{Type: pb.BaseCommand_TC_CLIENT_CONNECT_RESPONSE.Enum(), TcClientConnectResponse: r}
		}
	case pb.BaseCommand_NEW_TXN:
		c := cmd.GetNewTxn()
		var id txn.ID
		run = func(ctx context.Context) (err error) {
			// txn_ttl_seconds carries milliseconds: every Pulsar client
			// fills it so, and Pulsar's coordinator reads it so.
			id, err = tc.Open(ctx, c.GetTcId(), time.Duration(c.GetTxnTtlSeconds())*time.Millisecond, role)
			return err
		}
		answer = func(err error) *pb.BaseCommand {
			r := &pb.CommandNewTxnResponse{RequestId: c.RequestId}
			if err == nil {
				r.TxnidMostBits, r.TxnidLeastBits = proto.Uint64(id.Most), proto.Uint64(id.Least)
			}
			r.Error, r.Message = txnErrorFields(err)
			return &pb.BaseCommand{Type: pb.BaseCommand_NEW_TXN_RESPONSE.Enum(), NewTxnResponse: r}
		}
	case pb.BaseCommand_ADD_PARTITION_TO_TXN:
		c := cmd.GetAddPartitionToTxn()
		id := txn.ID{Most: c.GetTxnidMostBits(), Least: c.GetTxnidLeastBits()}
		run = func(ctx context.Context) error { return tc.AddPartitions(ctx, id, c.GetPartitions(), role) }
		answer = func(err error) *pb.BaseCommand {
			r := &pb.CommandAddPartitionToTxnResponse{RequestId: c.RequestId, TxnidLeastBits: c.TxnidLeastBits, TxnidMostBits: c.TxnidMostBits}
			r.Error, r.Message = txnErrorFields(err)
			return &pb.BaseCommand{Type: pb.BaseCommand_ADD_PARTITION_TO_TXN_RESPONSE.Enum(), AddPartitionToTxnResponse: r}
		}
	case pb.BaseCommand_ADD_SUBSCRIPTION_TO_TXN:
		c := cmd.GetAddSubscriptionToTxn()
		id := txn.ID{Most: c.GetTxnidMostBits(), Least: c.GetTxnidLeastBits()}
		subs := make([]txn.Sub, 0, len(c.GetSubscription()))
		for _, sub := range c.GetSubscription() {
			subs = append(subs, txn.Sub{Topic: sub.GetTopic(), Sub: sub.GetSubscription()})
		}
		run = func(ctx context.Context) error { return tc.AddSubscriptions(ctx, id, subs, role) }
		answer = func(err error) *pb.BaseCommand {
			r := &pb.CommandAddSubscriptionToTxnResponse{RequestId: c.RequestId, TxnidLeastBits: c.TxnidLeastBits, TxnidMostBits: c.TxnidMostBits}
			r.Error, r.Message = txnErrorFields(err)
			return &pb.BaseCommand{Type: pb.BaseCommand_ADD_SUBSCRIPTION_TO_TXN_RESPONSE.Enum(), AddSubscriptionToTxnResponse: r}
		}
	case pb.BaseCommand_END_TXN:
		c := cmd.GetEndTxn()
		id := txn.ID{Most: c.GetTxnidMostBits(), Least: c.GetTxnidLeastBits()}
		commit := c.GetTxnAction() == pb.TxnAction_COMMIT
		run = func(ctx context.Context) error {
			if c.TxnAction == nil {
				return fmt.Errorf("%w: END_TXN without an action", broker.ErrNotAllowed)
			}
			return tc.End(ctx, id, commit, role)
		}
		answer = func(err error) *pb.BaseCommand {
			r := &pb.CommandEndTxnResponse{RequestId: c.RequestId, TxnidLeastBits: c.TxnidLeastBits, TxnidMostBits: c.TxnidMostBits}
			r.Error, r.Message = txnErrorFields(err)
			return &pb.BaseCommand{Type: pb.BaseCommand_END_TXN_RESPONSE.Enum(), EndTxnResponse: r}
		}
	case pb.BaseCommand_END_TXN_ON_PARTITION, pb.BaseCommand_END_TXN_ON_SUBSCRIPTION:
		// Pulsar's coordinator sends these to the brokers of a
		// transaction's partitions; lakegate's commits every partition in
		// one commit record and never needs them. A client has no reason to
		// send them.
		s.log.Warn("refusing a broker-to-broker transaction command", "type", cmd.GetType())
		return true
	default:
		return false
	}
	if tc == nil {
		s.send(answer(errTxnOff))
		return true
	}
	select {
	case s.txnSlots <- struct{}{}:
	case <-s.done:
		return true
	}
	go func() {
		defer func() { <-s.txnSlots }()
		ctx, cancel := s.ctx()
		defer cancel()
		err := run(ctx)
		if err != nil && !errors.Is(err, txn.ErrInvalidStatus) && !errors.Is(err, txn.ErrNotFound) {
			s.log.Warn("transaction request failed", "type", cmd.GetType(), "err", err)
		}
		s.send(answer(err))
	}()
	return true
}

// txnErrorFields are a response's error and message fields for err (both
// nil for success).
func txnErrorFields(err error) (*pb.ServerError, *string) {
	if err == nil {
		return nil, nil
	}
	code := txnError(err)
	if errors.Is(err, errTxnOff) {
		code = pb.ServerError_NotAllowedError
	}
	return code.Enum(), proto.String(err.Error())
}

// ackInTxn serves an ACK carrying a transaction id: the broker makes it a
// pending ack of the subscription, saved before the answer (which carries
// the transaction id, as Pulsar's). It runs as a coordinator request does
// (a slot of txnSlots, its own goroutine). ids are the message ids of this
// topic; invalid, when set, fails the request (ids of another topic).
func (s *session) ackInTxn(cons *consumer, c *pb.CommandAck, ids []actors.AckID, invalid error) {
	id := txn.ID{Most: c.GetTxnidMostBits(), Least: c.GetTxnidLeastBits()}
	answer := func(err error) {
		if c.RequestId == nil {
			if err != nil {
				s.log.Warn("acknowledgement in a transaction failed (the client asked for no answer)", "txn", id, "err", err)
			}
			return
		}
		r := protocol.AckResponse(c.GetConsumerId(), c.GetRequestId())
		r.AckResponse.TxnidMostBits, r.AckResponse.TxnidLeastBits = c.TxnidMostBits, c.TxnidLeastBits
		if err != nil {
			r.AckResponse.Error, r.AckResponse.Message = txnErrorFields(err)
		}
		s.send(r)
	}
	if invalid != nil {
		answer(invalid)
		return
	}
	select {
	case s.txnSlots <- struct{}{}:
	case <-s.done:
		return
	}
	role := s.txnRole()
	go func() {
		defer func() { <-s.txnSlots }()
		ctx, cancel := s.ctx()
		defer cancel()
		answer(cons.t.AckTxn(ctx, cons.sub, cons.subName, cons.durable, cons.subID, id, actors.AckKind(c.GetAckType()), ids, role))
	}()
}
