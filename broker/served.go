package broker

import (
	"context"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/protocol"
)

// ServedTopic is one topic-partition (or non-partitioned topic) as the node
// serving it sees it: its log, its running subscriptions and the producers
// and consumers attached through this node. The admin REST (package admin)
// reads and changes topics through it; the gateway, which holds the topics
// this node serves together with their sessions' side, implements it.
//
// A subscription is a durable cursor of the log, named like the
// subscription; while consumers (or a recent SEEK) keep it loaded, a
// subscription actor owns the cursor. Every change below either goes
// through the running actor or, when none runs, edits the cursor while no
// actor can load it.
type ServedTopic interface {
	// Name, Stream, Log, Compaction, SubscriptionNames and the rest of
	// what the enforcement of policies uses.
	PolicyTopic
	// Partition is the partition index, -1 for a non-partitioned topic.
	Partition() int32
	// Stats is the topic's stats in Pulsar's shape; createdMs is the
	// stream's creation time.
	Stats(ctx context.Context, createdMs int64) (TopicStats, error)
	// SubscriptionInfo is the running subscription's state, or the stored
	// cursor's (lakestream.ErrNoSuchCursor when there is neither).
	SubscriptionInfo(ctx context.Context, name string) (actors.SubscriptionInfo, error)
	// CreateSubscription creates the durable cursor of subscription name
	// so that the offset first returns is the first delivered
	// (ErrConflict when the subscription exists; the subscription limit
	// applies).
	CreateSubscription(ctx context.Context, name string, first func(context.Context) (int64, error)) error
	// DeleteSubscription stops the subscription's actor and deletes its
	// cursor, reporting whether there was anything to delete. With
	// consumers connected it fails (ErrPrecondition) unless force, which
	// disconnects them first.
	DeleteSubscription(ctx context.Context, name string, force bool) (bool, error)
	// ResetSubscription moves subscription name so that target is the next
	// offset delivered (connected consumers are disconnected, as with
	// SEEK); false when there is no such subscription.
	ResetSubscription(ctx context.Context, name string, target int64) (bool, error)
	// Attached reports the producers attached through this node and
	// whether a subscription has consumers connected.
	Attached() (producers int, consumers bool)
	// Terminate fences the log: later appends fail, new producers are
	// refused, consumers that read everything are told the end.
	Terminate(ctx context.Context) error
	// LastMessageID is the id of the last entry (Pulsar's lastMessageId).
	LastMessageID(ctx context.Context) (protocol.MessageID, error)
}

// TopicStats is Pulsar's TopicStats as the admin REST answers it.
type TopicStats struct {
	MsgRateIn              float64                      `json:"msgRateIn"`
	MsgRateOut             float64                      `json:"msgRateOut"`
	MsgThroughputIn        float64                      `json:"msgThroughputIn"`
	MsgThroughputOut       float64                      `json:"msgThroughputOut"`
	MsgInCounter           int64                        `json:"msgInCounter"`
	BytesInCounter         int64                        `json:"bytesInCounter"`
	MsgOutCounter          int64                        `json:"msgOutCounter"`
	AverageMsgSize         float64                      `json:"averageMsgSize"`
	StorageSize            int64                        `json:"storageSize"`
	BacklogSize            int64                        `json:"backlogSize"`
	Publishers             []PublisherStats             `json:"publishers"`
	Subscriptions          map[string]SubscriptionStats `json:"subscriptions"`
	Replication            map[string]any               `json:"replication"`
	DeduplicationStatus    string                       `json:"deduplicationStatus"`
	TopicCreationTimeStamp int64                        `json:"topicCreationTimeStamp,omitempty"`
	LastPublishTimestamp   int64                        `json:"lastPublishTimestamp,omitempty"`
	Compaction             CompactionStats              `json:"compaction"`
}

// NewTopicStats is an empty TopicStats as Pulsar shows one (empty lists and
// maps, not null).
func NewTopicStats(createdMs int64) TopicStats {
	return TopicStats{
		Publishers:             []PublisherStats{},
		Subscriptions:          map[string]SubscriptionStats{},
		Replication:            map[string]any{},
		DeduplicationStatus:    "Disabled",
		TopicCreationTimeStamp: createdMs,
	}
}

// PublisherStats is Pulsar's PublisherStats.
type PublisherStats struct {
	AccessMode      string            `json:"accessMode"`
	ProducerID      uint64            `json:"producerId"`
	ProducerName    string            `json:"producerName"`
	MsgRateIn       float64           `json:"msgRateIn"`
	MsgThroughputIn float64           `json:"msgThroughputIn"`
	AverageMsgSize  float64           `json:"averageMsgSize"`
	Address         string            `json:"address"`
	ClientVersion   string            `json:"clientVersion"`
	Metadata        map[string]string `json:"metadata"`
}

