package broker

// Policies as code honoured here (docs/policies.md, "Policies as code"):
// a topic's maxMessageSize (a topic limit: TopicLimits.MaxMessageSize,
// checked at each SEND by the front door) and schemaValidationEnforced
// (CheckSchemaless, at each PRODUCER without a schema).

import (
	"context"
	"errors"
	"fmt"

	"github.com/lakegate/lakegate/lakestream"
)

// Properties of the policies honoured here.
const (
	// MaxMessageSizeProperty is the stream property of a topic's
	// maxMessageSize: decimal bytes (0: the node's MaxMessageSize). Pulsar
	// has it at the topic level only.
	MaxMessageSizeProperty = "lakegate.maxMessageSize"
	// SchemaValidationProperty is the stream and namespace property of
	// schemaValidationEnforced: "true" or "false".
	SchemaValidationProperty = "lakegate.schemaValidationEnforced"
)

// ErrMessageTooLarge: a SEND over its topic's maxMessageSize policy
// (SendError NotAllowedError, as Pulsar's "Exceed maximum message size").
var ErrMessageTooLarge = errors.New("broker: exceed maximum message size")

// NodeMaxMessageSize is the node's MaxMessageSize (Config), the bound of
// a topic's maxMessageSize policy.
func (b *Broker) NodeMaxMessageSize() int { return b.cfg.MaxMessageSize }

// CheckSchemaless refuses a producer without a schema on a topic of
// stream id that has one when schemaValidationEnforced applies (the
// topic's, else its namespace's; default false), with
// ErrIncompatibleSchema as Pulsar does.
func (b *Broker) CheckSchemaless(ctx context.Context, id lakestream.StreamIdentifier) error {
	md, err := b.cfg.Catalog.LoadStream(ctx, id)
	if err != nil {
		return err
	}
	v, ok := md.Properties[SchemaValidationProperty]
	if !ok {
		ns, err := b.cfg.Catalog.LoadNamespace(ctx, id.Namespace)
		if err != nil && !errors.Is(err, lakestream.ErrNoSuchNamespace) {
			return err
		}
		v = ns.Properties[SchemaValidationProperty]
	}
	if v != "true" {
		return nil
	}
	list, err := LoadSchemas(md)
	if err != nil {
		return err
	}
	if LiveFrom(list) < len(list) {
		return fmt.Errorf("%w: producers cannot connect without a schema to topic %s, which has one, while schemaValidationEnforced is on", ErrIncompatibleSchema, id)
	}
	return nil
}
