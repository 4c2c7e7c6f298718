package gateway

import (
	"fmt"
	"sync"

	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

// producer is one PRODUCER of a session on a topic.
//
// SENDs are pipelined: each SEND's Log.Append runs on its own goroutine and
// the next SEND does not wait for it to be durable. Receipts go out in SEND
// order: every SEND gets a pendingSend in the bounded FIFO queue, and the
// receipt loop answers them head first as they complete.
//
// Order of the entries in the log must be the SEND order too. Concurrent
// Appends are not ordered, so an append starts only once the previous one's
// place in the commit order is fixed: when the log calls the
// lakestream.WithOnEnqueued callback (the engine does, right after queueing
// the entry for its WAL writer), or when Append returns for a log that
// never calls it. See docs/message-ids.md.
type producer struct {
	id   uint64
	name string
	t    *topic
	sess *session
	mode pb.ProducerAccessMode
	// schemaVersion is the version of the producer's schema (nil without one).
	schemaVersion []byte

	queue chan *pendingSend // FIFO of SENDs awaiting receipts; cap ProducerPendingMax
	// prevOrdered is closed when the last submitted append's place in the
	// log order is fixed. Reader goroutine only.
	prevOrdered chan struct{}
	closeOnce   sync.Once
}

type pendingSend struct {
	seq, highestSeq uint64
	dup             bool          // a duplicate (dedup on): not appended, receipt (-1,-1)
	done            chan struct{} // closed when h/err are set
	h               lakestream.EntryHeader
	err             error
}

func (s *session) handleProducer(c *pb.CommandProducer) {
	req := c.GetRequestId()
	if p := s.producers[c.GetProducerId()]; p != nil {
		// A retried PRODUCER on this connection: answer again.
		if p.t.name.String() == mustTopicString(c.GetTopic()) {
			s.send(protocol.ProducerSuccess(req, p.name, p.t.dedup.lastSequenceID(p.name), p.schemaVersion, true))
		} else {
			s.sendError(req, fmt.Errorf("%w: producer id %d is in use", ErrProducerBusy, c.GetProducerId()))
		}
		return
	}
	if s.srv.closed() {
		s.sendError(req, ErrServiceNotReady)
		return
	}
	mode := c.GetProducerAccessMode()
	switch mode {
	case pb.ProducerAccessMode_Shared, pb.ProducerAccessMode_Exclusive:
	default:
		s.sendError(req, fmt.Errorf("%w: producer access mode %s", ErrNotAllowed, mode))
		return
	}
	ctx, cancel := s.ctx()
	defer cancel()
	t, err := s.srv.resolveTopic(ctx, c.GetTopic(), true)
	if err != nil {
		s.sendError(req, err)
		return
	}
	var schemaVersion []byte
	if registrableSchema(c.GetSchema()) {
		if schemaVersion, err = s.srv.getOrCreateSchema(ctx, t.stream, c.GetSchema(), true); err != nil {
			s.sendError(req, err)
			return
		}
	}
	name := c.GetProducerName()
	if name == "" {
		name = fmt.Sprintf("lakegate-%d", s.srv.nameSeq.Add(1))
	}
	p := &producer{
		id: c.GetProducerId(), name: name, t: t, sess: s, mode: mode, schemaVersion: schemaVersion,
		queue: make(chan *pendingSend, s.srv.cfg.ProducerPendingMax),
	}
	if err := t.addProducer(p); err != nil {
		s.sendError(req, err)
		return
	}
	s.producers[p.id] = p
	s.wg.Add(1)
	go p.receiptLoop()
	s.send(protocol.ProducerSuccess(req, name, t.dedup.lastSequenceID(name), schemaVersion, true))
}

func mustTopicString(name string) string {
	tn, err := ParseTopicName(name)
	if err != nil {
		return name
	}
	return tn.String()
}

// addProducer registers p under its name, enforcing access modes.
func (t *topic) addProducer(p *producer) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, dup := t.mu.producers[p.name]; dup {
		return fmt.Errorf("%w: producer %q is already connected to %s", ErrProducerBusy, p.name, t.name)
	}
	if t.mu.exclusive != nil {
		return fmt.Errorf("%w: %s has an exclusive producer", ErrProducerFenced, t.name)
	}
	if p.mode == pb.ProducerAccessMode_Exclusive {
		if len(t.mu.producers) > 0 {
			return fmt.Errorf("%w: %s has other producers", ErrProducerFenced, t.name)
		}
		t.mu.exclusive = p
	}
	t.mu.producers[p.name] = p
	return nil
}

