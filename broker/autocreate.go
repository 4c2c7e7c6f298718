package broker

// Auto topic creation (docs/policies.md, "Auto topic creation"): whether a
// producer, consumer or lookup of a topic that does not exist creates it,
// and as what — Pulsar's allowAutoTopicCreation,
// allowAutoTopicCreationType and defaultNumPartitions, the node's
// defaults (Config) overridden per namespace by Pulsar's
// AutoTopicCreationOverride (the namespace property
// AutoTopicCreationProperty).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/lakegate/lakegate/lakestream"
)

// AutoTopicCreationProperty is the namespace property holding its
// AutoTopicCreationOverride (JSON AutoTopicCreation).
const AutoTopicCreationProperty = "lakegate.autoTopicCreation"

// Topic types of auto topic creation (Pulsar's TopicType).
const (
	TopicTypeNonPartitioned = "non-partitioned"
	TopicTypePartitioned    = "partitioned"
)

// ErrBadAutoTopicCreation is an AutoTopicCreationOverride that cannot
// apply: an unknown type, or partitioned without a partition count. It
// surfaces from CheckAutoTopicCreation (admin: 412).
var ErrBadAutoTopicCreation = errors.New("broker: invalid auto topic creation policy")

// AutoTopicCreation is Pulsar's AutoTopicCreationOverride.
type AutoTopicCreation struct {
	Allow bool `json:"allowAutoTopicCreation"`
	// Type is TopicTypeNonPartitioned or TopicTypePartitioned.
	Type string `json:"topicType"`
	// DefaultNumPartitions is the partition count of a topic created
	// partitioned (≥ 1; only with TopicTypePartitioned).
	DefaultNumPartitions int `json:"defaultNumPartitions,omitempty"`
}

// CheckAutoTopicCreation checks a policy as Pulsar's
// validateAutoTopicCreationOverride does.
func CheckAutoTopicCreation(a AutoTopicCreation) error {
	switch a.Type {
	case TopicTypeNonPartitioned:
		if a.DefaultNumPartitions != 0 {
			return fmt.Errorf("%w: defaultNumPartitions applies to the partitioned topic type only", ErrBadAutoTopicCreation)
		}
	case TopicTypePartitioned:
		if a.DefaultNumPartitions < 1 {
			return fmt.Errorf("%w: a partitioned topic type needs defaultNumPartitions of 1 or more", ErrBadAutoTopicCreation)
		}
	default:
		if a.Allow {
			return fmt.Errorf("%w: topicType %q: want %s or %s", ErrBadAutoTopicCreation, a.Type, TopicTypeNonPartitioned, TopicTypePartitioned)
		}
	}
	return nil
}

// DefaultAutoTopicCreation is the node's auto topic creation (Config).
func (b *Broker) DefaultAutoTopicCreation() AutoTopicCreation {
	a := AutoTopicCreation{Allow: !b.cfg.DisableTopicAutoCreation, Type: TopicTypeNonPartitioned}
	if b.cfg.AutoTopicCreationType == TopicTypePartitioned {
		a.Type, a.DefaultNumPartitions = TopicTypePartitioned, max(b.cfg.DefaultNumPartitions, 1)
	}
	return a
}

// DefaultRetention is the node's retention of topics without a policy
// (Config.DefaultRetention).
func (b *Broker) DefaultRetention() RetentionPolicy { return b.cfg.DefaultRetention }

// AutoTopicCreationOf is the auto topic creation that applies in
// namespace ("tenant/ns"): its override, else the node's default. A
// damaged override is reported, not applied.
func (b *Broker) AutoTopicCreationOf(ctx context.Context, namespace string) (AutoTopicCreation, error) {
	ns, err := b.cfg.Catalog.LoadNamespace(ctx, namespace)
	if err != nil && !errors.Is(err, lakestream.ErrNoSuchNamespace) {
		return AutoTopicCreation{}, err
	}
	v, ok := ns.Properties[AutoTopicCreationProperty]
	if !ok {
		return b.DefaultAutoTopicCreation(), nil
	}
	var a AutoTopicCreation
	if err := json.Unmarshal([]byte(v), &a); err != nil {
		return AutoTopicCreation{}, fmt.Errorf("broker: auto topic creation of %s: %w", namespace, err)
	}
	return a, nil
}

// autoCreate creates stream id, missing, as the auto topic creation of
// its namespace says (partitioned only when it may: not for a name that
// is a partition's); ErrNoSuchStream when auto creation is off there.
// A stream created meanwhile by another is no error.
func (b *Broker) autoCreate(ctx context.Context, tn TopicName, id lakestream.StreamIdentifier) error {
	return b.autoCreateWith(ctx, tn, id, nil)
}

// AutoCreateTopic creates a missing topic as its namespace's auto topic
// creation says (lakestream.ErrNoSuchStream when it is off), with the
// stream properties props (a front door's own policies: the Kafka
// listener's retention); an existing topic is left as it is.
func (b *Broker) AutoCreateTopic(ctx context.Context, name string, props map[string]string) error {
	tn, err := ParseTopicName(name)
	if err != nil {
		return err
	}
	if tn.NonPersistent || tn.Partition >= 0 {
		return fmt.Errorf("%w: %s: auto-created topics are named without a partition", ErrNotAllowed, tn)
	}
	return b.autoCreateWith(ctx, tn, FullStreamID(tn), props)
}

func (b *Broker) autoCreateWith(ctx context.Context, tn TopicName, id lakestream.StreamIdentifier, props map[string]string) error {
	ac, err := b.AutoTopicCreationOf(ctx, id.Namespace)
	if err != nil {
		return err
	}
	if !ac.Allow {
		return fmt.Errorf("%w: topic %s does not exist and auto topic creation is off in namespace %s", lakestream.ErrNoSuchStream, tn, id.Namespace)
	}
	var part lakestream.Partitioning
	if ac.Type == TopicTypePartitioned && !isPartitionName(id.Name) {
		part.NumPartitions = max(ac.DefaultNumPartitions, 1)
	}
	_, err = b.cfg.Catalog.CreateStream(ctx, id, lakestream.StreamConfig{}, part, lakestream.SchemaConfig{Type: lakestream.SchemaNone}, props, nil)
	if errors.Is(err, lakestream.ErrAlreadyExists) {
		return nil
	}
	return err
}
