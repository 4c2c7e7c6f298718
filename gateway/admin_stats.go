package gateway

// Admin REST: topic stats and partitioned stats, in Pulsar's JSON shape.
//
// What is measured and what is not:
//   - rates (msgRateIn/Out, throughput) are per second over the interval
//     since the previous stats request at least 1 s before (broker.RateMeter),
//     counted on this node: publishers by their receipts, consumers by the
//     messages delivered to them;
//   - msgInCounter / bytesInCounter count every record / payload byte
//     appended since the log was created (not since this node started);
//   - storageSize is the payload bytes of the readable entries (no index or
//     object overhead);
//   - msgBacklog counts the readable records not acknowledged (above the
//     mark-delete point and not individually acknowledged), from the
//     cursor's state (the running subscription's snapshot of it, or the
//     persisted one); backlogSize is the payload bytes from the mark-delete
//     point on, individually acknowledged entries included;
//   - publishers carry producerName, producerId, accessMode, address,
//     clientVersion and metadata;
//   - consumers[] lists the consumers connected to this node with their
//     name, address, clientVersion, metadata, rates, availablePermits
//     (permits asked for and not used yet) and unackedMessages (records
//     delivered and not acknowledged), the last two from the subscription
//     actor; the subscription's unackedMessages sums every consumer's;
//   - a subscription whose cursor is not loaded has type "" (the type is a
//     property of connected consumers, not stored).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

type publisherStatsJSON struct {
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

type consumerStatsJSON struct {
	ConsumerName     string  `json:"consumerName"`
	Address          string  `json:"address"`
	ClientVersion    string  `json:"clientVersion"`
	MsgOutCounter    int64   `json:"msgOutCounter"`
	BytesOutCounter  int64   `json:"bytesOutCounter"`
	MsgRateOut       float64 `json:"msgRateOut"`
	MsgThroughputOut float64 `json:"msgThroughputOut"`
	AvailablePermits int     `json:"availablePermits"`
	UnackedMessages  int     `json:"unackedMessages"`
	// BlockedOnUnacked: maxUnackedMessagesPerConsumer holds dispatch back.
	BlockedOnUnacked bool              `json:"blockedConsumerOnUnackedMsgs"`
	ConnectedSince   string            `json:"connectedSince"`
	Metadata         map[string]string `json:"metadata"`
}

type subscriptionStatsJSON struct {
	MsgRateOut       float64 `json:"msgRateOut"`
	MsgThroughputOut float64 `json:"msgThroughputOut"`
	MsgBacklog       int64   `json:"msgBacklog"`
	BacklogSize      int64   `json:"backlogSize"`
	MsgDelayed       int64   `json:"msgDelayed"`
	UnackedMessages  int64   `json:"unackedMessages"`
	// BlockedOnUnacked: maxUnackedMessagesPerSubscription holds dispatch back.
	BlockedOnUnacked bool                `json:"blockedSubscriptionOnUnackedMsgs"`
	Type             string              `json:"type"`
	IsDurable        bool                `json:"isDurable"`
	Consumers        []consumerStatsJSON `json:"consumers"`
}

type topicStatsJSON struct {
	MsgRateIn              float64                          `json:"msgRateIn"`
	MsgRateOut             float64                          `json:"msgRateOut"`
	MsgThroughputIn        float64                          `json:"msgThroughputIn"`
	MsgThroughputOut       float64                          `json:"msgThroughputOut"`
	MsgInCounter           int64                            `json:"msgInCounter"`
	BytesInCounter         int64                            `json:"bytesInCounter"`
	MsgOutCounter          int64                            `json:"msgOutCounter"`
	AverageMsgSize         float64                          `json:"averageMsgSize"`
	StorageSize            int64                            `json:"storageSize"`
	BacklogSize            int64                            `json:"backlogSize"`
	Publishers             []publisherStatsJSON             `json:"publishers"`
	Subscriptions          map[string]subscriptionStatsJSON `json:"subscriptions"`
	Replication            map[string]any                   `json:"replication"`
	DeduplicationStatus    string                           `json:"deduplicationStatus"`
	TopicCreationTimeStamp int64                            `json:"topicCreationTimeStamp,omitempty"`
	LastPublishTimestamp   int64                            `json:"lastPublishTimestamp,omitempty"`
	Compaction             compactionStatsJSON              `json:"compaction"`
}

// compactionStatsJSON is Pulsar's CompactionStats, from the topic's
// compaction record (whichever node ran the compactions).
type compactionStatsJSON struct {
	LastCompactionRemovedEventCount   int64 `json:"lastCompactionRemovedEventCount"`
	LastCompactionSucceedTimestamp    int64 `json:"lastCompactionSucceedTimestamp"`
	LastCompactionFailedTimestamp     int64 `json:"lastCompactionFailedTimestamp"`
	LastCompactionDurationTimeInMills int64 `json:"lastCompactionDurationTimeInMills"`
}

type partitionedStatsJSON struct {
	topicStatsJSON
	Metadata   partitionedMetadata       `json:"metadata"`
	Partitions map[string]topicStatsJSON `json:"partitions"`
}

// keyValues turns a Pulsar key-value list into a map (nil when empty).
func keyValues(kvs []*pb.KeyValue) map[string]string {
	if len(kvs) == 0 {
		return nil
	}
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = kv.GetValue()
	}
	return m
}

func orEmptyMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// stats builds one topic's (or partition's) stats.
func (t *topic) stats(ctx context.Context, createdMs int64) (topicStatsJSON, error) {
	st := topicStatsJSON{
		Publishers:             []publisherStatsJSON{},
		Subscriptions:          map[string]subscriptionStatsJSON{},
		Replication:            map[string]any{},
		DeduplicationStatus:    "Disabled",
		TopicCreationTimeStamp: createdMs,
	}
	first, err := t.log.FirstOffset(ctx)
	if err != nil {
		return st, err
	}
	next, err := t.log.NextOffset(ctx)
	if err != nil {
		return st, err
	}
	var last lakestream.EntryHeader
	if next > first {
		if last, err = t.log.EntryHeader(ctx, next-1); err != nil {
			return st, err
		}
		if st.StorageSize, err = broker.BytesFrom(ctx, t.log, first, last); err != nil {
			return st, err
		}
		st.MsgInCounter, st.BytesInCounter = next, last.CumulativeSize
		st.AverageMsgSize = float64(last.CumulativeSize) / float64(next)
		st.LastPublishTimestamp = last.PublishTimeMs
	}
	st.BacklogSize = st.StorageSize
	_, _, rec, err := t.compaction.Status(ctx)
	if err != nil {
		return st, err
	}
	st.Compaction = compactionStatsJSON{LastCompactionRemovedEventCount: rec.Removed, LastCompactionSucceedTimestamp: rec.SucceededMs,
		LastCompactionFailedTimestamp: rec.FailedMs, LastCompactionDurationTimeInMills: rec.DurationMs}

	now := time.Now()
	t.mu.Lock()
	for _, p := range t.mu.producers {
		msgRate, byteRate, msgs, bytes := p.in.Rates(now)
		ps := publisherStatsJSON{
			AccessMode:      p.mode.String(),
			ProducerID:      p.id,
			ProducerName:    p.name,
			MsgRateIn:       msgRate,
			MsgThroughputIn: byteRate,
			Address:         p.sess.conn.RemoteAddr().String(),
			ClientVersion:   p.sess.clientVersion,
			Metadata:        orEmptyMap(p.meta),
		}
		if msgs > 0 {
			ps.AverageMsgSize = float64(bytes) / float64(msgs)
		}
		st.Publishers = append(st.Publishers, ps)
		st.MsgRateIn += msgRate
		st.MsgThroughputIn += byteRate
	}
	t.mu.Unlock()

	names, err := t.subscriptionNames(ctx)
	if err != nil {
		return st, err
	}
	for _, name := range names {
		ss, ok, err := t.subscriptionStats(ctx, name, next, last)
		if err != nil {
			return st, err
		}
		if ok {
			st.Subscriptions[name] = ss
			st.MsgRateOut += ss.MsgRateOut
			st.MsgThroughputOut += ss.MsgThroughputOut
		}
	}
	return st, nil
}

