package admin

// Admin REST: how a handler's answer reaches the wire. A handler returns a
// value and an error; one adapter writes the value as JSON and one function
// (writeAdminError, through adminStatus and adminReason) writes every error,
// so the status and the Pulsar-style {"reason": …} body of an error are
// decided in one place.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/txn"
)

// handler answers an admin request with a value or an error. The value is
// written as JSON with 200 OK, except: nil (the untyped nil; a typed nil
// slice or map is JSON null) is 204 No Content, Pulsar's answer to a
// change; a rawJSON is written as it is; octets are written with their
// headers; a reply carries its own status. An error is written by
// writeAdminError, and a handler that fails writes nothing.
type handler func(r *http.Request) (any, error)

// writer answers an admin request that writes its own answer: a member's
// forwarded answer, a guarded or routed request handed on. When it returns
// an error it has written nothing, and writeAdminError writes the error.
type writer func(w http.ResponseWriter, r *http.Request) error

// ServeHTTP is the adapter of every value-returning handler.
func (h handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	writer(h.write).ServeHTTP(w, r)
}

func (h handler) write(w http.ResponseWriter, r *http.Request) error {
	v, err := h(r)
	if err != nil {
		return err
	}
	switch v := v.(type) {
	case nil:
		w.WriteHeader(http.StatusNoContent)
	case rawJSON:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Write(v)
	case reply:
		writeJSON(w, v.status, v.body)
	case octets:
		for k, vs := range v.header {
			w.Header()[k] = vs
		}
		w.WriteHeader(http.StatusOK)
		w.Write(v.body)
	default:
		writeJSON(w, http.StatusOK, v)
	}
	return nil
}

// ServeHTTP writes the error a writer returns.
func (wr writer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := wr(w, r); err != nil {
		writeAdminError(w, err)
	}
}

// rawJSON is an answer already encoded (a stored policy value), written
// byte for byte with 200 OK.
type rawJSON []byte

// jsonNull answers "no value" (e.g. no topic-level policy), as Pulsar does:
// 200 OK with the body null.
var jsonNull = rawJSON("null")

// octets is an answer that is not JSON, with headers of its own (a stored
// message: its payload, its metadata in X-Pulsar-* headers), written with
// 200 OK.
type octets struct {
	header http.Header
	body   []byte
}

// reply is an answer with a status of its own: a fanned-out request's
// answer that repeats a partition's failure (combineWrites).
type reply struct {
	status int
	body   any
}

// Errors raised by the admin REST layer. Each maps to the HTTP status named in
// its comment (see adminStatus).
var (
	// errAdminNotFound: an unknown tenant, namespace, topic or subscription (404).
	errAdminNotFound = broker.ErrNotFound
	// errAdminConflict: the object exists already, or its state forbids the
	// change (409).
	errAdminConflict = broker.ErrConflict
	// errAdminPrecondition: a request the current state does not allow (412).
	errAdminPrecondition = broker.ErrPrecondition
	// errAdminBadRequest: a malformed body or parameter (400).
	errAdminBadRequest = errors.New("gateway: admin: bad request")
	// errAdminNotImplemented: an operation lakegate does not support (501).
	errAdminNotImplemented = errors.New("gateway: admin: not implemented")
	// errAdminMethodNotAllowed: an operation not allowed on this kind of
	// topic, e.g. terminating a partitioned topic (405).
	errAdminMethodNotAllowed = errors.New("gateway: admin: not allowed on this topic")
	// errAdminUnprocessable: a value out of range, e.g. shrinking partitions (422).
	errAdminUnprocessable = errors.New("gateway: admin: unprocessable")
	// errAdminTooLarge: a request body over Config.AdminMaxRequestBytes (413).
	errAdminTooLarge = errors.New("gateway: request body too large")
	// errAdminNotAcceptable: a value Pulsar refuses as not acceptable, e.g.
	// no more transaction coordinators than now (406).
	errAdminNotAcceptable = errors.New("gateway: admin: not acceptable")
)

