package gateway

// The stats of the topics this node serves, in Pulsar's shape
// (broker.TopicStats), and CONSUMER_STATS.
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
	"errors"
	"fmt"
	"time"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

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

// Stats (broker.ServedTopic) builds one topic's (or partition's) stats.
func (t *topic) Stats(ctx context.Context, createdMs int64) (broker.TopicStats, error) {
	st := broker.NewTopicStats(createdMs)
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
	st.Compaction = broker.CompactionStats{LastCompactionRemovedEventCount: rec.Removed, LastCompactionSucceedTimestamp: rec.SucceededMs,
		LastCompactionFailedTimestamp: rec.FailedMs, LastCompactionDurationTimeInMills: rec.DurationMs}

	now := time.Now()
	t.mu.Lock()
	for _, p := range t.mu.producers {
		msgRate, byteRate, msgs, bytes := p.in.Rates(now)
		ps := broker.PublisherStats{
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
func (t *topic) subscriptionStats(ctx context.Context, name string, next int64, last lakestream.EntryHeader) (broker.SubscriptionStats, bool, error) {
	ss := broker.SubscriptionStats{Consumers: []broker.ConsumerStats{}, IsDurable: true}
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
		ss.Consumers = append(ss.Consumers, broker.ConsumerStats{
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
