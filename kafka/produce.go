package kafka

// Produce (docs/kafka.md, "Produce"): each record batch becomes one Pulsar
// batch entry, appended through the partition actor the Pulsar producers
// of the topic append through — so the access modes, the deduplication,
// the per-topic limits and the append order are the same for both
// protocols.
//
// The partition actor knows producers: the listener attaches, per
// partition, one shared producer for the batches of non-idempotent Kafka
// producers ("kafka@<member>"), and one per idempotent Kafka producer id
// and epoch ("kafka-<id>[.<epoch>]", its sequences the entry's), which the
// partition's deduplication judges when it is on. A producer's receipts
// come back in the order of its sends: the callbacks wait in a FIFO.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/lakestream"
)

// defaultMaxMessageSize is Pulsar's maxMessageSize default, the bound of
// one batch's entry when the topic sets none.
const defaultMaxMessageSize = 5 << 20

// maxProducers bounds the producers the listener attaches on the node
// (partitions × idempotent producers seen within idleProducer).
const maxProducers = 100_000

// idleProducer: an idempotent producer that sent nothing for this long is
// detached from its partition (its sequences stay in the partition's
// deduplication state; a later send attaches it again).
const idleProducer = 10 * time.Minute

// producers are the partition-actor producers of this listener, by topic
// and name.
type producers struct {
	srv *Server
	mu  struct {
		sync.Mutex
		m map[prodKey]*kproducer
	}
}

type prodKey struct {
	unit, name string
}

// actorIDs numbers the listener's producers for their partition actors:
// the high bit keeps them apart from the Pulsar gateway's.
var actorIDs atomic.Uint64

func newProducers(s *Server) *producers {
	ps := &producers{srv: s}
	ps.mu.m = map[prodKey]*kproducer{}
	return ps
}

// get returns the producer name of t, attaching it when needed; dedup:
// the partition judges its sequences (an idempotent producer:
// actors.ErrNoDedupState when the partition keeps no deduplication state).
func (ps *producers) get(t broker.ServedPartition, name string, dedup bool) (*kproducer, error) {
	k := prodKey{t.Name(), name}
	ps.mu.Lock()
	kp := ps.mu.m[k]
	if kp != nil && kp.t == t && !kp.gone.Load() {
		ps.mu.Unlock()
		return kp, nil
	}
	if len(ps.mu.m) >= maxProducers {
		ps.mu.Unlock()
		return nil, fmt.Errorf("%w: %d Kafka producers attached on this node", broker.ErrTooManyProducers, maxProducers)
	}
	kp = &kproducer{ps: ps, key: k, t: t, id: 1<<63 | actorIDs.Add(1), idempotent: dedup}
	kp.lastUse.Store(time.Now().UnixNano())
	ps.mu.m[k] = kp
	ps.mu.Unlock()
	spec := actors.ProducerSpec{ID: kp.id, Name: name, Mode: actors.AccessShared, Dedup: dedup}
	ans := t.Actor().AddProducer(spec, kp)
	for try := 1; errors.Is(ans.Err, actors.ErrProducerBusy) && try <= 10; try++ {
		// The producer of the name was just closed (a failed append) or
		// swept: it leaves once its sends are answered.
		time.Sleep(time.Duration(try) * 10 * time.Millisecond)
		ans = t.Actor().AddProducer(spec, kp)
	}
	if errors.Is(ans.Err, actors.ErrProducerBusy) {
		ans.Err = errProducerGone // the client retries
	}
	if ans.Err != nil {
		kp.drop()
		return nil, ans.Err
	}
	kp.nextSeq.Store(ans.LastSequence + 1)
	return kp, nil
}

// sweep detaches the idempotent producers idle since before cutoff.
func (ps *producers) sweep(cutoff time.Time) {
	ps.mu.Lock()
	var idle []*kproducer
	for _, kp := range ps.mu.m {
		if kp.idempotent && kp.lastUse.Load() < cutoff.UnixNano() {
			idle = append(idle, kp)
		}
	}
	ps.mu.Unlock()
	for _, kp := range idle {
		kp.sendMu.Lock()
		kp.mu.Lock()
		busy := len(kp.mu.pending) > 0
		kp.mu.Unlock()
		if !busy {
			kp.gone.Store(true) // sends fail (and are retried) from now
			kp.t.Actor().RemoveProducer(kp.id)
			kp.drop()
		}
		kp.sendMu.Unlock()
	}
}