// adminStatus is THE mapping from Go errors (admin, gateway, actors,
// lakestream, txn) to HTTP status codes. Every error answered by the admin REST
// goes through it.
func adminStatus(err error) int {
	switch {
	case errors.As(err, new(*statusError)):
		var se *statusError
		errors.As(err, &se)
		return se.status
	case errors.Is(err, broker.ErrAuthentication):
		return http.StatusUnauthorized
	case errors.Is(err, broker.ErrAuthorization):
		return http.StatusForbidden
	case errors.Is(err, errAdminNotFound):
		return http.StatusNotFound
	case errors.Is(err, errAdminConflict):
		return http.StatusConflict
	case errors.Is(err, errAdminPrecondition):
		return http.StatusPreconditionFailed
	case errors.Is(err, errAdminBadRequest):
		return http.StatusBadRequest
	case errors.Is(err, errAdminNotImplemented):
		return http.StatusNotImplemented
	case errors.Is(err, errAdminMethodNotAllowed):
		return http.StatusMethodNotAllowed
	case errors.Is(err, errAdminUnprocessable):
		return http.StatusUnprocessableEntity
	case errors.Is(err, errAdminNotAcceptable):
		return http.StatusNotAcceptable

	case errors.Is(err, txn.ErrNotFound), errors.Is(err, txn.ErrNotCoordinator):
		return http.StatusNotFound
	case errors.Is(err, txn.ErrInvalidStatus):
		return http.StatusConflict
	case errors.Is(err, txn.ErrNotOwner):
		return http.StatusForbidden
	case errors.Is(err, txn.ErrTooMany):
		return http.StatusPreconditionFailed

	case errors.Is(err, broker.ErrInvalidTopicName):
		return http.StatusPreconditionFailed
	case errors.Is(err, errAdminTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, broker.ErrTooManySubscriptions):
		return http.StatusPreconditionFailed
	case errors.Is(err, broker.ErrNotAllowed):
		return http.StatusPreconditionFailed
	case errors.Is(err, broker.ErrServiceNotReady),
		errors.Is(err, broker.ErrUnhealthy),
		errors.Is(err, actors.ErrPartitionClosed),
		errors.Is(err, lakestream.ErrGuardLost):
		return http.StatusServiceUnavailable
	case errors.Is(err, actors.ErrConsumerBusy):
		return http.StatusPreconditionFailed
	case errors.Is(err, actors.ErrSubscriptionClosed):
		return http.StatusServiceUnavailable

	case errors.Is(err, lakestream.ErrNoSuchStream),
		errors.Is(err, lakestream.ErrNoSuchNamespace),
		errors.Is(err, lakestream.ErrNoSuchLog),
		errors.Is(err, lakestream.ErrNoSuchCursor),
		errors.Is(err, lakestream.ErrNotMaterialized),
		errors.Is(err, broker.ErrNoSchema):
		return http.StatusNotFound
	case errors.Is(err, lakestream.ErrAlreadyExists),
		errors.Is(err, lakestream.ErrNamespaceNotEmpty),
		errors.Is(err, lakestream.ErrConflict):
		return http.StatusConflict
	case errors.Is(err, lakestream.ErrInvalidArgument):
		return http.StatusPreconditionFailed
	case errors.Is(err, lakestream.ErrOffsetOutOfRange),
		errors.Is(err, lakestream.ErrOffsetTrimmed):
		return http.StatusNotFound
	case errors.Is(err, lakestream.ErrUnavailable),
		errors.Is(err, lakestream.ErrIndeterminate),
		errors.Is(err, lakestream.ErrChainBroken),
		errors.Is(err, lakestream.ErrClosed),
		errors.Is(err, context.Canceled):
		return http.StatusServiceUnavailable
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

// adminError is the body Pulsar tools read the reason from.
type adminError struct {
	Reason string `json:"reason"`
}

// writeJSON answers v as JSON, without a trailing newline (as Pulsar's
// Jackson: pulsaradmin reads some bodies as raw strings).
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"reason":"encoding the answer failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

func writeAdminError(w http.ResponseWriter, err error) {
	writeJSON(w, adminStatus(err), adminError{Reason: adminReason(err)})
}

// adminReason strips the package prefixes of the sentinel errors: what stays
// is the part a human wrote for this request.
func adminReason(err error) string {
	msg := err.Error()
	for _, e := range []error{errAdminNotFound, errAdminConflict, errAdminPrecondition, errAdminBadRequest,
		errAdminNotImplemented, errAdminMethodNotAllowed, errAdminUnprocessable, errAdminNotAcceptable} {
		msg = strings.ReplaceAll(msg, e.Error()+": ", "")
	}
	for _, p := range []string{"gateway: ", "lakestream: ", "auth: ", "txn: "} {
		msg = strings.ReplaceAll(msg, p, "")
	}
	return msg
}