// subscriptionStats reports one subscription; ok is false when it vanished
// meanwhile.
func (t *topic) subscriptionStats(ctx context.Context, name string, next int64, last lakestream.EntryHeader) (subscriptionStatsJSON, bool, error) {
	ss := subscriptionStatsJSON{Consumers: []consumerStatsJSON{}, IsDurable: true}
	t.mu.Lock()
	sub := t.liveSubLocked(name)
	t.mu.Unlock()
	if sub == nil {
		b, ok, err := t.idleBacklog(ctx, name)
		if !ok || err != nil {
			if sub = t.liveSub(name); sub == nil || err != nil {
				return ss, false, err
			}
		} else {
			ss.MsgBacklog, ss.BacklogSize = b.Records, b.Bytes
			return ss, true, nil
		}
	}
	info, err := sub.Info()
	if err != nil {
		return ss, false, nil // stopped meanwhile
	}
	ss.Type = info.Type.String()
	ss.MsgDelayed = int64(info.Delayed)
	ss.BlockedOnUnacked = info.BlockedOnUnacked
	durable, err := t.hasCursor(ctx, name)
	if err != nil {
		return ss, false, err
	}
	ss.IsDurable = durable
	now := time.Now()
	for _, c := range t.end.Watchers(name) {
		msgRate, byteRate, msgs, bytes := c.out.Rates(now)
		counts := info.ConsumerCounts[c.subID]
		ss.Consumers = append(ss.Consumers, consumerStatsJSON{
			ConsumerName: c.name, Address: c.sess.conn.RemoteAddr().String(), ClientVersion: c.sess.clientVersion,
			MsgRateOut: msgRate, MsgThroughputOut: byteRate, MsgOutCounter: msgs, BytesOutCounter: bytes,
			AvailablePermits: int(counts.Permits), UnackedMessages: int(counts.UnackedRecords), BlockedOnUnacked: counts.Blocked,
			ConnectedSince: c.since.UTC().Format(time.RFC3339Nano), Metadata: orEmptyMap(c.meta),
		})
		ss.MsgRateOut += msgRate
		ss.MsgThroughputOut += byteRate
	}
	for _, cc := range info.ConsumerCounts {
		ss.UnackedMessages += cc.UnackedRecords // every consumer's, wherever connected
	}
	if ss.MsgBacklog, err = t.backlogOf(ctx, info, next); err != nil {
		return ss, false, err
	}
	if from := info.MarkDeleteOffset + 1; from < next {
		if ss.BacklogSize, err = broker.BytesFrom(ctx, t.log, from, last); err != nil {
			return ss, false, err
		}
	}
	return ss, true, nil
}

// idleBacklog counts the backlog of a durable subscription no actor
// runs, from its stored cursor. ok is false when there is no such cursor
// or an actor runs the subscription now (ask it instead).
func (t *topic) idleBacklog(ctx context.Context, name string) (lakestream.Backlog, bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock() // no actor can load the cursor while t.mu is held
	if t.liveSubLocked(name) != nil {
		return lakestream.Backlog{}, false, nil
	}
	c, err := t.log.LoadCursor(ctx, name)
	if errors.Is(err, lakestream.ErrNoSuchCursor) {
		return lakestream.Backlog{}, false, nil
	}
	if err != nil {
		return lakestream.Backlog{}, false, err
	}
	b, err := c.Backlog(ctx)
	c.Close(ctx)
	return b, err == nil, err
}

// liveSub returns the running actor of subscription name, or nil.
func (t *topic) liveSub(name string) *actors.SubscriptionActor {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.liveSubLocked(name)
}

// backlogOf is the number of records a running subscription has not
// acknowledged: the readable ones above its mark-delete point less the
// ones acknowledged individually (Pulsar's msgBacklog). next is the log's
// head.
func (t *topic) backlogOf(ctx context.Context, info actors.SubscriptionInfo, next int64) (int64, error) {
	from := info.MarkDeleteOffset + 1
	if from >= next {
		return 0, nil
	}
	n, err := t.log.MessageCount(ctx, from, next) // readable records in [from, next)
	if err != nil {
		return 0, err
	}
	return info.UnackedRecords(next-n, next), nil
}

func (a *admin) topicStats(r *http.Request) (any, error) {
	ref, err := a.refOf(r)
	if err == nil && ref.partitioned() {
		err = fmt.Errorf("%w: %s is a partitioned topic: use partitioned-stats, or the stats of a partition", errAdminNotFound, ref.name)
	}
	if err != nil {
		return nil, err
	}
	ts, err := a.topics(r.Context(), ref)
	if err != nil {
		return nil, err
	}
	st, err := ts[0].stats(r.Context(), ref.md.CreatedAtMs)
	if err != nil {
		return nil, err
	}
	return st, nil
}

