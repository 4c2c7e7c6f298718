package gateway

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
	"github.com/lakegate/lakegate/txn"
)

// producer is one PRODUCER of a session on a topic. The topic's partition
// actor decides everything about it (access modes, names, epochs,
// deduplication, append order, receipt order); the producer is its
// actors.ProducerSink, turning the actor's answers into frames on the
// session.
//
// A SEND takes one of the producer's ProducerPendingMax slots (the session's
// reader blocks while they are all taken: backpressure on the socket) and
// gives it back when it is answered.
type producer struct {
	id uint64 // the client's producer id (unique per connection)
	// actorID names the producer to its partition actor: unique in the
	// process, since producers of one partition come from many connections
	// whose client-chosen ids collide.
	actorID uint64
	name    string
	t       *topic
	// np is the non-persistent topic of the producer (t is nil then).
	np   *npTopic
	sess *session
	mode pb.ProducerAccessMode
	// schemaVersion is the version of the producer's schema (nil without one).
	schemaVersion []byte
	// meta is the client's producer metadata, in its published messages
	// and bytes (admin stats).
	meta map[string]string
	in   broker.RateMeter

	// requestID is the PRODUCER request's id: a WaitForExclusive producer
	// gets its second PRODUCER_SUCCESS under it.
	requestID uint64
	// slots holds one token per SEND in flight; cap ProducerPendingMax.
	slots chan struct{}
	// gone is set once the partition dropped the producer (fenced out,
	// unloaded, closed): its SENDs are ignored, and a PRODUCER with its id
	// replaces it.
	gone atomic.Bool
	// closeRequestID is the CLOSE_PRODUCER request CloseDone answers; set
	// before CloseProducer is sent to the actor.
	closeRequestID atomic.Pointer[uint64]
	// starts holds the read time and payload size of each SEND in
	// flight, in order (lakegate_publish_latency_seconds, the limits'
	// counts); touched by the reader (push) and the actor (pop), hence the
	// channel.
	starts chan sendStart
	// pub: its SENDs counted by the limits (limits.go).
	pub publishCount
	// txnOpen: the transactions this producer's SENDs were found open
	// for (checked at a transaction's first SEND; a SEND after the
	// transaction ended is refused by the staging set itself). Reader
	// goroutine only; at most txnOpenMax, then forgotten.
	txnOpen map[txn.ID]struct{}
}

// txnOpenMax bounds a producer's txnOpen.
const txnOpenMax = 1024

// sendStart is what a producer remembers of a SEND in flight.
type sendStart struct {
	at    time.Time
	bytes int
}

// producerSeq numbers producers for their partition actors (actorID).
var producerSeq atomic.Uint64

