package gateway

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

// consumer is one SUBSCRIBE of a session: a member of a subscription actor.
// It is the actor's ConsumerSink: Deliver frames the stored entry as a
// MESSAGE (fresh CRC) into the session's bounded queue.
type consumer struct {
	id uint64 // the client's consumer id (unique per connection)
	// subID names the consumer to its subscription actor: unique in the
	// process, since consumers of one subscription come from many
	// connections whose client-chosen ids collide.
	subID   uint64
	sess    *session
	t       *topic
	subName string
	durable bool
	sub     *actors.SubscriptionActor
	// detached is set when the subscription dropped the consumer (a seek);
	// the client then subscribes again with the same consumer id.
	detached atomic.Bool
	// counted: the consumer holds a place in its topic's consumer counts
	// (limits.go), given back once by releaseCounted.
	counted atomic.Bool
	// end: what the consumer read of a terminated topic (end_of_topic.go).
	end consumerEnd
	// name and meta are the client's consumer name and metadata, out its
	// delivered messages and bytes (admin stats).
	name string
	meta map[string]string
	out  broker.RateMeter
	// redelivered counts the messages delivered again (a redelivery
	// count above 0): stats' msgRateRedeliver.
	redelivered broker.RateMeter
	// since is when the consumer attached (stats' connectedSince).
	since time.Time
	// subType is the subscription type it asked for (stats).
	subType actors.SubType
	// np is set for a consumer of a non-persistent topic (t and sub are
	// nil then: nonpersistent.go).
	np *npConsumer
	// active holds ACTIVE_CONSUMER_CHANGE back until the consumer's first
	// FLOW: pulsar-client-go registers a consumer only after SUBSCRIBE's
	// SUCCESS arrives, on another goroutine, and drops changes for a
	// consumer it does not know; its first FLOW comes after registration.
	active struct {
		sync.Mutex
		flowed  bool
		pending *bool // the latest change held back
	}
}

// Deliver implements actors.ConsumerSink (runs on the actor's goroutine):
// the MESSAGE is offered to the session's queue, never waited for. When the
// queue is full it is refused (false) and, once the queue has room, the
// consumer tells its subscription (SinkReady), which resumes dispatching
// to it.
func (c *consumer) Deliver(d actors.Deliver) bool {
	if !c.t.Owner().Held() {
		// This node may no longer own the topic (its session outlived its
		// renewals: a pause past the lease): another owner may be serving
		// the subscription already. Nothing is sent; the topic unloads
		// when Lost closes, and the owner redelivers from the cursor.
		return true
	}
	id := protocol.NewMessageID(int64(c.t.Log().ID()), d.Entry.Offset, -1, c.t.Partition())
	f := protocol.Frame{
		Cmd:   protocol.Message(c.id, id, d.RedeliveryCount, d.AckSet),
		Entry: d.Entry.Payload,
	}
	if c.sess.entryMetadata {
		// As a broker with the entry-metadata interceptors: the index of
		// the entry's last message (so a message's index is its record
		// offset, the table's __offset) and the time the entry was stored.
		f.BrokerEntryMetadata = protocol.EntryMetadata(d.Entry.WriteTimeMs, d.Entry.End()-1)
	}
	out, err := entryFrame(f)
	if err != nil {
		c.sess.log.Error("encoding MESSAGE", "err", err)
		return true // dropped: redelivered when the consumer leaves or asks
	}
	m := c.sess.srv.metrics
	if !c.sess.offer(out, c.sinkReady) {
		m.dispatchDeferred.Inc()
		return false
	}
	c.out.Add(int(d.Entry.Records), len(d.Entry.Payload))
	if d.RedeliveryCount > 0 {
		c.redelivered.Add(int(d.Entry.Records), len(d.Entry.Payload))
	}
	m.dispatchedMsgs.Add(float64(d.Entry.Records))
	m.dispatchedBytes.Add(float64(len(d.Entry.Payload)))
	c.delivered(d.Entry.Offset, d.Entry.Records)
	return true
}

// sinkReady is called by the session's writer once its queue, which
// refused a MESSAGE, has room again.
func (c *consumer) sinkReady() { c.sub.SinkReady(c.subID) }

// Disconnect implements actors.ConsumerSink: CLOSE_CONSUMER makes the
// client subscribe again.
func (c *consumer) Disconnect() { c.disconnect("") }