func (a *admin) partitionedStats(r *http.Request) (any, error) {
	ref, err := a.refOf(r)
	if err == nil && !ref.partitioned() {
		err = fmt.Errorf("%w: partitioned topic %s not found (it is not partitioned: use stats)", errAdminNotFound, ref.name)
	}
	if err != nil {
		return nil, err
	}
	rs, err := a.fanOut(r, ref, "/stats") // each partition's stats, from its owner
	if err != nil {
		return nil, err
	}
	perPartition := r.URL.Query().Get("perPartition") != "false"
	out := partitionedStatsJSON{
		topicStatsJSON: topicStatsJSON{
			Publishers:             []publisherStatsJSON{},
			Subscriptions:          map[string]subscriptionStatsJSON{},
			Replication:            map[string]any{},
			DeduplicationStatus:    "Disabled",
			TopicCreationTimeStamp: ref.md.CreatedAtMs,
		},
		Metadata:   partitionedMetadata{Partitions: ref.md.Partitioning.NumPartitions},
		Partitions: map[string]topicStatsJSON{},
	}
	for _, res := range rs {
		if !res.ok() {
			return nil, res.err()
		}
		var st topicStatsJSON
		if err := json.Unmarshal(res.body.Bytes(), &st); err != nil {
			return nil, fmt.Errorf("stats of partition %d: %w", res.partition, err)
		}
		if perPartition {
			out.Partitions[partitionName(ref.name, res.partition)] = st
		}
		agg := &out.topicStatsJSON
		agg.MsgInCounter += st.MsgInCounter
		agg.BytesInCounter += st.BytesInCounter
		agg.StorageSize += st.StorageSize
		agg.MsgRateIn += st.MsgRateIn
		agg.MsgRateOut += st.MsgRateOut
		agg.MsgThroughputIn += st.MsgThroughputIn
		agg.MsgThroughputOut += st.MsgThroughputOut
		agg.BacklogSize += st.BacklogSize
		agg.LastPublishTimestamp = max(agg.LastPublishTimestamp, st.LastPublishTimestamp)
		agg.Publishers = append(agg.Publishers, st.Publishers...)
		for name, ss := range st.Subscriptions {
			sum, ok := agg.Subscriptions[name]
			if !ok {
				sum = subscriptionStatsJSON{Consumers: []consumerStatsJSON{}, IsDurable: ss.IsDurable}
			}
			sum.MsgBacklog += ss.MsgBacklog
			sum.BacklogSize += ss.BacklogSize
			sum.MsgRateOut += ss.MsgRateOut
			sum.MsgThroughputOut += ss.MsgThroughputOut
			sum.Consumers = append(sum.Consumers, ss.Consumers...)
			if sum.Type == "" {
				sum.Type = ss.Type
			}
			agg.Subscriptions[name] = sum
		}
	}
	if out.MsgInCounter > 0 {
		out.AverageMsgSize = float64(out.BytesInCounter) / float64(out.MsgInCounter)
	}
	return out, nil
}

// consumerStatsTimeout bounds a CONSUMER_STATS answer (the subscription
// actor's snapshot and the backlog count).
const consumerStatsTimeout = 10 * time.Second

// handleConsumerStats answers CONSUMER_STATS (the clients'
// consumer.getStats()/ConsumerStats) with the consumer's counters, its
// permits and unacknowledged records, and its subscription's backlog —
// the numbers of the admin stats' consumer entry.
func (s *session) handleConsumerStats(c *pb.CommandConsumerStats) {
	req := c.GetRequestId()
	cons := s.consumers[c.GetConsumerId()]
	if cons == nil || cons.detached.Load() {
		s.send(protocol.ConsumerStatsError(req, pb.ServerError_ConsumerNotFound, fmt.Sprintf("consumer %d not found", c.GetConsumerId())))
		return
	}
	if cons.np != nil {
		msgRate, byteRate, _, _ := cons.out.Rates(time.Now())
		s.send(protocol.ConsumerStatsResponse(req, protocol.ConsumerStats{MsgRateOut: msgRate, MsgThroughputOut: byteRate,
			ConsumerName: cons.name, AvailablePermits: uint64(max(cons.np.permits.Load(), 0)), Address: s.conn.RemoteAddr().String(),
			ConnectedSince: cons.since.UTC().Format(time.RFC3339Nano), Type: cons.subType.String()}))
		return
	}
	ctx, cancel := context.WithTimeout(s.srv.ctx, consumerStatsTimeout)
	defer cancel()
	info, err := subscriptionInfo(ctx, cons.sub)
	var backlog int64
	if err == nil {
		var next int64
		if next, err = cons.t.log.NextOffset(ctx); err == nil {
			backlog, err = cons.t.backlogOf(ctx, info, next)
		}
	}
	if err != nil {
		s.send(protocol.ConsumerStatsError(req, serverError(err), err.Error()))
		return
	}
	msgRate, byteRate, _, _ := cons.out.Rates(time.Now())
	counts := info.ConsumerCounts[cons.subID]
	s.send(protocol.ConsumerStatsResponse(req, protocol.ConsumerStats{
		MsgRateOut:       msgRate,
		MsgThroughputOut: byteRate,
		ConsumerName:     cons.name,
		AvailablePermits: uint64(counts.Permits),
		UnackedMessages:  uint64(counts.UnackedRecords),
		Address:          s.conn.RemoteAddr().String(),
		ConnectedSince:   cons.since.UTC().Format(time.RFC3339Nano),
		Type:             cons.subType.String(),
		MsgBacklog:       uint64(backlog),
	}))
}
