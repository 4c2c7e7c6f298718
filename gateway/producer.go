package gateway

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

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
	// meta is the client's producer metadata, in its published messages
	// and bytes (admin stats).
	meta map[string]string
	in   rateMeter

	// requestID is the PRODUCER request's id: a WaitForExclusive producer
	// gets its second PRODUCER_SUCCESS under it.
	requestID uint64
	// askedEpoch is the topic epoch the client sent (reconnecting), or nil.
	// Guarded by t.mu once the producer is added.
	askedEpoch *uint64
	// fenced is set when an ExclusiveWithFencing producer took the topic.
	fenced atomic.Bool
	// ready is set once p may send (a WaitForExclusive producer waits).
	ready atomic.Bool

	queue chan *pendingSend // FIFO of SENDs awaiting receipts; cap ProducerPendingMax
	// prevOrdered is closed when the last submitted append's place in the
	// log order is fixed. Reader goroutine only.
	prevOrdered chan struct{}
	closeOnce   sync.Once
	// closeRequestID is the CLOSE_PRODUCER request receiptLoop answers
	// after draining; set once, before the queue is closed.
	closeRequestID *uint64
}

type pendingSend struct {
	seq, highestSeq uint64
	start           time.Time // SEND read (lakegate_publish_latency_seconds)
	records, bytes  int
	dup             bool          // a duplicate (dedup on): not appended, receipt (-1,-1)
	done            chan struct{} // closed when h/err are set
	h               lakestream.EntryHeader
	err             error
}

func (s *session) handleProducer(c *pb.CommandProducer) {
	req := c.GetRequestId()
	if p := s.producers[c.GetProducerId()]; p != nil && p.fenced.Load() {
		// Fenced by an ExclusiveWithFencing producer: the client comes back
		// with the same producer id (and is judged by its topic epoch).
		p.close()
		delete(s.producers, p.id)
	} else if p != nil {
		// A retried PRODUCER on this connection: answer again.
		if p.t.name.String() == mustTopicString(c.GetTopic()) {
			s.send(p.success(req))
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
	case pb.ProducerAccessMode_Shared, pb.ProducerAccessMode_Exclusive,
		pb.ProducerAccessMode_WaitForExclusive, pb.ProducerAccessMode_ExclusiveWithFencing:
	default:
		s.sendError(req, fmt.Errorf("%w: producer access mode %s", ErrNotAllowed, mode))
		return
	}
	ctx, cancel := s.ctx()
	defer cancel()
	t, err := s.srv.resolveTopic(ctx, c.GetTopic(), true)
	if err == nil && t.terminated.Load() {
		err = fmt.Errorf("%w: topic %s was terminated", lakestream.ErrFenced, t.name)
	}
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
		id: c.GetProducerId(), name: name, t: t, sess: s, mode: mode, schemaVersion: schemaVersion, meta: keyValues(c.GetMetadata()),
		requestID: req,
		queue:     make(chan *pendingSend, s.srv.cfg.ProducerPendingMax),
	}
	if c.TopicEpoch != nil {
		e := c.GetTopicEpoch()
		p.askedEpoch = &e
	}
	fenced, err := t.addProducer(p)
	notifyFenced(fenced)
	if err != nil {
		s.sendError(req, err)
		return
	}
	s.producers[p.id] = p
	s.wg.Add(1)
	go p.receiptLoop()
	// A waiting producer may have been promoted (or fenced) between
	// addProducer and here: success reads the current state, and a
	// promotion's own PRODUCER_SUCCESS(ready) may precede this one; the
	// client ignores a second ready answer.
	s.send(p.success(req))
}

// success is the PRODUCER_SUCCESS for p as it stands: ready unless it waits
// for exclusive access, with the topic epoch when the topic has one.
func (p *producer) success(req uint64) *pb.BaseCommand {
	p.t.mu.Lock()
	ready := p.ready.Load()
	epoch, hasEpoch := p.t.mu.epoch, p.t.mu.hasEpoch
	p.t.mu.Unlock()
	cmd := protocol.ProducerSuccess(req, p.name, p.t.dedup.lastSequenceID(p.name), p.schemaVersion, ready)
	if hasEpoch {
		cmd.ProducerSuccess.TopicEpoch = proto.Uint64(epoch)
	}
	return cmd
}

func mustTopicString(name string) string {
	tn, err := ParseTopicName(name)
	if err != nil {
		return name
	}
	return tn.String()
}