func (s *session) handleProducer(c *pb.CommandProducer) {
	req := c.GetRequestId()
	if p := s.producers[c.GetProducerId()]; p != nil && p.gone.Load() {
		// Dropped by its partition (fenced, unloaded): the client comes
		// back with the same producer id.
		delete(s.producers, p.id)
		p.forget()
	} else if p != nil {
		// A retried PRODUCER on this connection: answer again.
		if p.topicName() == mustTopicString(c.GetTopic()) {
			s.sendProducerSuccess(req, p, actors.ProducerAnswer{Ready: true, LastSequence: -1})
		} else {
			s.sendError(req, fmt.Errorf("%w: producer id %d is in use", broker.ErrProducerBusy, c.GetProducerId()))
		}
		return
	}
	mode := c.GetProducerAccessMode()
	switch mode {
	case pb.ProducerAccessMode_Shared, pb.ProducerAccessMode_Exclusive,
		pb.ProducerAccessMode_WaitForExclusive, pb.ProducerAccessMode_ExclusiveWithFencing:
	default:
		s.sendError(req, fmt.Errorf("%w: producer access mode %s", broker.ErrNotAllowed, mode))
		return
	}
	ctx, cancel := s.ctx()
	defer cancel()
	if err := s.checkTopicName(ctx, c.GetTopic(), actionProduce); err != nil {
		s.sendError(req, err)
		return
	}
	if tn, err := broker.ParseTopicName(c.GetTopic()); err == nil && tn.NonPersistent {
		s.handleNPProducer(c, tn) // nonpersistent.go
		return
	}
	t, err := s.srv.serveTopic(ctx, c.GetTopic(), true)
	if err == nil {
		err = t.RefreshLimits(ctx) // limits.go
	}
	if err == nil {
		err = s.srv.brk.CheckBacklogQuota(ctx, t) // broker/enforcement.go
	}
	if err != nil {
		s.sendError(req, err)
		return
	}
	var schemaVersion []byte
	if broker.RegistrableSchema(c.GetSchema()) {
		if schemaVersion, err = s.srv.brk.GetOrCreateSchema(ctx, t.Stream(), c.GetSchema(), true); err != nil {
			s.sendError(req, err)
			return
		}
	} else if err := s.srv.brk.CheckSchemaless(ctx, t.Stream()); err != nil { // schemaValidationEnforced
		s.sendError(req, err)
		return
	}
	name := c.GetProducerName()
	if name == "" {
		// Unique in the cluster (as Pulsar's <cluster>-<broker>-<n>): the
		// producer keeps it when its topic moves to another node.
		name = fmt.Sprintf("%s-%d", s.srv.namePrefix, s.srv.nameSeq.Add(1))
	}
	p := &producer{
		id: c.GetProducerId(), actorID: producerSeq.Add(1), name: name, t: t, sess: s, mode: mode,
		schemaVersion: schemaVersion, meta: keyValues(c.GetMetadata()), requestID: req,
		slots:  make(chan struct{}, s.srv.cfg.ProducerPendingMax),
		starts: make(chan sendStart, s.srv.cfg.ProducerPendingMax),
	}
	spec := actors.ProducerSpec{ID: p.actorID, Name: name, Mode: actors.AccessMode(mode)}
	if c.TopicEpoch != nil {
		e := c.GetTopicEpoch()
		spec.Epoch = &e
	}
	if err := t.AddProducer(p.actorID, p); err != nil { // limits.go: maxProducersPerTopic
		s.sendError(req, err)
		return
	}
	ans := t.Actor().AddProducer(spec, p)
	if ans.Err != nil {
		t.ForgetProducer(p.actorID)
		s.sendError(req, ans.Err)
		return
	}
	s.producers[p.id] = p
	s.sendProducerSuccess(req, p, ans)
}

// sendProducerSuccess answers PRODUCER: ready unless the producer waits for
// exclusive access, with the topic epoch when there is one.
func (s *session) sendProducerSuccess(req uint64, p *producer, ans actors.ProducerAnswer) {
	cmd := protocol.ProducerSuccess(req, p.name, ans.LastSequence, p.schemaVersion, ans.Ready)
	if ans.HasEpoch {
		cmd.ProducerSuccess.TopicEpoch = proto.Uint64(ans.Epoch)
	}
	s.send(cmd)
}

func mustTopicString(name string) string {
	tn, err := broker.ParseTopicName(name)
	if err != nil {
		return name
	}
	return tn.String()
}