func (t *topic) removeProducer(p *producer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.producers[p.name] == p {
		delete(t.mu.producers, p.name)
	}
	if t.mu.exclusive == p {
		t.mu.exclusive = nil
	}
}

func (s *session) handleSend(c *pb.CommandSend, f protocol.Frame) error {
	p := s.producers[c.GetProducerId()]
	if p == nil {
		s.send(protocol.SendError(c.GetProducerId(), c.GetSequenceId(), pb.ServerError_NotAllowedError, "unknown producer"))
		return nil
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
	p.submit(c, f.Entry, records, int64(md.GetPublishTime()))
	return nil
}

// submit starts the append of one SEND (entry is owned: ReadFrame allocates
// a fresh buffer per frame) and queues its receipt. It blocks while the
// producer has ProducerPendingMax SENDs in flight.
func (p *producer) submit(c *pb.CommandSend, entry []byte, records int, publishMs int64) {
	ps := &pendingSend{seq: c.GetSequenceId(), highestSeq: c.GetHighestSequenceId(), done: make(chan struct{})}
	select {
	case p.queue <- ps:
	case <-p.sess.done:
		return
	}
	prev := p.prevOrdered
	ordered := make(chan struct{})
	p.prevOrdered = ordered
	log := p.t.log
	ctx := p.sess.srv.ctx
	dedup, name := p.t.dedup, p.name
	go func() {
		var once sync.Once
		markOrdered := func() { once.Do(func() { close(ordered) }) }
		defer markOrdered()
		if prev != nil {
			select {
			case <-prev:
			case <-ctx.Done():
				ps.err = ctx.Err()
				close(ps.done)
				return
			}
		}
		if dedup != nil {
			// Judged at the ordering point: this producer's earlier SENDs
			// are already admitted.
			seq := int64(ps.seq)
			highest := max(seq, int64(ps.highestSeq))
			dup, err := dedup.admit(ctx, name, seq, highest)
			if dup || err != nil {
				ps.dup, ps.err = dup, err
				markOrdered()
				close(ps.done)
				return
			}
			defer func() { close(ps.done) }()
			defer func() { dedup.finish(name, highest, ps.h, ps.err) }()
			ps.h, ps.err = log.Append(ctx, records, entry,
				lakestream.WithPublishTime(publishMs), lakestream.WithOnEnqueued(markOrdered))
			markOrdered()
			return
		}
		ps.h, ps.err = log.Append(ctx, records, entry,
			lakestream.WithPublishTime(publishMs), lakestream.WithOnEnqueued(markOrdered))
		markOrdered()
		close(ps.done)
	}()
}

// receiptLoop answers SENDs in order. It ends when the queue is closed and
// drained, or the session ends.
func (p *producer) receiptLoop() {
	defer p.sess.wg.Done()
	for ps := range p.queue {
		select {
		case <-ps.done:
		case <-p.sess.done:
			return
		}
		if ps.err != nil {
			p.sess.log.Warn("append failed", "topic", p.t.name.String(), "producer", p.name, "seq", ps.seq, "err", ps.err)
			p.sess.send(protocol.SendError(p.id, ps.seq, serverError(ps.err), ps.err.Error()))
			continue
		}
		if ps.dup {
			// Pulsar's answer to a duplicate: message id (-1, -1).
			p.sess.send(protocol.SendReceipt(p.id, ps.seq, ps.highestSeq, protocol.NewMessageID(-1, -1, -1, -1)))
			continue
		}
		id := protocol.NewMessageID(int64(p.t.log.ID()), ps.h.Offset, -1, p.t.partition)
		p.sess.send(protocol.SendReceipt(p.id, ps.seq, ps.highestSeq, id))
	}
}

// close detaches the producer from its topic; receipts of SENDs in flight
// still go out while the session lives. Reader goroutine only.
func (p *producer) close() {
	p.closeOnce.Do(func() {
		p.t.removeProducer(p)
		close(p.queue)
		p.t.dedup.snapshot()
	})
}

func (s *session) handleCloseProducer(c *pb.CommandCloseProducer) {
	if p := s.producers[c.GetProducerId()]; p != nil {
		p.close()
		delete(s.producers, c.GetProducerId())
	}
	s.send(protocol.Success(c.GetRequestId()))
}
