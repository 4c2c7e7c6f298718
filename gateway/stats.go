package gateway

// Stats, the sessions' side: the entries of this node's producers and
// consumers in their topics' stats (broker/topic.go builds the topic's,
// and says what is measured), and CONSUMER_STATS.

import (
	"context"
	"fmt"
	"time"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/broker"
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
		if next, err = cons.t.Log().NextOffset(ctx); err == nil {
			backlog, err = cons.t.Backlog(ctx, info, next)
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

// PublisherStats implements broker.AttachedProducer: the producer's entry
// in its topic's stats.
func (p *producer) PublisherStats(now time.Time) broker.PublisherStats {
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
	return ps
}

// Disconnect implements broker.AttachedProducer: CLOSE_PRODUCER (the
// client reconnects); its SENDs in flight are still answered.
func (p *producer) Disconnect() bool {
	if !p.gone.CompareAndSwap(false, true) {
		return false
	}
	p.t.Actor().CloseProducer(p.actorID)
	p.sess.send(protocol.CloseProducer(p.id, 0))
	return true
}

// ConsumerStats implements broker.AttachedConsumer: the consumer's entry
// in its subscription's stats.
func (c *consumer) ConsumerStats(now time.Time, info actors.SubscriptionInfo) broker.ConsumerStats {
	msgRate, byteRate, msgs, bytes := c.out.Rates(now)
	redeliverRate, _, _, _ := c.redelivered.Rates(now)
	counts := info.ConsumerCounts[c.subID]
	return broker.ConsumerStats{
		ID: c.id, MsgRateRedeliver: redeliverRate,
		ConsumerName: c.name, Address: c.sess.conn.RemoteAddr().String(), ClientVersion: c.sess.clientVersion,
		MsgRateOut: msgRate, MsgThroughputOut: byteRate, MsgOutCounter: msgs, BytesOutCounter: bytes,
		AvailablePermits: int(counts.Permits), UnackedMessages: int(counts.UnackedRecords), BlockedOnUnacked: counts.Blocked,
		ConnectedSince: c.since.UTC().Format(time.RFC3339Nano), Metadata: orEmptyMap(c.meta),
		KeySharedConsumerStats: broker.NewKeySharedConsumerStats(counts),
	}
}

// TopicUnloaded implements broker.AttachedConsumer: CLOSE_CONSUMER, the
// client reconnects (to assignedURL when set).
func (c *consumer) TopicUnloaded(assignedURL string) { c.disconnect(assignedURL) }