// addProducer registers p under its name, enforcing access modes as
// Pulsar's AbstractTopic does:
//
//   - Shared: refused (ProducerBusy) while an exclusive producer holds the
//     topic or WaitForExclusive producers wait.
//   - Exclusive: refused (ProducerFenced) while any producer is attached or
//     waits.
//   - WaitForExclusive: queued (not ready) while any producer is attached;
//     promoted when the topic has no producer left (removeProducer).
//   - ExclusiveWithFencing: every attached and waiting producer is fenced
//     (returned: the caller tells them), and p takes the topic.
//
// Taking exclusive access increments the topic epoch, unless p asks for an
// epoch (a reconnecting exclusive producer): then an epoch below the
// current one is fenced and any other becomes the topic's epoch. The
// exclusive holder coming back under its name with the current epoch
// replaces its old self (fenced, returned), whatever connection that is on.
func (t *topic) addProducer(p *producer) (fenced []fencedProducer, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if x := t.mu.exclusive; x != nil && x.name == p.name && p.mode != pb.ProducerAccessMode_Shared &&
		p.askedEpoch != nil && *p.askedEpoch == t.mu.epoch {
		// The holder coming back (typically on a new connection, before
		// the old one is torn down): it still holds the topic.
		x.fenced.Store(true)
		delete(t.mu.producers, x.name)
		t.mu.exclusive = nil
		fenced = append(fenced, fencedProducer{x, false})
	}
	_, dup := t.mu.producers[p.name]
	dup = dup || slices.ContainsFunc(t.mu.waiting, func(q *producer) bool { return q.name == p.name })
	if dup && p.mode != pb.ProducerAccessMode_ExclusiveWithFencing {
		return fenced, fmt.Errorf("%w: producer %q is already connected to %s", ErrProducerBusy, p.name, t.name)
	}
	busy := len(t.mu.producers) > 0 || len(t.mu.waiting) > 0
	switch p.mode {
	case pb.ProducerAccessMode_Shared:
		if t.mu.exclusive != nil || len(t.mu.waiting) > 0 {
			return fenced, fmt.Errorf("%w: %s has an exclusive producer (%d waiting for exclusive access)",
				ErrProducerBusy, t.name, len(t.mu.waiting))
		}
		t.mu.producers[p.name] = p
		p.ready.Store(true)
		return fenced, nil
	case pb.ProducerAccessMode_Exclusive:
		if t.mu.exclusive != nil || len(t.mu.waiting) > 0 {
			return fenced, fmt.Errorf("%w: %s has an exclusive producer", ErrProducerFenced, t.name)
		}
		if busy {
			return fenced, fmt.Errorf("%w: %s has other producers", ErrProducerFenced, t.name)
		}
	case pb.ProducerAccessMode_WaitForExclusive:
		if busy {
			t.mu.waiting = append(t.mu.waiting, p)
			return fenced, nil
		}
	case pb.ProducerAccessMode_ExclusiveWithFencing:
		if err := t.checkEpochLocked(p); err != nil {
			return fenced, err
		}
		for _, q := range t.mu.waiting {
			fenced = append(fenced, fencedProducer{q, true})
		}
		for _, q := range t.mu.producers {
			fenced = append(fenced, fencedProducer{q, false})
		}
		for _, f := range fenced {
			f.p.fenced.Store(true)
		}
		t.mu.waiting = nil
		clear(t.mu.producers)
		t.mu.exclusive = nil
	}
	if err := t.checkEpochLocked(p); err != nil {
		return fenced, err
	}
	t.takeExclusiveLocked(p)
	return fenced, nil
}

// checkEpochLocked fences a producer asking for an epoch older than the
// topic's: another exclusive producer held the topic meanwhile.
func (t *topic) checkEpochLocked(p *producer) error {
	if p.askedEpoch != nil && t.mu.hasEpoch && *p.askedEpoch < t.mu.epoch {
		return fmt.Errorf("%w: %s: topic epoch moved to %d, producer has %d", ErrProducerFenced, t.name, t.mu.epoch, *p.askedEpoch)
	}
	return nil
}

// takeExclusiveLocked gives p exclusive access and sets the topic epoch.
func (t *topic) takeExclusiveLocked(p *producer) {
	switch {
	case p.askedEpoch != nil:
		t.mu.epoch = *p.askedEpoch
	case t.mu.hasEpoch:
		t.mu.epoch++
	default:
		t.mu.epoch = 0
	}
	t.mu.hasEpoch = true
	t.mu.exclusive = p
	t.mu.producers[p.name] = p
	p.ready.Store(true)
}

// removeProducer detaches p (attached or waiting). When the topic is left
// without producers, the first waiting producer is promoted and told so
// with a second PRODUCER_SUCCESS (producer_ready=true).
func (t *topic) removeProducer(p *producer) {
	var promoted *producer
	t.mu.Lock()
	t.mu.waiting = slices.DeleteFunc(t.mu.waiting, func(q *producer) bool { return q == p })
	if t.mu.producers[p.name] == p {
		delete(t.mu.producers, p.name)
	}
	if t.mu.exclusive == p {
		t.mu.exclusive = nil
	}
	if len(t.mu.producers) == 0 && len(t.mu.waiting) > 0 {
		promoted = t.mu.waiting[0]
		t.mu.waiting = t.mu.waiting[1:]
		promoted.askedEpoch = nil // a queued producer always gets a new epoch
		t.takeExclusiveLocked(promoted)
	}
	t.mu.Unlock()
	if promoted != nil {
		promoted.sess.send(promoted.success(promoted.requestID))
	}
}

