package gateway

// Non-persistent topics (non-persistent://tenant/ns/topic): the sessions'
// side. The topic — its fan-out, subscription types, limits and ownership —
// is the broker's (broker/nonpersistent.go, NPTopic); here are the topics
// this node serves (Server.mu.npTopics), PRODUCER, SEND and SUBSCRIBE on
// them, the MESSAGE a consumer is offered (an outbound queue that is full
// refuses it: dropped), and their admin stats. Non-partitioned only:
// partitioned-metadata answers 0 partitions. Acknowledgements are answered
// and ignored; SEEK and GET_LAST_MESSAGE_ID are refused (NotAllowed), as
// on a Pulsar non-persistent topic there is nothing to seek to.
//
// Lock order: Server.mu before the NPTopic's lock; a session's queue is
// only offered to (never waited on) under the NPTopic's lock.

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

// npTopic is a non-persistent topic this node owns and serves: the
// broker's NPTopic over this package's producers and consumers.
type npTopic struct {
	*broker.NPTopic[*producer, *consumer]
	name broker.TopicName
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
	t = &npTopic{name: tn}
	t.NPTopic = broker.NewNPTopic[*producer, *consumer](broker.NPTopicOptions{
		Name: tn, Owner: owner,
		Limits:  s.cfg.TopicLimits, // the node's defaults: no policies here (limits.go)
		Refused: func(label string) { s.lim.metrics.refusals.WithLabelValues(label).Inc() },
		Forget: func() {
			s.mu.Lock()
			if s.mu.npTopics[unit] == t {
				delete(s.mu.npTopics, unit)
			}
			s.mu.Unlock()
		},
	})
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
		t.Close("")
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

// The consumer is a non-persistent topic's broker.NPConsumer.

// ConsumerName implements broker.NPConsumer.
func (c *consumer) ConsumerName() string { return c.name }

// PriorityLevel implements broker.NPConsumer.
func (c *consumer) PriorityLevel() int32 { return c.np.priority }

// Permits implements broker.NPConsumer.
func (c *consumer) Permits() int64 { return c.np.permits.Load() }

// CloseNP implements broker.NPConsumer.
func (c *consumer) CloseNP(assignedURL string) { c.disconnect(assignedURL) }

// The producer is a non-persistent topic's broker.NPProducer.

// ProducerName implements broker.NPProducer.
func (p *producer) ProducerName() string { return p.name }

// DeliverNP implements broker.NPConsumer: it offers one entry to the
// consumer's connection without waiting; false when its queue is full
// (the entry is dropped).
func (c *consumer) DeliverNP(id protocol.MessageID, records int32, entry []byte) bool {
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
	if err := t.AddProducer(p); err != nil {
		s.sendError(req, err)
		return
	}
	s.producers[p.id] = p
	s.send(protocol.ProducerSuccess(req, name, -1, nil, true))
}

// sendNP serves SEND of a non-persistent topic's producer: the entry is
// fanned out, then the receipt goes (it never waits for consumers).
func (s *session) sendNP(p *producer, c *pb.CommandSend, records int32, entry []byte) {
	id, err := p.np.Publish(records, entry)
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
	if err := t.AddConsumer(cons, name, cons.subType); err != nil {
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
	Publishers      []broker.PublisherStats            `json:"publishers"`
	Subscriptions   map[string]npSubscriptionStatsJSON `json:"subscriptions"`
	Replication     map[string]any                     `json:"replication"`
}

type npSubscriptionStatsJSON struct {
	Type         string                 `json:"type"`
	MsgRateOut   float64                `json:"msgRateOut"`
	MsgDropCount int64                  `json:"msgDropCount"`
	Consumers    []broker.ConsumerStats `json:"consumers"`
}

func (t *npTopic) stats() npStatsJSON {
	now := time.Now()
	ts := t.State(now) // broker/nonpersistent.go
	st := npStatsJSON{MsgRateIn: ts.MsgRateIn, MsgThroughputIn: ts.ByteRateIn, MsgInCounter: ts.MsgsIn, BytesInCounter: ts.BytesIn,
		MsgDropCount: ts.Dropped, Publishers: []broker.PublisherStats{}, Subscriptions: map[string]npSubscriptionStatsJSON{},
		Replication: map[string]any{}}
	for _, p := range ts.Producers {
		r, br, _, _ := p.in.Rates(now)
		st.Publishers = append(st.Publishers, broker.PublisherStats{AccessMode: "Shared", ProducerID: p.id, ProducerName: p.name,
			MsgRateIn: r, MsgThroughputIn: br, Address: p.sess.conn.RemoteAddr().String(), ClientVersion: p.sess.clientVersion,
			Metadata: orEmptyMap(p.meta)})
	}
	slices.SortFunc(st.Publishers, func(a, b broker.PublisherStats) int { return cmp.Compare(a.ProducerName, b.ProducerName) })
	for _, sub := range ts.Subscriptions {
		ss := npSubscriptionStatsJSON{Type: sub.Type.String(), MsgDropCount: sub.Dropped, Consumers: []broker.ConsumerStats{}}
		for _, c := range sub.Consumers {
			r, br, msgs, bytes := c.out.Rates(now)
			ss.Consumers = append(ss.Consumers, broker.ConsumerStats{ConsumerName: c.name, Address: c.sess.conn.RemoteAddr().String(),
				ClientVersion: c.sess.clientVersion, MsgOutCounter: msgs, BytesOutCounter: bytes, MsgRateOut: r, MsgThroughputOut: br,
				AvailablePermits: int(max(c.np.permits.Load(), 0)), ConnectedSince: c.since.UTC().Format(time.RFC3339Nano),
				Metadata: orEmptyMap(c.meta)})
			ss.MsgRateOut += r
		}
		st.Subscriptions[sub.Name] = ss
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