// sweepProducers runs sweep every minute until the server closes.
func (s *Server) sweepProducers() {
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case now := <-tick.C:
			s.producers.sweep(now.Add(-idleProducer))
		}
	}
}

// kproducer is one producer of the listener on one partition: its
// partition actor's actors.ProducerSink.
type kproducer struct {
	ps  *producers
	key prodKey
	t   broker.ServedPartition
	id  uint64
	// idempotent: an idempotent Kafka producer's (swept when idle).
	idempotent bool
	// lastUse is when it last sent (Unix ns; sweep).
	lastUse atomic.Int64
	// nextSeq numbers the shared producer's entries (their sequence ids,
	// which deduplication judges when the topic has it on).
	nextSeq atomic.Int64
	gone    atomic.Bool

	// sendMu orders the sends: a send's callback is queued and the send
	// handed to the actor under it, so the FIFO matches the actor's order.
	// Lock order: sendMu before mu.
	sendMu sync.Mutex
	mu     struct {
		sync.Mutex
		// pending are the callbacks of the sends in flight, in order.
		pending []func(actors.SendReceipt, error)
	}
}

// errProducerGone: the partition dropped the producer (unloaded, handed
// over): the client is told to find the leader again.
var errProducerGone = fmt.Errorf("%w: the partition moved", broker.ErrServiceNotReady)

// send hands one entry to the partition actor; done is called once with
// its receipt or error (from the actor's goroutine: it must not block).
func (kp *kproducer) send(req actors.SendRequest, done func(actors.SendReceipt, error)) {
	kp.lastUse.Store(time.Now().UnixNano())
	kp.sendMu.Lock()
	defer kp.sendMu.Unlock()
	if kp.gone.Load() {
		done(actors.SendReceipt{}, errProducerGone)
		return
	}
	kp.mu.Lock()
	kp.mu.pending = append(kp.mu.pending, done)
	kp.mu.Unlock()
	if err := kp.t.Actor().Send(kp.id, req); err != nil {
		// Stopped: Closed fails the callbacks queued (this one included).
		kp.failAll(errProducerGone)
	}
}

// pop takes the oldest callback (nil when none is queued).
func (kp *kproducer) pop() func(actors.SendReceipt, error) {
	kp.mu.Lock()
	defer kp.mu.Unlock()
	if len(kp.mu.pending) == 0 {
		return nil
	}
	f := kp.mu.pending[0]
	kp.mu.pending[0] = nil
	kp.mu.pending = kp.mu.pending[1:]
	return f
}

// failAll fails every queued callback and forgets the producer.
func (kp *kproducer) failAll(err error) {
	kp.drop()
	kp.mu.Lock()
	pending := kp.mu.pending
	kp.mu.pending = nil
	kp.mu.Unlock()
	for _, f := range pending {
		f(actors.SendReceipt{}, err)
	}
}

// drop forgets the producer (the next send attaches a new one).
func (kp *kproducer) drop() {
	kp.gone.Store(true)
	kp.ps.mu.Lock()
	if kp.ps.mu.m[kp.key] == kp {
		delete(kp.ps.mu.m, kp.key)
	}
	kp.ps.mu.Unlock()
}

// Receipt implements actors.ProducerSink.
func (kp *kproducer) Receipt(r actors.SendReceipt) {
	if f := kp.pop(); f != nil {
		f(r, nil)
	}
}

// SendFailed implements actors.ProducerSink. After a failed append the
// partition fails the producer's later sends (ErrEarlierSendFailed): the
// producer is detached, so the clients' resends attach a new one.
func (kp *kproducer) SendFailed(seq uint64, err error) {
	switch {
	case errors.Is(err, actors.ErrPartitionClosed):
		err = errProducerGone
	case errors.Is(err, actors.ErrOutOfOrderSequence):
	default:
		if !kp.gone.Swap(true) {
			// Closed once every send before is answered (CloseDone drops
			// it); not from the actor's goroutine, which calls us.
			go kp.t.Actor().CloseProducer(kp.id)
		}
	}
	if f := kp.pop(); f != nil {
		f(actors.SendReceipt{}, err)
	}
}

// Promoted implements actors.ProducerSink (never: the listener's
// producers are Shared).
func (kp *kproducer) Promoted(uint64, int64) {}

// FencedOut implements actors.ProducerSink: an exclusive Pulsar producer
// took the partition.
func (kp *kproducer) FencedOut(bool) { kp.failAll(kerr.InvalidProducerEpoch) }

