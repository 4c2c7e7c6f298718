package gateway

import (
	"context"
	"errors"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol/pb"
)

// Errors raised by the gateway itself. Each surfaces to clients as the
// ServerError named in its comment (see serverError).
var (
	// ErrInvalidTopicName: a topic name the gateway cannot parse (InvalidTopicName).
	ErrInvalidTopicName = errors.New("gateway: invalid topic name")
	// ErrProducerBusy: a producer with the same name is connected to the topic (ProducerBusy).
	ErrProducerBusy = errors.New("gateway: producer busy")
	// ErrProducerFenced: an Exclusive producer holds the topic (ProducerFenced).
	ErrProducerFenced = errors.New("gateway: producer fenced")
	// ErrNotAllowed: a request the gateway does not support (NotAllowedError).
	ErrNotAllowed = errors.New("gateway: not allowed")
	// ErrServiceNotReady: the gateway is shutting down, or the topic is
	// served by another member or being unloaded (ServiceNotReady: the
	// client looks the topic up again).
	ErrServiceNotReady = errors.New("gateway: service not ready")
	// ErrUnknownProducer / ErrUnknownConsumer: a command names an id the
	// session does not know (NotAllowedError / ConsumerNotFound).
	ErrUnknownProducer = errors.New("gateway: unknown producer")
	// ErrNoSchema: GET_SCHEMA on a topic without a schema, or for a version
	// it does not have (TopicNotFound, as Pulsar answers).
	ErrNoSchema = errors.New("gateway: no schema")
	// ErrIncompatibleSchema: a producer's or consumer's schema cannot
	// follow the topic's latest schema (IncompatibleSchema).
	ErrIncompatibleSchema = errors.New("gateway: incompatible schema")
)

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
	case errors.Is(err, ErrInvalidTopicName):
		return pb.ServerError_InvalidTopicName
	case errors.Is(err, ErrProducerBusy):
		return pb.ServerError_ProducerBusy
	case errors.Is(err, ErrProducerFenced):
		return pb.ServerError_ProducerFenced
	case errors.Is(err, ErrNotAllowed), errors.Is(err, ErrUnknownProducer):
		return pb.ServerError_NotAllowedError
	case errors.Is(err, ErrServiceNotReady):
		return pb.ServerError_ServiceNotReady
	case errors.Is(err, ErrNoSchema):
		return pb.ServerError_TopicNotFound
	case errors.Is(err, ErrIncompatibleSchema):
		return pb.ServerError_IncompatibleSchema
	case errors.Is(err, ErrQuotaHold):
		return pb.ServerError_ProducerBlockedQuotaExceededError
	case errors.Is(err, ErrQuotaException):
		return pb.ServerError_ProducerBlockedQuotaExceededException
	case errors.Is(err, ErrTooManyConnections), errors.Is(err, ErrTooManySubscriptions):
		return pb.ServerError_NotAllowedError
	case errors.Is(err, ErrTooManyProducers):
		return pb.ServerError_ProducerBusy
	case errors.Is(err, ErrTooManyConsumers):
		return pb.ServerError_ConsumerBusy

	case errors.Is(err, actors.ErrProducerBusy):
		return pb.ServerError_ProducerBusy
	case errors.Is(err, actors.ErrProducerFenced):
		return pb.ServerError_ProducerFenced
	case errors.Is(err, actors.ErrPartitionClosed), errors.Is(err, lakestream.ErrGuardLost):
		return pb.ServerError_ServiceNotReady
	case errors.Is(err, actors.ErrUnknownProducer):
		return pb.ServerError_NotAllowedError
	case errors.Is(err, actors.ErrConsumerBusy):
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
