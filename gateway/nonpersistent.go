package gateway

// Non-persistent topics (non-persistent://tenant/ns/topic), as Pulsar has
// them: messages are fanned out in memory to the consumers connected to
// the topic's owner and never stored — no WAL, no table, no cursor. At
// most once: a message goes to the subscriptions that exist when it is
// published, and is dropped for a subscription whose consumer (the one the
// subscription type picks) has no permits, or whose connection's outbound
// queue (Config.OutboundFramesMax frames) is full. The producer's receipt
// does not wait for any consumer.
//
// Ownership is the persistent topics' (docs/cluster.md): the topic's
// canonical name is the unit, LOOKUP answers its owner, a node serves the
// topic only while it owns it, and on losing it (or an unload, a hand-over,
// SIGTERM) closes its producers and consumers, which look it up again. A
// topic lives from its first producer or consumer until its last one leaves
// (then its ownership is released); a subscription until its last consumer
// leaves. Nothing is persisted, so nothing survives a move: messages in
// flight at that moment are lost, as on a Pulsar broker.
//
// Dispatch per subscription type: Exclusive (one consumer) and Failover
// (the first consumer by priority level, then name) send to one consumer;
// Shared round-robins over the consumers with permits; Key_Shared sends a
// key's messages to one consumer, picked by the key's hash over the
// consumers ordered by attachment (a consumer joining or leaving remaps
// keys; no draining: at most once has no order to keep across that).
// Non-partitioned only: partitioned-metadata answers 0 partitions.
// Acknowledgements are answered and ignored; SEEK and GET_LAST_MESSAGE_ID
// are refused (NotAllowed), as on a Pulsar non-persistent topic there is
// nothing to seek to.
//
// Message ids: ledger npLedger, entry = a per-topic counter started from
// the load time in microseconds, so ids grow across reloads (the clients'
// acknowledgement trackers drop repeated ids as duplicates).
//
// Lock order: Server.mu before npTopic.mu; a session's queue is only
// offered to (never waited on) under npTopic.mu.

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

// npLedger is the ledger id of non-persistent message ids.
const npLedger = 0

// npTopic is a non-persistent topic this node owns and serves.
type npTopic struct {
	srv   *Server
	name  broker.TopicName
	owner lakestream.Ownership
	// in counts published messages, dropped the ones a subscription
	// dropped (stats).
	in      broker.RateMeter
	dropped atomic.Int64

	mu struct {
		sync.Mutex
		closed    bool
		producers map[*producer]struct{}
		subs      map[string]*npSub
		nextEntry int64
	}
}

// npSub is one subscription of a non-persistent topic.
type npSub struct {
	name      string
	typ       actors.SubType
	consumers []*consumer // attach order
	rr        int         // Shared: next consumer to try
	dropped   int64       // messages dropped for this subscription
}

// npConsumer is what a consumer of a non-persistent topic holds.
type npConsumer struct {
	t        *npTopic
	permits  atomic.Int64
	priority int32
}

// serveNP returns the loaded non-persistent topic tn, loading it (and
// taking its ownership) when needed. broker.ErrServiceNotReady when another member
// owns it or it is being closed.
func (s *Server) serveNP(ctx context.Context, tn broker.TopicName) (*npTopic, error) {
	if s.closed() || s.draining.Load() {
		return nil, broker.ErrServiceNotReady
	}
	if tn.Partition >= 0 {
		return nil, fmt.Errorf("%w: %s: partitioned non-persistent topics are not supported by lakegate", broker.ErrNotAllowed, tn)
	}
	ok, err := s.cfg.Catalog.NamespaceExists(ctx, tn.Tenant+"/"+tn.Namespace)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: namespace %s/%s", lakestream.ErrNoSuchNamespace, tn.Tenant, tn.Namespace)
	}
	unit := tn.String()
	s.mu.Lock()
	t := s.mu.npTopics[unit]
	s.mu.Unlock()
	if t != nil {
		return t, nil
	}
	owner, err := s.brk.Own(ctx, unit)
	if err != nil {
		return nil, err
	}
	t = &npTopic{srv: s, name: tn, owner: owner}
	t.mu.producers = map[*producer]struct{}{}
	t.mu.subs = map[string]*npSub{}
	t.mu.nextEntry = time.Now().UnixMicro()
	s.mu.Lock()
	if old := s.mu.npTopics[unit]; old != nil || s.mu.closed {
		s.mu.Unlock()
		if old == nil {
			return nil, broker.ErrServiceNotReady
		}
		return old, nil
	}
	s.mu.npTopics[unit] = t
	s.mu.Unlock()
	go func() {
		<-owner.Lost()
		t.close("")
	}()
	return t, nil
}