func (s *session) handleSend(c *pb.CommandSend, f protocol.Frame) error {
	p := s.producers[c.GetProducerId()]
	if p == nil {
		s.send(protocol.SendError(c.GetProducerId(), c.GetSequenceId(), pb.ServerError_NotAllowedError, "unknown producer"))
		return nil
	}
	if p.gone.Load() {
		return nil // told to reconnect: the client resends it
	}
	if f.Entry == nil {
		return fmt.Errorf("%w: SEND without payload", errCloseConnection)
	}
	md, err := protocol.ParseMetadata(f.Metadata)
	if err != nil {
		return err
	}
	records, err := protocol.EntryRecords(md)
	if err != nil {
		return err
	}
	if p.np != nil {
		if c.TxnidMostBits != nil || c.TxnidLeastBits != nil {
			s.send(protocol.SendError(c.GetProducerId(), c.GetSequenceId(), pb.ServerError_NotAllowedError, "a non-persistent topic takes no transactional messages"))
			return nil
		}
		s.sendNP(p, c, int32(records), f.Entry) // nonpersistent.go
		return nil
	}
	if limit := p.t.Limits().MaxMessageSize; limit > 0 && len(f.Entry) > limit {
		err := fmt.Errorf("%w: %d bytes, over the topic's maxMessageSize of %d", broker.ErrMessageTooLarge, len(f.Entry), limit)
		s.send(protocol.SendError(c.GetProducerId(), c.GetSequenceId(), pb.ServerError_NotAllowedError, err.Error()))
		return nil
	}
	var stage string
	if c.TxnidMostBits != nil || c.TxnidLeastBits != nil {
		id := txn.ID{Most: c.GetTxnidMostBits(), Least: c.GetTxnidLeastBits()}
		if err := s.txnSendable(p, id); err != nil {
			s.send(protocol.SendError(c.GetProducerId(), c.GetSequenceId(), txnError(err), err.Error()))
			return nil
		}
		stage = id.Set()
	}
	select {
	case p.slots <- struct{}{}:
	case <-s.done:
		return nil
	}
	p.starts <- sendStart{at: time.Now(), bytes: len(f.Entry)} // never blocks: as many places as slots
	s.sendRead(p, records, len(f.Entry))                       // limits.go
	// f.Entry is owned: ReadFrame allocates a fresh buffer per frame.
	p.t.Actor().Send(p.actorID, actors.SendRequest{
		Seq: c.GetSequenceId(), Highest: c.GetHighestSequenceId(),
		Records: int32(records), PublishMs: int64(md.GetPublishTime()), Payload: f.Entry, Stage: stage,
	})
	return nil
}

// txnSendable checks that p may send in transaction id: transactions are
// on, it is open and the client's role owns it.
func (s *session) txnSendable(p *producer, id txn.ID) error {
	tc := s.srv.brk.Txn()
	if tc == nil {
		return errTxnOff
	}
	if _, ok := p.txnOpen[id]; ok {
		return nil
	}
	ctx, cancel := s.ctx()
	defer cancel()
	if err := tc.Usable(ctx, id, s.txnRole()); err != nil {
		return err
	}
	if p.txnOpen == nil || len(p.txnOpen) >= txnOpenMax {
		p.txnOpen = map[txn.ID]struct{}{}
	}
	p.txnOpen[id] = struct{}{}
	return nil
}

// answered gives a SEND's slot back and returns its read time.
func (p *producer) answered() time.Time {
	start := <-p.starts
	<-p.slots
	p.sendAnswered(start.bytes) // limits.go
	return start.at
}

// Receipt implements actors.ProducerSink.
func (p *producer) Receipt(r actors.SendReceipt) {
	start := p.answered()
	if r.Dup {
		// Pulsar's answer to a duplicate: message id (-1, -1).
		p.sess.send(protocol.SendReceipt(p.id, r.Seq, r.Highest, protocol.NewMessageID(-1, -1, -1, -1)))
		return
	}
	id := protocol.NewMessageID(int64(p.t.Log().ID()), r.Header.Offset, -1, p.t.Partition())
	p.sess.send(protocol.SendReceipt(p.id, r.Seq, r.Highest, id))
	m := p.sess.srv.metrics
	took := time.Since(start)
	m.publishLatency.Observe(took.Seconds())
	p.t.WriteLatency().Observe(took)
	p.in.Add(int(r.Header.Records), int(r.Header.Size))
	m.publishedMsgs.Add(float64(r.Header.Records))
	m.publishedBytes.Add(float64(r.Header.Size))
}