// notifyFenced closes producers fenced by an ExclusiveWithFencing producer:
// attached ones get CLOSE_PRODUCER (their client reconnects and is refused
// with ProducerFenced, its epoch being old), waiting ones an ERROR answer
// to their pending PRODUCER. Their sessions drop them on the next PRODUCER
// with the same id; SENDs meanwhile get a SEND_ERROR.
func notifyFenced(fenced []fencedProducer) {
	for _, f := range fenced {
		if f.waiting {
			f.p.sess.sendError(f.p.requestID, fmt.Errorf("%w: fenced out by an ExclusiveWithFencing producer", ErrProducerFenced))
			continue
		}
		f.p.sess.send(protocol.CloseProducer(f.p.id, 0))
	}
}

// fencedProducer is a producer an ExclusiveWithFencing producer fenced;
// waiting: it had not been ready yet.
type fencedProducer struct {
	p       *producer
	waiting bool
}

func (s *session) handleSend(c *pb.CommandSend, f protocol.Frame) error {
	p := s.producers[c.GetProducerId()]
	if p == nil {
		s.send(protocol.SendError(c.GetProducerId(), c.GetSequenceId(), pb.ServerError_NotAllowedError, "unknown producer"))
		return nil
	}
	if p.fenced.Load() || !p.ready.Load() {
		s.send(protocol.SendError(p.id, c.GetSequenceId(), pb.ServerError_ProducerFenced, "producer is fenced or waits for exclusive access"))
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
	ps := &pendingSend{seq: c.GetSequenceId(), highestSeq: c.GetHighestSequenceId(), done: make(chan struct{}),
		start: time.Now(), records: records, bytes: len(entry)}
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
			if errors.Is(ps.err, lakestream.ErrFenced) {
				p.t.terminated.Store(true)
			}
			p.sess.log.Warn("append failed", "topic", p.t.name.String(), "producer", p.name, "seq", ps.seq, "err", ps.err)
			p.sess.send(protocol.SendError(p.id, ps.seq, serverError(ps.err), ps.err.Error()))
			p.sess.srv.metrics.publishErrors.Inc()
			continue
		}
		if ps.dup {
			// Pulsar's answer to a duplicate: message id (-1, -1).
			p.sess.send(protocol.SendReceipt(p.id, ps.seq, ps.highestSeq, protocol.NewMessageID(-1, -1, -1, -1)))
			continue
		}
		id := protocol.NewMessageID(int64(p.t.log.ID()), ps.h.Offset, -1, p.t.partition)
		p.sess.send(protocol.SendReceipt(p.id, ps.seq, ps.highestSeq, id))
		m := p.sess.srv.metrics
		m.publishLatency.Observe(time.Since(ps.start).Seconds())
		p.in.add(ps.records, ps.bytes)
		m.publishedMsgs.Add(float64(ps.records))
		m.publishedBytes.Add(float64(ps.bytes))
	}
	// Like Pulsar's broker, answer CLOSE_PRODUCER only after the receipts
	// of every SEND accepted before it: a client closing with sends in
	// flight then learns their outcome instead of failing them.
	if p.closeRequestID != nil {
		p.sess.send(protocol.Success(*p.closeRequestID))
	}
}

// close detaches the producer from its topic; receipts of SENDs in flight
// still go out while the session lives. Reader goroutine only.
func (p *producer) close() { p.closeWithReply(nil) }

// closeWithReply closes the producer; when reqID is set, receiptLoop answers
// it with SUCCESS after the receipts of the SENDs already queued. A producer
// closed before (fenced, say) is answered at once.
func (p *producer) closeWithReply(reqID *uint64) {
	first := false
	p.closeOnce.Do(func() {
		first = true
		p.closeRequestID = reqID // published to receiptLoop by close(p.queue)
		p.t.removeProducer(p)
		close(p.queue)
		p.t.dedup.snapshot()
	})
	if !first && reqID != nil {
		p.sess.send(protocol.Success(*reqID))
	}
}

func (s *session) handleCloseProducer(c *pb.CommandCloseProducer) {
	p := s.producers[c.GetProducerId()]
	if p == nil {
		s.send(protocol.Success(c.GetRequestId()))
		return
	}
	delete(s.producers, c.GetProducerId())
	reqID := c.GetRequestId()
	p.closeWithReply(&reqID)
}