// disconnect sends CLOSE_CONSUMER (naming where the topic went, when
// known); the client subscribes again with the same consumer id.
func (c *consumer) disconnect(assignedURL string) {
	if c.detached.Swap(true) {
		return
	}
	c.sess.send(protocol.CloseConsumerAssigned(c.id, assignedURL))
}

// ActiveChange implements actors.ConsumerSink.
func (c *consumer) ActiveChange(active bool) {
	c.active.Lock()
	defer c.active.Unlock()
	if !c.active.flowed {
		c.active.pending = &active
		return
	}
	c.sess.send(protocol.ActiveConsumerChange(c.id, active))
}

// flowed releases the active change held back, on the first FLOW.
func (c *consumer) flowed() {
	c.active.Lock()
	defer c.active.Unlock()
	if c.active.flowed {
		return
	}
	c.active.flowed = true
	if p := c.active.pending; p != nil {
		c.sess.send(protocol.ActiveConsumerChange(c.id, *p))
		c.active.pending = nil
	}
}

func (s *session) handleSubscribe(c *pb.CommandSubscribe) {
	req := c.GetRequestId()
	if old := s.consumers[c.GetConsumerId()]; old != nil && old.detached.Load() {
		if old.np == nil {
			old.t.End().RemoveWatcher(old)
			old.releaseCounted() // limits.go
		}
		delete(s.consumers, old.id) // dropped by a seek or an unload: subscribing again
	} else if old != nil {
		// A retried SUBSCRIBE for a consumer already attached here.
		if old.subName == c.GetSubscription() {
			s.send(protocol.Success(req))
		} else {
			s.sendError(req, fmt.Errorf("%w: consumer id %d is in use", actors.ErrConsumerBusy, c.GetConsumerId()))
		}
		return
	}
	if s.srv.closed() {
		s.sendError(req, broker.ErrServiceNotReady)
		return
	}
	ctx, cancel := s.ctx()
	defer cancel()
	if _, err := clientTopicName(c.GetTopic()); err != nil {
		s.sendError(req, err)
		return
	}
	if s.srv.authzOn() {
		if tn, err := broker.ParseTopicName(c.GetTopic()); err == nil {
			if err := s.authorize(func(role string) error { return s.srv.checkSubscription(ctx, role, tn, c.GetSubscription()) }); err != nil {
				s.srv.metrics.authFailures.WithLabelValues("unauthorized").Inc()
				s.sendError(req, err)
				return
			}
		}
	}
	if tn, err := broker.ParseTopicName(c.GetTopic()); err == nil && tn.NonPersistent {
		s.handleNPSubscribe(c, tn) // nonpersistent.go
		return
	}
	create := c.ForceTopicCreation == nil || c.GetForceTopicCreation()
	t, err := s.srv.serveTopic(ctx, c.GetTopic(), create)
	if err == nil {
		err = t.RefreshLimits(ctx) // limits.go
	}
	if err != nil {
		s.sendError(req, err)
		return
	}
	if broker.RegistrableSchema(c.GetSchema()) {
		if _, err := s.srv.brk.GetOrCreateSchema(ctx, t.Stream(), c.GetSchema(), false); err != nil {
			s.sendError(req, err)
			return
		}
	}
	durable := c.Durable == nil || c.GetDurable()
	cons := &consumer{id: c.GetConsumerId(), subID: consumerSeq.Add(1), sess: s, t: t, subName: c.GetSubscription(), durable: durable,
		name: c.GetConsumerName(), meta: keyValues(c.GetMetadata()), since: time.Now(), subType: actors.SubType(c.GetSubType())}
	subType := cons.subType
	if c.GetReadCompacted() && (subType == actors.SubShared || subType == actors.SubKeyShared) {
		s.sendError(req, fmt.Errorf("%w: readCompacted is only allowed on Exclusive and Failover subscriptions (and readers), not %s", broker.ErrNotAllowed, subType))
		return
	}
	ks, err := keySharedPolicy(c.GetKeySharedMeta())
	if err != nil {
		s.sendError(req, err)
		return
	}
	// maxConsumersPerTopic, maxConsumersPerSubscription (limits.go): a
	// place is taken now, given back if the consumer is not attached.
	if err := t.ReserveConsumer(cons.subName); err != nil {
		s.sendError(req, err)
		return
	}
	cons.counted.Store(true)
	for attempt := 0; ; attempt++ {
		sub, err := t.Subscription(ctx, c, durable, s.srv.dispatchLimiters(t)) // limits.go
		if err != nil {
			s.sendError(req, err)
			return
		}
		meta := actors.ConsumerMeta{Name: c.GetConsumerName(), PriorityLevel: c.GetPriorityLevel()}
		if subType == actors.SubKeyShared {
			err = sub.AddKeySharedConsumer(cons.subID, ks, meta, cons)
		} else {
			err = sub.AddConsumerWithMeta(cons.subID, subType, meta, cons)
		}
		if errors.Is(err, actors.ErrSubscriptionClosed) && attempt < 3 {
			continue // raced with an unsubscribe or a reader's cleanup
		}
		if err != nil {
			cons.releaseCounted()
			s.sendError(req, err)
			return
		}
		cons.sub = sub
		break
	}
	s.consumers[cons.id] = cons
	t.End().AddWatcher(cons)
	s.send(protocol.Success(req))
	if end, ok := t.End().Offset(); ok && cons.ReachedEnd(end) {
		t.End().Notify(cons.subName)
	}
}