// SendFailed implements actors.ProducerSink.
func (p *producer) SendFailed(seq uint64, err error) {
	p.answered()
	if errors.Is(err, actors.ErrPartitionClosed) {
		return // the partition is unloading: the client resends after CLOSE_PRODUCER
	}
	if errors.Is(err, lakestream.ErrFenced) {
		p.t.End().MarkTerminatedUnknownEnd(p.sess.srv.ctx, p.t.Log())
	}
	p.sess.log.Warn("append failed", "topic", p.t.Name(), "producer", p.name, "seq", seq, "err", err)
	p.sess.send(protocol.SendError(p.id, seq, serverError(err), err.Error()))
	p.sess.srv.metrics.publishErrors.Inc()
}

// Promoted implements actors.ProducerSink: the second PRODUCER_SUCCESS of a
// WaitForExclusive producer.
func (p *producer) Promoted(epoch uint64, lastSequence int64) {
	p.sess.sendProducerSuccess(p.requestID, p, actors.ProducerAnswer{Ready: true, Epoch: epoch, HasEpoch: true, LastSequence: lastSequence})
}

// FencedOut implements actors.ProducerSink: an ExclusiveWithFencing
// producer took the partition. An attached producer gets CLOSE_PRODUCER (its
// client reconnects and is refused with ProducerFenced, its epoch being
// old); a waiting one an ERROR answer to its pending PRODUCER.
func (p *producer) FencedOut(waiting bool) {
	p.gone.Store(true)
	p.releasePublishes() // limits.go
	p.t.ForgetProducer(p.actorID)
	if waiting {
		p.sess.sendError(p.requestID, fmt.Errorf("%w: fenced out by an ExclusiveWithFencing producer", broker.ErrProducerFenced))
		return
	}
	p.sess.send(protocol.CloseProducer(p.id, 0))
}

// CloseDone implements actors.ProducerSink: CLOSE_PRODUCER is answered
// after the receipts of every SEND accepted before it, like Pulsar's broker,
// so a client closing with sends in flight learns their outcome.
func (p *producer) CloseDone() {
	p.t.ForgetProducer(p.actorID)
	if req := p.closeRequestID.Load(); req != nil {
		p.sess.send(protocol.Success(*req))
	}
}

// Closed implements actors.ProducerSink: the topic is no longer served
// here; the client reconnects (to assignedURL when set).
func (p *producer) Closed(assignedURL string) {
	p.gone.Store(true)
	p.releasePublishes() // limits.go: outcomes still in flight may be dropped
	if p.t != nil {      // a non-persistent topic forgets its producers itself
		p.t.ForgetProducer(p.actorID)
	}
	p.sess.send(protocol.CloseProducerAssigned(p.id, assignedURL))
}

// close detaches the producer from its topic (its connection is gone).
// Reader goroutine only.
func (p *producer) close() {
	if p.np != nil {
		p.np.RemoveProducer(p)
		return
	}
	p.releasePublishes() // limits.go: the partition drops its outcomes
	p.t.ForgetProducer(p.actorID)
	if !p.gone.Load() {
		p.t.Actor().RemoveProducer(p.actorID)
	}
}

// forget drops the producer from its topic's list (stats).
func (p *producer) forget() {
	if p.np != nil {
		p.np.RemoveProducer(p)
		return
	}
	p.t.ForgetProducer(p.actorID)
}

// topicName is the full name of the producer's topic.
func (p *producer) topicName() string {
	if p.np != nil {
		return p.np.name.String()
	}
	return p.t.Name()
}

func (s *session) handleCloseProducer(c *pb.CommandCloseProducer) {
	p := s.producers[c.GetProducerId()]
	delete(s.producers, c.GetProducerId())
	if p == nil || p.gone.Load() {
		s.send(protocol.Success(c.GetRequestId()))
		return
	}
	if p.np != nil {
		p.np.RemoveProducer(p)
		s.send(protocol.Success(c.GetRequestId()))
		return
	}
	reqID := c.GetRequestId()
	p.closeRequestID.Store(&reqID)
	p.t.Actor().CloseProducer(p.actorID)
}