// CloseDone implements actors.ProducerSink.
func (kp *kproducer) CloseDone() { kp.drop() }

// Closed implements actors.ProducerSink.
func (kp *kproducer) Closed(string) { kp.failAll(errProducerGone) }

// batchProducer reads a RecordBatch v2's producer id, epoch and base
// sequence (-1 ids: not idempotent).
func batchProducer(batch []byte) (pid int64, epoch int16, seq int32) {
	if len(batch) < batchHeaderBytes {
		return -1, -1, -1
	}
	return int64(binary.BigEndian.Uint64(batch[43:])), int16(binary.BigEndian.Uint16(batch[51:])), int32(binary.BigEndian.Uint32(batch[53:]))
}

// produceResult gathers one Produce request's partition outcomes.
type produceResult struct {
	mu      sync.Mutex
	left    int
	resp    *kmsg.ProduceResponse
	a       *answer
	noReply bool
}

// done records one partition's outcome; the answer goes once every
// partition has one.
func (pr *produceResult) done() {
	pr.mu.Lock()
	pr.left--
	last := pr.left == 0
	pr.mu.Unlock()
	if last && !pr.noReply {
		pr.a.set(pr.resp)
	}
}

func handleProduce(c *conn, req kmsg.Request, a *answer) {
	r := req.(*kmsg.ProduceRequest)
	s := c.srv
	resp := r.ResponseKind().(*kmsg.ProduceResponse)
	pr := &produceResult{resp: resp, a: a, noReply: r.Acks == 0}
	if r.Acks == 0 {
		a.set(nil) // acks=0: no answer at all
	}
	pr.left = 1 // held until every partition is started
	ctx, cancel := context.WithTimeout(s.ctx, requestTimeout)
	defer cancel()
	for ti := range r.Topics {
		rt := &r.Topics[ti]
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		resp.Topics = append(resp.Topics, st)
		parts := resp.Topics[len(resp.Topics)-1].Partitions
		for pi := range rt.Partitions {
			rp := &rt.Partitions[pi]
			out := &parts[pi]
			*out = kmsg.NewProduceResponseTopicPartition()
			out.Partition, out.BaseOffset, out.LogAppendTime, out.LogStartOffset = rp.Partition, -1, -1, -1
			pr.mu.Lock()
			pr.left++
			pr.mu.Unlock()
			if err := c.authorize(ctx, rt.Topic, broker.ActionProduce); err != nil {
				out.ErrorCode = errCode(err)
				out.ErrorMessage = kmsg.StringPtr(err.Error())
				pr.done()
				continue
			}
			var stage string
			if r.TransactionID != nil {
				var err error
				if stage, err = s.txnStage(ctx, *r.TransactionID, c.role(), rt.Topic, rp); err != nil {
					out.ErrorCode = fencedCode(err, r.Version, math.MaxInt16) // Produce answers INVALID_PRODUCER_EPOCH
					out.ErrorMessage = kmsg.StringPtr(err.Error())
					pr.done()
					continue
				}
			}
			s.producePartition(ctx, rt.Topic, rp, out, pr, r.TransactionID, stage)
		}
	}
	pr.done()
}