// consumerSeq numbers consumers for their subscription actors (subID).
var consumerSeq atomic.Uint64

// keySharedPolicy converts SUBSCRIBE's key_shared_meta (nil: AUTO_SPLIT).
// Hash ranges are inclusive, as in Pulsar.
func keySharedPolicy(m *pb.KeySharedMeta) (actors.KeySharedPolicy, error) {
	if m == nil || m.GetKeySharedMode() == pb.KeySharedMode_AUTO_SPLIT {
		return actors.KeySharedPolicy{}, nil
	}
	p := actors.KeySharedPolicy{Sticky: true}
	for _, r := range m.GetHashRanges() {
		p.Ranges = append(p.Ranges, actors.HashRange{Start: r.GetStart(), End: r.GetEnd()})
	}
	if len(p.Ranges) == 0 {
		return p, fmt.Errorf("%w: sticky key_shared consumer without hash ranges", actors.ErrConsumerAssign)
	}
	return p, nil
}

func (s *session) handleFlow(c *pb.CommandFlow) {
	if cons := s.consumers[c.GetConsumerId()]; cons != nil {
		if cons.np != nil {
			cons.np.permits.Add(int64(c.GetMessagePermits()))
			return
		}
		cons.flowed()
		cons.sub.Flow(cons.subID, c.GetMessagePermits())
	}
}

func (s *session) handleAck(c *pb.CommandAck) {
	cons := s.consumers[c.GetConsumerId()]
	if cons == nil {
		if c.RequestId != nil {
			s.send(protocol.AckError(c.GetConsumerId(), c.GetRequestId(), pb.ServerError_ConsumerNotFound, "unknown consumer"))
		}
		return
	}
	if cons.np != nil { // nothing to acknowledge on a non-persistent topic
		if c.RequestId != nil {
			s.send(protocol.AckResponse(c.GetConsumerId(), c.GetRequestId()))
		}
		return
	}
	ids := make([]actors.AckID, 0, len(c.GetMessageId()))
	var invalid error // answered when the client asked for a response
	for _, m := range c.GetMessageId() {
		if int64(m.GetLedgerId()) != int64(cons.t.Log().ID()) {
			invalid = fmt.Errorf("%w: message id %d:%d is not of %s", broker.ErrNotAllowed, m.GetLedgerId(), m.GetEntryId(), cons.t.TopicName())
			continue // not an id of this log
		}
		// batch_size is the client's hint; the subscription takes record
		// counts from the log.
		ids = append(ids, actors.AckID{EntryOffset: int64(m.GetEntryId()), AckSet: m.GetAckSet()})
	}
	if c.TxnidMostBits != nil || c.TxnidLeastBits != nil {
		s.ackInTxn(cons, c, ids, invalid) // txn.go
		return
	}
	// The answer goes out once the subscription applied the ack (it may
	// first look up entries it does not hold in memory).
	var reply func(error)
	if c.RequestId != nil {
		consumerID, requestID := c.GetConsumerId(), c.GetRequestId()
		reply = func(err error) {
			err = errors.Join(invalid, err)
			if err != nil {
				s.send(protocol.AckError(consumerID, requestID, serverError(err), err.Error()))
				return
			}
			s.send(protocol.AckResponse(consumerID, requestID))
		}
	}
	cons.sub.Ack(cons.subID, actors.AckKind(c.GetAckType()), ids, reply)
}

