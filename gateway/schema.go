package gateway

// GET_SCHEMA and GET_OR_CREATE_SCHEMA: the sessions' side of the schema
// registry (broker/schema.go).

import (
	"fmt"

	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

func (s *session) handleGetSchema(c *pb.CommandGetSchema) {
	req := c.GetRequestId()
	ctx, cancel := s.ctx()
	defer cancel()
	// Authorized first: a role that may not look the topic up learns
	// nothing, not even whether it exists.
	if err := s.checkTopicName(ctx, c.GetTopic(), actionLookup); err != nil {
		s.send(protocol.GetSchemaError(req, serverError(err), err.Error()))
		return
	}
	if tn, err := broker.ParseTopicName(c.GetTopic()); err == nil && tn.NonPersistent {
		s.send(protocol.GetSchemaError(req, pb.ServerError_TopicNotFound, fmt.Sprintf("%s is non-persistent: lakegate keeps no schema for it", tn)))
		return
	}
	t, err := s.srv.brk.Resolve(ctx, c.GetTopic(), false)
	if err != nil {
		s.send(protocol.GetSchemaError(req, serverError(err), err.Error()))
		return
	}
	st, v, err := s.srv.brk.GetSchema(ctx, t.Stream, c.GetSchemaVersion())
	if err != nil {
		s.send(protocol.GetSchemaError(req, serverError(err), err.Error()))
		return
	}
	if st.Name == "" {
		st.Name = t.Name.Base().Local
	}
	s.send(protocol.GetSchemaResponse(req, st.PB(), broker.SchemaVersionBytes(v)))
}

func (s *session) handleGetOrCreateSchema(c *pb.CommandGetOrCreateSchema) {
	req := c.GetRequestId()
	ctx, cancel := s.ctx()
	defer cancel()
	err := s.checkTopicName(ctx, c.GetTopic(), actionProduce)
	if tn, perr := broker.ParseTopicName(c.GetTopic()); err == nil && perr == nil && tn.NonPersistent {
		// Nothing is stored for a non-persistent topic, its schemas
		// neither: any schema is accepted, without a version.
		s.send(protocol.GetOrCreateSchemaResponse(req, nil))
		return
	}
	var t broker.PartRef
	if err == nil {
		t, err = s.srv.brk.Resolve(ctx, c.GetTopic(), true)
	}
	if err == nil && c.GetSchema().GetType() == pb.Schema_None {
		// BYTES: what the Java client's multi-schema producers (its
		// dead-letter and retry-letter producers) register for untyped
		// messages. Accepted like a producer without schema, with no
		// version (Pulsar's SchemaVersion.Empty).
		s.send(protocol.GetOrCreateSchemaResponse(req, nil))
		return
	}
	if err == nil && !broker.RegistrableSchema(c.GetSchema()) {
		err = fmt.Errorf("%w: GET_OR_CREATE_SCHEMA without a typed schema", broker.ErrNotAllowed)
	}
	var version []byte
	if err == nil {
		version, err = s.srv.brk.GetOrCreateSchema(ctx, t.Stream, c.GetSchema(), true)
	}
	if err != nil {
		s.send(protocol.GetOrCreateSchemaError(req, serverError(err), err.Error()))
		return
	}
	s.send(protocol.GetOrCreateSchemaResponse(req, version))
}
