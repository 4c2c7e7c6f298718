package broker

import (
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/txn"
)

// Config configures a Broker. Zero values take the documented defaults.
type Config struct {
	// Catalog is the storage the broker's topics live in. Required.
	Catalog lakestream.StreamCatalog
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// MaxMessageSize is the largest metadata+payload a producer may send,
	// in bytes: a topic compaction reads the keys of entries up to four
	// times that (batches). Default protocol.DefaultMaxMessageSize.
	MaxMessageSize int
	// Membership makes this node one member of a cluster: it serves only
	// the topics it owns (Own; docs/cluster.md). Required: a node on its
	// own is the one member of its cluster.
	Membership lakestream.Membership
	// DisableTopicAutoCreation turns Pulsar's allowAutoTopicCreation off.
	// Default false: unknown topics are created non-partitioned.
	DisableTopicAutoCreation bool
	// AutoTopicCreationType is the type of a topic auto-created:
	// TopicTypeNonPartitioned (Pulsar's allowAutoTopicCreationType) or
	// TopicTypePartitioned. Default "" : non-partitioned. A namespace's
	// AutoTopicCreationOverride overrides all three (autocreate.go).
	AutoTopicCreationType string
	// DefaultNumPartitions is the partition count of a topic auto-created
	// partitioned (Pulsar's defaultNumPartitions). Default 1.
	DefaultNumPartitions int
	// DefaultRetention applies to topics with no retention policy, theirs
	// or their namespace's (Pulsar's defaultRetentionTimeInMinutes and
	// defaultRetentionSizeInMB; -1: no limit). Default 0/0, Pulsar's: what
	// every durable subscription acknowledged (and the table, when the
	// stream is materialized, holds) is trimmed at the next policy check.
	DefaultRetention RetentionPolicy
	// RetentionMinAge: retention never trims an entry published less than
	// this long ago, whatever the policy (a Pulsar ledger lives at least
	// managedLedgerMinLedgerRolloverTimeMinutes, 10, before it rolls over
	// and can be deleted, so what was just acknowledged can still be
	// replayed with reset-cursor). Default 0: trimmed at the next check.
	RetentionMinAge time.Duration
	// TopicLimits are the node's defaults of the per-topic limits, which
	// namespace and topic policies override (LimitsOf). Zero fields: no
	// limit (the gateway's Config gives Pulsar's defaults).
	TopicLimits TopicLimits
	// Authorization checks roles against superusers, tenant admins and
	// grants (authz.go); off, every role may do everything.
	Authorization bool
	// SuperUserRoles may do everything (Pulsar's superUserRoles).
	SuperUserRoles []string
	// Txn is the node's transaction coordinator (docs/transactions.md);
	// nil: transactions are off.
	Txn txn.Coordinator
}

// Broker owns topic behaviour behind a Go API: the front doors (the
// gateway's sessions, the admin REST) call it, and a test can call it
// without a socket. Safe for concurrent use.
type Broker struct {
	cfg Config

	// membersCache: the live members, for placement (cluster.go).
	membersCache struct {
		sync.Mutex
		list []lakestream.Member
		at   time.Time
	}
}

// Txn is the node's transaction coordinator (nil: transactions are off).
func (b *Broker) Txn() txn.Coordinator { return b.cfg.Txn }

// New returns a Broker over cfg.Catalog.
func New(cfg Config) (*Broker, error) {
	if cfg.Catalog == nil {
		return nil, errors.New("broker: Config.Catalog is required")
	}
	if cfg.Membership == nil {
		return nil, errors.New("broker: Config.Membership is required (a node on its own is a one-member cluster)")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxMessageSize <= 0 {
		cfg.MaxMessageSize = protocol.DefaultMaxMessageSize
	}
	return &Broker{cfg: cfg}, nil
}

// Catalog is the catalog the broker serves.
func (b *Broker) Catalog() lakestream.StreamCatalog { return b.cfg.Catalog }