// ConsumerStats is Pulsar's ConsumerStats.
type ConsumerStats struct {
	// ID is the consumer's id on its connection (metrics' consumer_id;
	// not in Pulsar's JSON).
	ID               uint64  `json:"-"`
	ConsumerName     string  `json:"consumerName"`
	Address          string  `json:"address"`
	ClientVersion    string  `json:"clientVersion"`
	MsgOutCounter    int64   `json:"msgOutCounter"`
	BytesOutCounter  int64   `json:"bytesOutCounter"`
	MsgRateOut       float64 `json:"msgRateOut"`
	MsgThroughputOut float64 `json:"msgThroughputOut"`
	// MsgRateRedeliver is the rate of messages delivered again (a
	// redelivery count above 0), per second.
	MsgRateRedeliver float64 `json:"msgRateRedeliver"`
	AvailablePermits int     `json:"availablePermits"`
	UnackedMessages  int     `json:"unackedMessages"`
	// BlockedOnUnacked: maxUnackedMessagesPerConsumer holds dispatch back.
	BlockedOnUnacked bool              `json:"blockedConsumerOnUnackedMsgs"`
	ConnectedSince   string            `json:"connectedSince"`
	Metadata         map[string]string `json:"metadata"`
	KeySharedConsumerStats
}

// KeySharedConsumerStats is what Pulsar 4.0 adds to a Key_Shared
// consumer's stats (PIP-379): the hash ranges it owns and the hashes it
// drains — still holds unacknowledged messages of although another
// consumer owns them now, which holds their keys back from that consumer.
// Empty (and left out) for other subscription types.
type KeySharedConsumerStats struct {
	KeyHashRangeArrays            [][2]int32     `json:"keyHashRangeArrays,omitempty"`
	DrainingHashesCount           int            `json:"drainingHashesCount"`
	DrainingHashesClearedTotal    int64          `json:"drainingHashesClearedTotal"`
	DrainingHashesUnackedMessages int64          `json:"drainingHashesUnackedMessages"`
	DrainingHashes                []DrainingHash `json:"drainingHashes,omitempty"`
}

// DrainingHash is Pulsar's DrainingHash: a key hash, its unacknowledged
// messages and the dispatches of its keys it blocked.
type DrainingHash struct {
	Hash            int32 `json:"hash"`
	UnackMsgs       int64 `json:"unackMsgs"`
	BlockedAttempts int64 `json:"blockedAttempts"`
}

// NewKeySharedConsumerStats converts a consumer's Key_Shared counts.
// (zero for a consumer of another subscription type).
func NewKeySharedConsumerStats(cc actors.ConsumerCounts) KeySharedConsumerStats {
	if cc.KeyShared == nil {
		return KeySharedConsumerStats{}
	}
	ks := KeySharedConsumerStats{DrainingHashesCount: cc.KeyShared.DrainingCount,
		DrainingHashesClearedTotal: cc.KeyShared.DrainingCleared, DrainingHashesUnackedMessages: cc.KeyShared.DrainingUnacked}
	for _, r := range cc.KeyShared.KeyHashRanges {
		ks.KeyHashRangeArrays = append(ks.KeyHashRangeArrays, [2]int32{r.Start, r.End})
	}
	for _, d := range cc.KeyShared.Draining {
		ks.DrainingHashes = append(ks.DrainingHashes, DrainingHash{Hash: d.Hash, UnackMsgs: d.UnackedRecords, BlockedAttempts: d.BlockedAttempts})
	}
	return ks
}

// SubscriptionStats is Pulsar's SubscriptionStats.
type SubscriptionStats struct {
	MsgRateOut       float64 `json:"msgRateOut"`
	MsgThroughputOut float64 `json:"msgThroughputOut"`
	// MsgRateRedeliver sums the consumers' (connected to this node).
	MsgRateRedeliver float64 `json:"msgRateRedeliver"`
	MsgBacklog       int64   `json:"msgBacklog"`
	BacklogSize      int64   `json:"backlogSize"`
	MsgDelayed       int64   `json:"msgDelayed"`
	UnackedMessages  int64   `json:"unackedMessages"`
	// BlockedOnUnacked: maxUnackedMessagesPerSubscription holds dispatch back.
	BlockedOnUnacked bool            `json:"blockedSubscriptionOnUnackedMsgs"`
	Type             string          `json:"type"`
	IsDurable        bool            `json:"isDurable"`
	Consumers        []ConsumerStats `json:"consumers"`
	// Key_Shared (PIP-379): the mode, and the consumers' draining counts
	// summed.
	KeySharedMode                 string `json:"keySharedMode,omitempty"`
	DrainingHashesCount           int    `json:"drainingHashesCount"`
	DrainingHashesClearedTotal    int64  `json:"drainingHashesClearedTotal"`
	DrainingHashesUnackedMessages int64  `json:"drainingHashesUnackedMessages"`
	// SubscriptionProperties are the properties set with pulsar-admin
	// topics update-subscription-properties (filled by the admin REST).
	SubscriptionProperties map[string]string `json:"subscriptionProperties"`
}

// CompactionStats is Pulsar's CompactionStats, from the topic's compaction
// record (whichever node ran the compactions).
type CompactionStats struct {
	LastCompactionRemovedEventCount   int64 `json:"lastCompactionRemovedEventCount"`
	LastCompactionSucceedTimestamp    int64 `json:"lastCompactionSucceedTimestamp"`
	LastCompactionFailedTimestamp     int64 `json:"lastCompactionFailedTimestamp"`
	LastCompactionDurationTimeInMills int64 `json:"lastCompactionDurationTimeInMills"`
}
