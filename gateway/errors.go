package gateway

import (
	"context"
	"errors"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol/pb"
)

// ErrUnknownProducer: a command names a producer id the session does not
// know (NotAllowedError).
var ErrUnknownProducer = errors.New("gateway: unknown producer")

// serverError is THE mapping from Go errors (lakestream, actors, gateway) to
// Pulsar ServerError codes. Every error sent to a client goes through it.
//
// Codes matter to clients: the Go client retries ServiceNotReady and
// reconnects on SEND_ERROR other than NotAllowedError/TopicTerminatedError.
func serverError(err error) pb.ServerError {
	switch {
	case err == nil:
		return pb.ServerError_UnknownError
	case errors.Is(err, ErrAuthentication):
		return pb.ServerError_AuthenticationError
	case errors.Is(err, ErrAuthorization):
		return pb.ServerError_AuthorizationError
	case errors.Is(err, broker.ErrInvalidTopicName):
		return pb.ServerError_InvalidTopicName
	case errors.Is(err, broker.ErrProducerBusy):
		return pb.ServerError_ProducerBusy
	case errors.Is(err, broker.ErrProducerFenced):
		return pb.ServerError_ProducerFenced
	case errors.Is(err, broker.ErrNotAllowed), errors.Is(err, ErrUnknownProducer):
		return pb.ServerError_NotAllowedError
	case errors.Is(err, broker.ErrServiceNotReady):
		return pb.ServerError_ServiceNotReady
	case errors.Is(err, broker.ErrNoSchema):
		return pb.ServerError_TopicNotFound
	case errors.Is(err, broker.ErrIncompatibleSchema):
		return pb.ServerError_IncompatibleSchema
	case errors.Is(err, broker.ErrQuotaHold):
		return pb.ServerError_ProducerBlockedQuotaExceededError
	case errors.Is(err, broker.ErrQuotaException):
		return pb.ServerError_ProducerBlockedQuotaExceededException
	case errors.Is(err, ErrTooManyConnections), errors.Is(err, broker.ErrTooManySubscriptions):
		return pb.ServerError_NotAllowedError
	case errors.Is(err, broker.ErrTooManyProducers):
		return pb.ServerError_ProducerBusy
	case errors.Is(err, broker.ErrTooManyConsumers):
		return pb.ServerError_ConsumerBusy

	case errors.Is(err, actors.ErrProducerBusy):
		return pb.ServerError_ProducerBusy
	case errors.Is(err, actors.ErrProducerFenced):
		return pb.ServerError_ProducerFenced
	case errors.Is(err, actors.ErrPartitionClosed), errors.Is(err, lakestream.ErrGuardLost),
		errors.Is(err, actors.ErrPartitionBusy):
		return pb.ServerError_ServiceNotReady
	case errors.Is(err, actors.ErrUnknownProducer):
		return pb.ServerError_NotAllowedError
	case errors.Is(err, actors.ErrConsumerBusy), errors.Is(err, actors.ErrSubscriptionBusy):
		return pb.ServerError_ConsumerBusy
	case errors.Is(err, actors.ErrUnknownConsumer):
		return pb.ServerError_ConsumerNotFound
	case errors.Is(err, actors.ErrConsumerAssign):
		return pb.ServerError_ConsumerAssignError
	case errors.Is(err, actors.ErrUnsupportedSubType):
		return pb.ServerError_NotAllowedError
	case errors.Is(err, actors.ErrSubscriptionClosed),
		errors.Is(err, actors.ErrAckQueueFull):
		return pb.ServerError_ServiceNotReady
	case errors.Is(err, actors.ErrTxnConflict):
		return pb.ServerError_TransactionConflict
	case errors.Is(err, actors.ErrTxnAckLimit):
		// Retrying does not help the transaction: it must end first.
		return pb.ServerError_NotAllowedError

	case errors.Is(err, lakestream.ErrNoSuchStream),
		errors.Is(err, lakestream.ErrNoSuchNamespace),
		errors.Is(err, lakestream.ErrNoSuchLog):
		return pb.ServerError_TopicNotFound
	case errors.Is(err, lakestream.ErrNoSuchCursor):
		return pb.ServerError_SubscriptionNotFound
	case errors.Is(err, lakestream.ErrFenced):
		return pb.ServerError_TopicTerminatedError
	case errors.Is(err, lakestream.ErrTooLarge),
		errors.Is(err, lakestream.ErrInvalidArgument),
		errors.Is(err, lakestream.ErrAlreadyExists),
		errors.Is(err, lakestream.ErrCursorStateTooLarge):
		return pb.ServerError_NotAllowedError
	case errors.Is(err, lakestream.ErrUnavailable),
		errors.Is(err, lakestream.ErrIndeterminate),
		errors.Is(err, lakestream.ErrConflict):
		return pb.ServerError_PersistenceError
	case errors.Is(err, lakestream.ErrClosed),
		errors.Is(err, context.Canceled),
		errors.Is(err, context.DeadlineExceeded):
		return pb.ServerError_ServiceNotReady
	case errors.Is(err, lakestream.ErrChainBroken),
		errors.Is(err, actors.ErrEarlierSendFailed):
		// A SEND failed after an earlier one: the code of that failure
		// (wrapped) when it has one above, else this (the client
		// reconnects and resends).
		return pb.ServerError_PersistenceError
	}
	return pb.ServerError_UnknownError
}
