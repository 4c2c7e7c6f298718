package broker

import "errors"

// Errors of topic behaviour. Each surfaces to clients as the ServerError
// named in its comment (gateway/errors.go maps them) and to admin callers
// as the HTTP status its mapping gives. Their texts keep the "gateway:"
// prefix they had before the broker layer existed: clients and tools see
// them (ServerError messages, admin reasons).
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
	// ErrNoSchema: GET_SCHEMA on a topic without a schema, or for a version
	// it does not have (TopicNotFound, as Pulsar answers).
	ErrNoSchema = errors.New("gateway: no schema")
	// ErrIncompatibleSchema: a producer's or consumer's schema cannot
	// follow the topic's latest schema (IncompatibleSchema).
	ErrIncompatibleSchema = errors.New("gateway: incompatible schema")
	// ErrNotFound: an unknown tenant, namespace, topic or subscription
	// (404 Not Found).
	ErrNotFound = errors.New("gateway: admin: not found")
	// ErrConflict: the object exists already, or its state forbids the
	// change now (409 Conflict).
	ErrConflict = errors.New("gateway: admin: conflict")
	// ErrPrecondition: a change the topic's state does not allow, e.g.
	// deleting a subscription with consumers connected (412).
	ErrPrecondition = errors.New("gateway: admin: precondition failed")
	// ErrAuthentication: missing, invalid or expired credentials
	// (AuthenticationError; HTTP 401).
	ErrAuthentication = errors.New("gateway: authentication failed")
	// ErrAuthorization: the role may not do this (AuthorizationError;
	// HTTP 403).
	ErrAuthorization = errors.New("gateway: not authorized")
)

// Errors of the limits, surfacing as the ServerError named.
var (
	// ErrTooManyProducers: the topic has its maximum of producers (ProducerBusy).
	ErrTooManyProducers = errors.New("gateway: topic reached max producers limit")
	// ErrTooManyConsumers: the topic or subscription has its maximum of
	// consumers (ConsumerBusy).
	ErrTooManyConsumers = errors.New("gateway: max consumers limit reached")
	// ErrTooManySubscriptions: the topic has its maximum of subscriptions;
	// a new one is refused (NotAllowedError).
	ErrTooManySubscriptions = errors.New("gateway: topic reached max subscriptions limit")
)

// Errors of the backlog quota, surfacing as the ServerError named.
var (
	// ErrQuotaHold: the topic's backlog is over a producer_request_hold
	// quota (ProducerBlockedQuotaExceededError: clients retry).
	ErrQuotaHold = errors.New("gateway: backlog quota exceeded (producer_request_hold)")
	// ErrQuotaException: the topic's backlog is over a producer_exception
	// quota (ProducerBlockedQuotaExceededException: clients fail their
	// pending sends).
	ErrQuotaException = errors.New("gateway: backlog quota exceeded (producer_exception)")
)