func (s *session) handleRedeliver(c *pb.CommandRedeliverUnacknowledgedMessages) {
	cons := s.consumers[c.GetConsumerId()]
	if cons == nil || cons.np != nil {
		return
	}
	var offsets []int64
	if ids := c.GetMessageIds(); len(ids) > 0 {
		offsets = make([]int64, 0, len(ids))
		for _, m := range ids {
			offsets = append(offsets, int64(m.GetEntryId()))
		}
	}
	cons.sub.Redeliver(cons.subID, offsets)
}

// close detaches the consumer; a non-durable subscription left without
// consumers is closed. Reader goroutine only.
func (c *consumer) close() {
	if c.np != nil {
		c.np.t.RemoveConsumer(c)
		return
	}
	c.t.End().RemoveWatcher(c)
	c.releaseCounted() // limits.go
	c.sub.RemoveConsumer(c.subID)
	if c.durable {
		return
	}
	info, err := c.sub.Info()
	if err != nil || info.Consumers > 0 {
		return
	}
	c.t.ForgetSubscription(c.subName, c.sub)
	c.sub.Close()
}

func (s *session) handleCloseConsumer(c *pb.CommandCloseConsumer) {
	if cons := s.consumers[c.GetConsumerId()]; cons != nil {
		cons.close()
		delete(s.consumers, c.GetConsumerId())
	}
	s.send(protocol.Success(c.GetRequestId()))
}

func (s *session) handleUnsubscribe(c *pb.CommandUnsubscribe) {
	cons := s.consumers[c.GetConsumerId()]
	if cons == nil {
		s.sendError(c.GetRequestId(), fmt.Errorf("%w: %d", actors.ErrUnknownConsumer, c.GetConsumerId()))
		return
	}
	if cons.np != nil {
		cons.close()
		delete(s.consumers, cons.id)
		s.send(protocol.Success(c.GetRequestId()))
		return
	}
	if err := cons.sub.Unsubscribe(cons.subID); err != nil {
		s.sendError(c.GetRequestId(), err)
		return
	}
	cons.t.ForgetSubscription(cons.subName, cons.sub)
	cons.t.End().RemoveWatcher(cons)
	cons.releaseCounted() // limits.go
	delete(s.consumers, cons.id)
	s.send(protocol.Success(c.GetRequestId()))
}

func (s *session) handleGetLastMessageID(c *pb.CommandGetLastMessageId) {
	cons := s.consumers[c.GetConsumerId()]
	if cons == nil {
		s.sendError(c.GetRequestId(), fmt.Errorf("%w: %d", actors.ErrUnknownConsumer, c.GetConsumerId()))
		return
	}
	if cons.np != nil {
		s.sendError(c.GetRequestId(), fmt.Errorf("%w: a non-persistent topic has no last message id", broker.ErrNotAllowed))
		return
	}
	ctx, cancel := s.ctx()
	defer cancel()
	id, err := cons.t.LastMessageID(ctx)
	if err != nil {
		s.sendError(c.GetRequestId(), err)
		return
	}
	s.send(protocol.GetLastMessageIDResponse(c.GetRequestId(), id, nil))
}

// handleSeek resets the consumer's subscription to a message id (inclusive:
// the message is delivered again) or to the first entry published at or
// after a time. Like Pulsar, every consumer of the subscription is closed
// (CLOSE_CONSUMER, before the SUCCESS) and subscribes again.
func (s *session) handleSeek(c *pb.CommandSeek) {
	cons := s.consumers[c.GetConsumerId()]
	if cons == nil || cons.detached.Load() {
		s.sendError(c.GetRequestId(), fmt.Errorf("%w: %d", actors.ErrUnknownConsumer, c.GetConsumerId()))
		return
	}
	if cons.np != nil {
		s.sendError(c.GetRequestId(), fmt.Errorf("%w: seek is not supported on the non-persistent topic %s", broker.ErrNotAllowed, cons.np.t.name))
		return
	}
	ctx, cancel := s.ctx()
	defer cancel()
	target, err := cons.t.SeekTarget(ctx, c)
	if err != nil {
		s.sendError(c.GetRequestId(), err)
		return
	}
	if err := cons.sub.ResetCursor(target); err != nil {
		s.sendError(c.GetRequestId(), err)
		return
	}
	s.send(protocol.Success(c.GetRequestId()))
}