// producePartition appends one partition's batches, in order; out is set
// when the last is answered (the first error answers for the partition:
// the batches after a failed one are not appended — Kafka's producer
// resends them).
//
// A transactional request's batches (tid set) are staged into stage, the
// staging set of the producer's transaction (txnStage).
func (s *Server) producePartition(ctx context.Context, topic string, rp *kmsg.ProduceRequestTopicPartition, out *kmsg.ProduceResponseTopicPartition, pr *produceResult, tid *string, stage string) {
	fail := func(err error) {
		out.ErrorCode = errCode(err)
		msg := err.Error()
		out.ErrorMessage = &msg
		s.metrics.produceErrors.Inc()
		pr.done()
	}
	t, err := s.partition(ctx, topic, rp.Partition, true)
	if err != nil {
		fail(err)
		return
	}
	batches, err := SplitBatches(rp.Records)
	if err != nil || len(batches) == 0 {
		if err == nil {
			err = fmt.Errorf("%w: no record batch", ErrMalformed)
		}
		fail(err)
		return
	}
	limit := t.Limits().MaxMessageSize
	if limit <= 0 {
		limit = defaultMaxMessageSize
	}
	type sent struct {
		kp  *kproducer
		req actors.SendRequest
	}
	reqs := make([]sent, 0, len(batches))
	now := time.Now().UnixMilli()
	for _, b := range batches {
		pid, epoch, seq := batchProducer(b)
		name := s.sharedName()
		if pid >= 0 {
			name = idempotentName(pid, epoch)
		}
		publish := batchPublishMs(b, now)
		entry, n, err := EntryFromBatch(b, EntryOptions{MaxBytes: limit, PublishMs: publish, ProducerName: name, Transactional: tid != nil})
		if err != nil {
			fail(err)
			return
		}
		kp, err := s.producers.get(t, name, pid >= 0)
		if errors.Is(err, actors.ErrNoDedupState) {
			// The partition's first idempotent producer: it keeps a
			// deduplication state from now on (a one-time reload; the
			// client retries on the reloaded partition).
			err = s.enableDedup(ctx, t)
		}
		if err != nil {
			fail(err)
			return
		}
		req := actors.SendRequest{Records: int32(n), PublishMs: publish, Payload: entry, Stage: stage}
		if pid >= 0 && seq >= 0 {
			req.Seq, req.Highest = uint64(seq), uint64(seq)+uint64(n)-1
		} else {
			sq := kp.nextSeq.Add(int64(n)) - int64(n)
			req.Seq, req.Highest = uint64(sq), uint64(sq)+uint64(n)-1
		}
		reqs = append(reqs, sent{kp, req})
	}
	var mu sync.Mutex
	left := len(reqs)
	var first error
	for i, sr := range reqs {
		sr.kp.send(sr.req, func(r actors.SendReceipt, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil && first == nil {
				first = err
			}
			if i == 0 && err == nil && !r.Dup {
				out.BaseOffset = r.Header.Offset
			}
			if err == nil && !r.Dup {
				s.metrics.producedRecords.Add(float64(r.Header.Records))
				s.metrics.producedBytes.Add(float64(r.Header.Size))
			}
			left--
			if left > 0 {
				return
			}
			if first != nil && tid != nil && errors.Is(first, lakestream.ErrStageEnded) {
				// The transaction ended: this node's cached record of the
				// transactional.id is behind (the producer is in its next
				// transaction), or the coordinator aborted it (a timeout).
				// The client resends; the record is read again, and a
				// timed-out transaction answered INVALID_PRODUCER_EPOCH
				// (txnState).
				s.forgetTxnState(*tid)
				first = fmt.Errorf("%w: %w", broker.ErrServiceNotReady, first)
			}
			if first != nil {
				s.metrics.produceErrors.Inc()
				out.BaseOffset = -1
				out.ErrorCode = errCode(first)
				msg := first.Error()
				out.ErrorMessage = &msg
			}
			pr.done()
		})
	}
}

// enableDedup creates a partition's deduplication cursor and reloads it,
// so that its sequences are judged (and persisted) for idempotent
// producers; the produce is answered NOT_LEADER_OR_FOLLOWER, which the
// client retries.
func (s *Server) enableDedup(ctx context.Context, t broker.ServedPartition) error {
	if err := actors.EnsureDedupCursor(ctx, t.Log(), broker.GuardOpts(t.Owner())...); err != nil {
		return err
	}
	s.log.Info("kafka: idempotent producers on a partition without deduplication: it keeps a deduplication state from now on", "topic", t.Name())
	if err := s.cfg.Reload(ctx, t.Name()); err != nil {
		return err
	}
	return fmt.Errorf("%w: reloaded with a deduplication state", broker.ErrServiceNotReady)
}

// sharedName is the producer name of non-idempotent Kafka producers'
// entries on this node.
func (s *Server) sharedName() string {
	return "kafka@" + s.cfg.Broker.Self().ID
}

// producerIDs hands out idempotent producer ids: the node's start time in
// the high bits and a counter, so ids from different nodes and restarts
// do not meet (a restarted node's clock has moved on).
type producerIDs struct {
	base int64
	next atomic.Int64
}

func handleInitProducerID(c *conn, req kmsg.Request, a *answer) {
	r := req.(*kmsg.InitProducerIDRequest)
	resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
	if r.TransactionalID != nil {
		handleInitProducerTxn(c, r, resp) // txn.go
		a.set(resp)
		return
	}
	resp.ProducerID, resp.ProducerEpoch = c.srv.nextProducerID(), 0
	a.set(resp)
}

// nextProducerID is a fresh idempotent producer id: unique in the cluster
// with overwhelming likelihood (48 random-ish bits of node and start time,
// then a counter).
func (s *Server) nextProducerID() int64 {
	return s.pids.base + s.pids.next.Add(1)
}