// npTopicsOf lists the non-persistent topics of namespace "tenant/ns" this
// node serves, sorted.
func (s *Server) npTopicsOf(namespace string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for name, t := range s.mu.npTopics {
		if t.name.Tenant+"/"+t.name.Namespace == namespace {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// close drops every producer and consumer (they look the topic up again,
// at assignedURL when set), forgets the topic and releases its ownership.
func (t *npTopic) close(assignedURL string) {
	t.mu.Lock()
	if t.mu.closed {
		t.mu.Unlock()
		return
	}
	t.mu.closed = true
	producers := t.mu.producers
	var consumers []*consumer
	for _, sub := range t.mu.subs {
		consumers = append(consumers, sub.consumers...)
	}
	t.mu.producers, t.mu.subs = map[*producer]struct{}{}, map[string]*npSub{}
	t.mu.Unlock()
	for p := range producers {
		p.Closed(assignedURL)
	}
	for _, c := range consumers {
		c.disconnect(assignedURL)
	}
	t.forget()
}

// forget removes the topic from the server and releases its ownership.
func (t *npTopic) forget() {
	s := t.srv
	s.mu.Lock()
	if s.mu.npTopics[t.name.String()] == t {
		delete(s.mu.npTopics, t.name.String())
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.owner.Release(ctx)
	cancel()
}

// releaseIfIdleLocked marks the topic closed when nobody uses it; the
// caller then calls forget (outside t.mu).
func (t *npTopic) releaseIfIdleLocked() bool {
	if t.mu.closed || len(t.mu.producers) > 0 || len(t.mu.subs) > 0 {
		return false
	}
	t.mu.closed = true
	return true
}

// addProducer attaches p; broker.ErrProducerBusy when its name is taken.
func (t *npTopic) addProducer(p *producer) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.closed {
		return fmt.Errorf("%w: %s is being closed", broker.ErrServiceNotReady, t.name)
	}
	for q := range t.mu.producers {
		if q.name == p.name {
			return fmt.Errorf("%w: producer name %q is in use on %s", broker.ErrProducerBusy, p.name, t.name)
		}
	}
	lim := t.srv.cfg.TopicLimits // the node's defaults: no policies here (limits.go)
	if err := t.srv.npLimit(lim.MaxProducers, len(t.mu.producers), broker.ErrTooManyProducers, "topic "+t.name.String(), "max_producers_per_topic"); err != nil {
		return err
	}
	t.mu.producers[p] = struct{}{}
	return nil
}

func (t *npTopic) removeProducer(p *producer) {
	t.mu.Lock()
	delete(t.mu.producers, p)
	idle := t.releaseIfIdleLocked()
	t.mu.Unlock()
	if idle {
		t.forget()
	}
}

// addConsumer attaches c to subscription name with type typ.
func (t *npTopic) addConsumer(c *consumer, name string, typ actors.SubType) error {
	if typ < actors.SubExclusive || typ > actors.SubKeyShared {
		return fmt.Errorf("%w: subscription type %d", actors.ErrUnsupportedSubType, typ)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.closed {
		return fmt.Errorf("%w: %s is being closed", broker.ErrServiceNotReady, t.name)
	}
	lim := t.srv.cfg.TopicLimits // the node's defaults: no policies here (limits.go)
	total := 0
	for _, s := range t.mu.subs {
		total += len(s.consumers)
	}
	sub := t.mu.subs[name]
	if err := t.srv.npLimit(lim.MaxConsumers, total, broker.ErrTooManyConsumers, "topic "+t.name.String(), "max_consumers_per_topic"); err != nil {
		return err
	}
	if sub == nil {
		if err := t.srv.npLimit(lim.MaxSubscriptions, len(t.mu.subs), broker.ErrTooManySubscriptions, "topic "+t.name.String(), "max_subscriptions_per_topic"); err != nil {
			return err
		}
	} else if err := t.srv.npLimit(lim.MaxConsumersPerSubscription, len(sub.consumers), broker.ErrTooManyConsumers, "subscription "+name, "max_consumers_per_subscription"); err != nil {
		return err
	}
	if sub == nil {
		sub = &npSub{name: name, typ: typ}
		t.mu.subs[name] = sub
	}
	switch {
	case sub.typ != typ:
		return fmt.Errorf("%w: subscription is %s, consumer asked for %s", actors.ErrConsumerBusy, sub.typ, typ)
	case typ == actors.SubExclusive && len(sub.consumers) > 0:
		return fmt.Errorf("%w: exclusive subscription has a consumer", actors.ErrConsumerBusy)
	}
	sub.consumers = append(sub.consumers, c)
	return nil
}

func (t *npTopic) removeConsumer(c *consumer) {
	t.mu.Lock()
	if sub := t.mu.subs[c.subName]; sub != nil {
		sub.consumers = slices.DeleteFunc(sub.consumers, func(x *consumer) bool { return x == c })
		if len(sub.consumers) == 0 {
			delete(t.mu.subs, c.subName)
		}
	}
	idle := t.releaseIfIdleLocked()
	t.mu.Unlock()
	if idle {
		t.forget()
	}
}

// pickLocked returns the consumer of sub an entry goes to (nil: drop it).
func (sub *npSub) pickLocked(payload []byte) *consumer {
	cs := sub.consumers
	if len(cs) == 0 {
		return nil
	}
	var c *consumer
	switch sub.typ {
	case actors.SubExclusive:
		c = cs[0]
	case actors.SubFailover:
		c = slices.MinFunc(cs, func(a, b *consumer) int {
			if a.np.priority != b.np.priority {
				return cmp.Compare(a.np.priority, b.np.priority)
			}
			return cmp.Compare(a.name, b.name)
		})
	case actors.SubKeyShared:
		c = cs[int(actors.EntryKeyHash(payload))%len(cs)]
	default: // Shared
		for k := range cs {
			x := cs[(sub.rr+k)%len(cs)]
			if x.np.permits.Load() > 0 {
				sub.rr = (sub.rr + k + 1) % len(cs)
				return x
			}
		}
		return nil
	}
	if c.np.permits.Load() <= 0 {
		return nil
	}
	return c
}

// publish fans one entry (a SEND's metadata and payload) out to the
// subscriptions and returns its message id.
func (t *npTopic) publish(records int32, entry []byte) (protocol.MessageID, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.closed {
		return protocol.MessageID{}, fmt.Errorf("%w: %s is being closed", broker.ErrServiceNotReady, t.name)
	}
	t.mu.nextEntry++
	id := protocol.NewMessageID(npLedger, t.mu.nextEntry, -1, -1)
	t.in.Add(int(records), len(entry))
	for _, sub := range t.mu.subs {
		c := sub.pickLocked(entry)
		if c == nil || !c.deliverNP(id, records, entry) {
			sub.dropped += int64(records)
			t.dropped.Add(int64(records))
		}
	}
	return id, nil
}

// deliverNP offers one entry to the consumer's connection without
// waiting; false when its queue is full (the entry is dropped).
func (c *consumer) deliverNP(id protocol.MessageID, records int32, entry []byte) bool {
	out, err := entryFrame(protocol.Frame{Cmd: protocol.Message(c.id, id, 0, nil), Entry: entry})
	if err != nil {
		c.sess.log.Error("encoding MESSAGE", "err", err)
		return false
	}
	if !c.sess.offer(out, nil) {
		return false
	}
	c.np.permits.Add(-int64(records))
	c.out.Add(int(records), len(entry))
	m := c.sess.srv.metrics
	m.dispatchedMsgs.Add(float64(records))
	m.dispatchedBytes.Add(float64(len(entry)))
	return true
}

// handleNPProducer serves PRODUCER on a non-persistent topic.
func (s *session) handleNPProducer(c *pb.CommandProducer, tn broker.TopicName) {
	req := c.GetRequestId()
	if c.GetProducerAccessMode() != pb.ProducerAccessMode_Shared {
		s.sendError(req, fmt.Errorf("%w: producer access mode %s on the non-persistent topic %s (only Shared)", broker.ErrNotAllowed, c.GetProducerAccessMode(), tn))
		return
	}
	ctx, cancel := s.ctx()
	defer cancel()
	t, err := s.srv.serveNP(ctx, tn)
	if err != nil {
		s.sendError(req, err)
		return
	}
	name := c.GetProducerName()
	if name == "" {
		name = fmt.Sprintf("%s-%d", s.srv.namePrefix, s.srv.nameSeq.Add(1))
	}
	p := &producer{id: c.GetProducerId(), name: name, np: t, sess: s, mode: pb.ProducerAccessMode_Shared,
		meta: keyValues(c.GetMetadata()), requestID: req}
	if err := t.addProducer(p); err != nil {
		s.sendError(req, err)
		return
	}
	s.producers[p.id] = p
	s.send(protocol.ProducerSuccess(req, name, -1, nil, true))
}

// sendNP serves SEND of a non-persistent topic's producer: the entry is
// fanned out, then the receipt goes (it never waits for consumers).
func (s *session) sendNP(p *producer, c *pb.CommandSend, records int32, entry []byte) {
	id, err := p.np.publish(records, entry)
	if err != nil {
		s.send(protocol.SendError(p.id, c.GetSequenceId(), serverError(err), err.Error()))
		return
	}
	p.in.Add(int(records), len(entry))
	s.send(protocol.SendReceipt(p.id, c.GetSequenceId(), c.GetHighestSequenceId(), id))
	m := s.srv.metrics
	m.publishedMsgs.Add(float64(records))
	m.publishedBytes.Add(float64(len(entry)))
}

// handleNPSubscribe serves SUBSCRIBE on a non-persistent topic.
func (s *session) handleNPSubscribe(c *pb.CommandSubscribe, tn broker.TopicName) {
	req := c.GetRequestId()
	if c.GetReadCompacted() {
		s.sendError(req, fmt.Errorf("%w: readCompacted is only valid on persistent topics", broker.ErrNotAllowed))
		return
	}
	name := c.GetSubscription()
	if name == "" {
		s.sendError(req, fmt.Errorf("%w: empty subscription name", lakestream.ErrInvalidArgument))
		return
	}
	ctx, cancel := s.ctx()
	defer cancel()
	t, err := s.srv.serveNP(ctx, tn)
	if err != nil {
		s.sendError(req, err)
		return
	}
	cons := &consumer{id: c.GetConsumerId(), sess: s, subName: name, name: c.GetConsumerName(),
		meta: keyValues(c.GetMetadata()), since: time.Now(), subType: actors.SubType(c.GetSubType()),
		np: &npConsumer{t: t, priority: c.GetPriorityLevel()}}
	if err := t.addConsumer(cons, name, cons.subType); err != nil {
		s.sendError(req, err)
		return
	}
	s.consumers[cons.id] = cons
	s.send(protocol.Success(req))
}

// npStats are a non-persistent topic's admin stats (Pulsar's
// NonPersistentTopicStats, the fields lakegate measures).
type npStatsJSON struct {
	MsgRateIn       float64                            `json:"msgRateIn"`
	MsgThroughputIn float64                            `json:"msgThroughputIn"`
	MsgRateOut      float64                            `json:"msgRateOut"`
	MsgInCounter    int64                              `json:"msgInCounter"`
	BytesInCounter  int64                              `json:"bytesInCounter"`
	MsgDropCount    int64                              `json:"msgDropCount"`
	Publishers      []publisherStatsJSON               `json:"publishers"`
	Subscriptions   map[string]npSubscriptionStatsJSON `json:"subscriptions"`
	Replication     map[string]any                     `json:"replication"`
}

type npSubscriptionStatsJSON struct {
	Type         string              `json:"type"`
	MsgRateOut   float64             `json:"msgRateOut"`
	MsgDropCount int64               `json:"msgDropCount"`
	Consumers    []consumerStatsJSON `json:"consumers"`
}

func (t *npTopic) stats() npStatsJSON {
	now := time.Now()
	rate, byteRate, msgs, bytes := t.in.Rates(now)
	st := npStatsJSON{MsgRateIn: rate, MsgThroughputIn: byteRate, MsgInCounter: msgs, BytesInCounter: bytes,
		MsgDropCount: t.dropped.Load(), Publishers: []publisherStatsJSON{}, Subscriptions: map[string]npSubscriptionStatsJSON{},
		Replication: map[string]any{}}
	t.mu.Lock()
	defer t.mu.Unlock()
	for p := range t.mu.producers {
		r, br, _, _ := p.in.Rates(now)
		st.Publishers = append(st.Publishers, publisherStatsJSON{AccessMode: "Shared", ProducerID: p.id, ProducerName: p.name,
			MsgRateIn: r, MsgThroughputIn: br, Address: p.sess.conn.RemoteAddr().String(), ClientVersion: p.sess.clientVersion,
			Metadata: orEmptyMap(p.meta)})
	}
	slices.SortFunc(st.Publishers, func(a, b publisherStatsJSON) int { return cmp.Compare(a.ProducerName, b.ProducerName) })
	for name, sub := range t.mu.subs {
		ss := npSubscriptionStatsJSON{Type: sub.typ.String(), MsgDropCount: sub.dropped, Consumers: []consumerStatsJSON{}}
		for _, c := range sub.consumers {
			r, br, msgs, bytes := c.out.Rates(now)
			ss.Consumers = append(ss.Consumers, consumerStatsJSON{ConsumerName: c.name, Address: c.sess.conn.RemoteAddr().String(),
				ClientVersion: c.sess.clientVersion, MsgOutCounter: msgs, BytesOutCounter: bytes, MsgRateOut: r, MsgThroughputOut: br,
				AvailablePermits: int(max(c.np.permits.Load(), 0)), ConnectedSince: c.since.UTC().Format(time.RFC3339Nano),
				Metadata: orEmptyMap(c.meta)})
			ss.MsgRateOut += r
		}
		st.Subscriptions[name] = ss
		st.MsgRateOut += ss.MsgRateOut
	}
	return st
}

// npTopicsServed returns the non-persistent topics served here.
func (s *Server) npTopicsServed() []*npTopic {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*npTopic, 0, len(s.mu.npTopics))
	for _, t := range s.mu.npTopics {
		out = append(out, t)
	}
	return out
}
