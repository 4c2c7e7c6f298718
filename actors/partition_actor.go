package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/lakegate/lakegate/lakestream"
)

// ProducerSink receives what a partition sends to one producer. Its methods
// run on the partition actor's goroutine and must never wait for the
// producer's connection (a producer that does not read its receipts would
// stall every producer of the partition), nor call back into the partition
// synchronously. A slow connection's bound is its producers' pending
// windows: the gateway stops reading a connection whose queue is full.
type ProducerSink interface {
	// Receipt answers a SEND that was stored (or was a duplicate).
	Receipt(r SendReceipt)
	// SendFailed answers a SEND that was not stored. ErrPartitionClosed: the
	// partition is unloading; send nothing (the client resends the SEND to
	// the next owner after Closed).
	SendFailed(seq uint64, err error)
	// Promoted tells a WaitForExclusive producer it now holds the partition.
	Promoted(epoch uint64, lastSequence int64)
	// FencedOut tells a producer an ExclusiveWithFencing producer took the
	// partition (waiting: it had not been ready yet).
	FencedOut(waiting bool)
	// CloseDone answers the producer's CloseProducer.
	CloseDone()
	// Closed tells the producer the partition is no longer served here
	// (unloaded, handed over or lost); assignedURL, when not empty, is where
	// it is served next.
	Closed(assignedURL string)
}

// PartitionOptions configure StartPartition.
type PartitionOptions struct {
	// Name is the partition's topic name (logs).
	Name string
	Log  lakestream.Log
	// Guard, when set, guards the partition's appends
	// (lakestream.WithAppendGuard): this node's ownership of it.
	Guard lakestream.Guard
	// State is what LoadPartition loaded; its cursors are owned by the actor
	// from now on and closed when it stops.
	State *LoadedPartition
	// Config of the machine (Dedup must match what was loaded).
	Config PartitionConfig
	// MailboxMsgs bounds the requests queued in the mailbox, in messages
	// (Mailbox.SendMsgs). Default 1024.
	MailboxMsgs int
	// AppendsInflightMax bounds the appends in flight, in appends: each
	// holds a reservation for its outcome (Ref.Reserve). A SEND that would
	// exceed it fails with ErrPartitionBusy. The gateway's windows
	// (ProducerPendingMax, 1000 SENDs per producer) keep well-behaved
	// producers far below it. Default 65536.
	AppendsInflightMax int
	// PersistTimeout bounds one persist of the topic epoch or of a
	// deduplication snapshot, and one read of a staging set (LoadStaged).
	// Default 30 s.
	PersistTimeout time.Duration
	// OnLost is called (once, on its own goroutine) when the partition
	// stops serving because a write found it is no longer this node's —
	// a fenced or conflicting cursor write. May be nil.
	OnLost func(err error)
	Logger *slog.Logger
}

// PartitionActor is the handle of a running partition actor. Safe for
// concurrent use.
type PartitionActor struct {
	ref  Ref
	name string
}

// Messages of the partition actor.
type (
	addProducerMsg struct {
		spec  ProducerSpec
		sink  ProducerSink
		reply chan ProducerAnswer
	}
	removeProducerMsg struct{ id uint64 }
	closeProducerMsg  struct{ id uint64 }
	sendMsg           struct {
		id  uint64
		req SendRequest
	}
	unloadMsg struct {
		graceful    bool
		assignedURL string
		reply       chan struct{}
	}
	partInfoMsg  struct{ reply chan PartitionInfo }
	terminateMsg struct{}
)

// Results of the actor's own asynchronous work, each queued on the
// reservation taken when the work began (Reservation.Send): appends complete
// on engine goroutines that must not block.
type (
	appendDoneMsg struct {
		token uint64
		h     lakestream.EntryHeader
		err   error
	}
	epochPersistedMsg struct {
		epoch  uint64
		cursor lakestream.LogCursor // the epoch cursor (opened by the first persist)
		err    error
	}
	dedupPersistedMsg struct{ err error }
	stagedLoadedMsg   struct {
		set  string
		seqs map[string]int64
		err  error
	}
)

// PartitionInfo is a snapshot for stats.
type PartitionInfo struct {
	Producers  int
	Waiting    int
	Inflight   int
	Terminated bool
	Epoch      uint64
	HasEpoch   bool
	// Dedup: the partition keeps a deduplication state (ProducerSpec.Dedup).
	Dedup bool
}

// StartPartition spawns the actor of one partition.
func StartPartition(rt Runtime, opts PartitionOptions) *PartitionActor {
	if opts.PersistTimeout <= 0 {
		opts.PersistTimeout = 30 * time.Second
	}
	if opts.AppendsInflightMax <= 0 {
		opts.AppendsInflightMax = 1 << 16
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &partHandler{
		opts:    opts,
		ctx:     ctx,
		cancel:  cancel,
		sm:      NewPartition(opts.Config, opts.State.State),
		sinks:   map[uint64]ProducerSink{},
		replies: map[uint64]chan ProducerAnswer{},
	}
	a := &PartitionActor{name: opts.Name}
	// Reservations: one per append in flight, one per persist (at most
	// one of the epoch and one snapshot at a time: the machine's rule),
	// one per read of a staging set (at most StagedLoadsMax).
	a.ref = rt.Spawn(h, Mailbox{SendMsgs: opts.MailboxMsgs, ReservedMax: opts.AppendsInflightMax + 2 + h.sm.cfg.StagedLoadsMax})
	h.self = a.ref
	return a
}

// AddProducer attaches a producer and waits for the partition's answer
// (which waits for the topic epoch to be durable when the producer takes
// exclusive access). ErrPartitionClosed once the partition stopped.
func (a *PartitionActor) AddProducer(spec ProducerSpec, sink ProducerSink) ProducerAnswer {
	r := make(chan ProducerAnswer, 1)
	a.ref.Send(addProducerMsg{spec: spec, sink: sink, reply: r})
	select {
	case ans := <-r:
		return ans
	case <-a.ref.Done():
		select {
		case ans := <-r:
			return ans
		default:
			return ProducerAnswer{Producer: spec.ID, Err: ErrPartitionClosed, LastSequence: -1}
		}
	}
}

// Send hands one SEND to the partition; its outcome reaches the producer's
// sink. It waits while the mailbox is full. ErrPartitionClosed once the
// partition stopped (its producers were told Closed: the client resends
// elsewhere).
func (a *PartitionActor) Send(id uint64, req SendRequest) error {
	return a.tell(sendMsg{id: id, req: req})
}

// RemoveProducer detaches a producer whose connection is gone.
// ErrPartitionClosed once the partition stopped (nothing left to detach).
func (a *PartitionActor) RemoveProducer(id uint64) error { return a.tell(removeProducerMsg{id: id}) }

// CloseProducer detaches a producer that asked to close; its sink's
// CloseDone follows the answers to every SEND it sent before.
// ErrPartitionClosed once the partition stopped (the sink was told Closed).
func (a *PartitionActor) CloseProducer(id uint64) error { return a.tell(closeProducerMsg{id: id}) }

// tell queues a request that has no answer of its own.
func (a *PartitionActor) tell(msg any) error {
	if a.ref.Send(msg) != nil {
		return ErrPartitionClosed
	}
	return nil
}

// Unload stops the partition and waits until it has stopped. Graceful: the
// appends in flight complete and are answered, a final deduplication
// snapshot is written, then every producer is told Closed(assignedURL). Not
// graceful (ownership lost): producers are told at once, outcomes still in
// flight are dropped.
func (a *PartitionActor) Unload(graceful bool, assignedURL string) {
	r := make(chan struct{})
	a.ref.Send(unloadMsg{graceful: graceful, assignedURL: assignedURL, reply: r})
	select {
	case <-r:
	case <-a.ref.Done():
	}
	<-a.ref.Done()
}

// Terminate tells the partition its log was fenced (topic terminated).
// ErrPartitionClosed once the partition stopped.
func (a *PartitionActor) Terminate() error { return a.tell(terminateMsg{}) }

// Info returns a snapshot (zero once stopped).
func (a *PartitionActor) Info() PartitionInfo {
	r := make(chan PartitionInfo, 1)
	a.ref.Send(partInfoMsg{reply: r})
	select {
	case i := <-r:
		return i
	case <-a.ref.Done():
		return PartitionInfo{}
	}
}

// Done is closed once the actor has stopped.
func (a *PartitionActor) Done() <-chan struct{} { return a.ref.Done() }

// partHandler is the actor: it owns the machine, the sinks and the
// partition's internal cursors, runs appends through Log.AppendAsync and
// persists on goroutines, each of which reports back on the reservation
// taken when it began.
type partHandler struct {
	opts      PartitionOptions
	sm        *Partition
	self      Ref
	ctx       context.Context
	cancel    context.CancelFunc
	sinks     map[uint64]ProducerSink
	replies   map[uint64]chan ProducerAnswer // AddProducer answers still owed
	appending int                            // appends in flight, each holding a reservation
	// unloading: the unload request being served (graceful: waits for
	// Drained and the final snapshot).
	unloading  *unloadMsg
	drained    bool
	persisting int // persists in flight
	stopped    bool
	// chainOpt appends on the append chain numbered chainNo
	// (AppendEntry.Chain); made once per chain.
	chainOpt lakestream.AppendOption
	chainNo  uint64
}

func (h *partHandler) Receive(msg any) {
	if h.stopped {
		h.refuse(msg)
		return
	}
	switch m := msg.(type) {
	case addProducerMsg:
		h.sinks[m.spec.ID] = m.sink
		h.replies[m.spec.ID] = m.reply
		h.run(h.sm.AddProducer(m.spec))
	case sendMsg:
		h.run(h.sm.Send(m.id, m.req))
	case removeProducerMsg:
		acts := h.sm.RemoveProducer(m.id)
		delete(h.sinks, m.id)
		h.run(acts)
	case closeProducerMsg:
		h.run(h.sm.CloseProducer(m.id))
	case appendDoneMsg:
		h.appending--
		if errors.Is(m.err, lakestream.ErrGuardLost) && h.lostBy(m.err) {
			return
		}
		h.run(h.sm.AppendDone(m.token, m.h, m.err))
	case epochPersistedMsg:
		h.persisting--
		if m.cursor != nil && h.opts.State.epochCursor == nil {
			h.opts.State.epochCursor = m.cursor
		}
		if h.lostBy(m.err) {
			return
		}
		h.run(h.sm.EpochPersisted(m.epoch, m.err))
	case dedupPersistedMsg:
		h.persisting--
		if m.err != nil && !h.lostBy(m.err) {
			h.opts.Logger.Warn("deduplication snapshot failed", "topic", h.opts.Name, "err", m.err)
		}
		if h.stopped {
			return
		}
		h.run(h.sm.DedupPersisted(m.err))
	case stagedLoadedMsg:
		if m.err != nil && !errors.Is(m.err, lakestream.ErrStageEnded) {
			h.opts.Logger.Warn("reading a staging set for deduplication failed", "topic", h.opts.Name, "set", m.set, "err", m.err)
		}
		h.run(h.sm.StagedLoaded(m.set, m.seqs, m.err))
	case unloadMsg:
		h.unloading = &m
		if !m.graceful {
			h.stop(m.assignedURL)
			return
		}
		h.run(h.sm.Drain())
	case terminateMsg:
		h.run(h.sm.Terminate())
	case partInfoMsg:
		e, ok := h.sm.Epoch()
		m.reply <- PartitionInfo{Producers: h.sm.Producers(), Waiting: h.sm.Waiting(), Inflight: h.sm.Inflight(),
			Terminated: h.sm.Terminated(), Epoch: e, HasEpoch: ok, Dedup: h.sm.KeepsDedup()}
	}
	h.maybeFinishUnload()
}

// refuse answers requests that reach a stopped partition.
func (h *partHandler) refuse(msg any) {
	switch m := msg.(type) {
	case addProducerMsg:
		m.reply <- ProducerAnswer{Producer: m.spec.ID, Err: ErrPartitionClosed, LastSequence: -1}
	case sendMsg:
		// The producer was told Closed; its client resends elsewhere.
	case closeProducerMsg:
		// Answered by Closed already.
	case unloadMsg:
		close(m.reply)
	case partInfoMsg:
		m.reply <- PartitionInfo{}
	}
}

// lostBy reports whether err means the partition is no longer this node's
// (a guarded write was refused), and if so stops it at once.
func (h *partHandler) lostBy(err error) bool {
	if err == nil || !(errors.Is(err, lakestream.ErrGuardLost) || errors.Is(err, lakestream.ErrConflict)) {
		return false
	}
	h.opts.Logger.Warn("partition lost: a guarded write was refused", "topic", h.opts.Name, "err", err)
	if !h.stopped {
		h.stop("")
		if f := h.opts.OnLost; f != nil {
			go f(err)
		}
	}
	return true
}

// maybeFinishUnload completes a graceful unload once the machine drained
// and the final snapshot is written.
func (h *partHandler) maybeFinishUnload() {
	if h.stopped || h.unloading == nil || !h.drained || h.persisting > 0 {
		return
	}
	h.stop(h.unloading.assignedURL)
}

// stop closes every producer, closes the internal cursors and stops the
// actor.
func (h *partHandler) stop(assignedURL string) {
	h.stopped = true
	for _, id := range h.sm.Close() {
		if r := h.replies[id]; r != nil {
			r <- ProducerAnswer{Producer: id, Err: ErrPartitionClosed, LastSequence: -1}
			delete(h.replies, id)
			continue
		}
		if s := h.sinks[id]; s != nil {
			s.Closed(assignedURL)
		}
	}
	for id, r := range h.replies {
		r <- ProducerAnswer{Producer: id, Err: ErrPartitionClosed, LastSequence: -1}
	}
	h.replies = nil
	h.sinks = nil
	h.cancel()
	if h.unloading != nil {
		close(h.unloading.reply)
		h.unloading = nil
	}
	h.self.Stop()
}

func (h *partHandler) Stopped() {
	h.cancel()
	h.stopped = true
	ctx, cancel := context.WithTimeout(context.Background(), h.opts.PersistTimeout)
	defer cancel()
	h.opts.State.Close(ctx)
}

func (h *partHandler) run(acts []Action) {
	for len(acts) > 0 && !h.stopped {
		a := acts[0]
		acts = acts[1:]
		switch a := a.(type) {
		case AppendEntry:
			acts = append(acts, h.appendEntry(a)...)
		case SendReceipt:
			if s := h.sinks[a.Producer]; s != nil {
				s.Receipt(a)
			}
		case SendFailed:
			if s := h.sinks[a.Producer]; s != nil {
				s.SendFailed(a.Seq, a.Err)
			}
		case ProducerAnswer:
			if r := h.replies[a.Producer]; r != nil {
				r <- a
				delete(h.replies, a.Producer)
			}
			if a.Err != nil {
				delete(h.sinks, a.Producer)
			}
		case ProducerPromoted:
			if s := h.sinks[a.Producer]; s != nil {
				s.Promoted(a.Epoch, a.LastSequence)
			}
		case ProducerFencedOut:
			if r := h.replies[a.Producer]; r != nil {
				// Fenced before its answer went out.
				r <- ProducerAnswer{Producer: a.Producer, Err: ErrProducerFenced, LastSequence: -1}
				delete(h.replies, a.Producer)
			} else if s := h.sinks[a.Producer]; s != nil {
				s.FencedOut(a.Waiting)
			}
			delete(h.sinks, a.Producer)
		case ProducerClosed:
			if s := h.sinks[a.Producer]; s != nil {
				s.CloseDone()
			}
			delete(h.sinks, a.Producer)
		case PersistEpoch:
			acts = append(acts, h.persistEpoch(a.Epoch)...)
		case PersistDedup:
			acts = append(acts, h.persistDedup(a)...)
		case Drained:
			h.drained = true
		case LoadStaged:
			acts = append(acts, h.loadStaged(a.Set)...)
		}
	}
}

// appendEntry starts one append. A refusal known at once (fenced, closed,
// AppendsInflightMax reached) is fed back to the machine synchronously.
func (h *partHandler) appendEntry(a AppendEntry) []Action {
	token := a.Token
	if h.appending >= h.opts.AppendsInflightMax {
		err := fmt.Errorf("%w: %d appends in flight", ErrPartitionBusy, h.appending)
		return h.sm.AppendDone(token, lakestream.EntryHeader{}, err)
	}
	res, err := h.self.Reserve()
	if err != nil {
		return h.sm.AppendDone(token, lakestream.EntryHeader{}, err)
	}
	// The payload came from the session's frame buffer (owned by the
	// SEND): donated, it goes to the WAL batch without a copy.
	if a.Chain != h.chainNo || h.chainOpt == nil {
		h.chainOpt, h.chainNo = lakestream.WithAppendChain(h.opts.Log.NewAppendChain()), a.Chain
	}
	opts := []lakestream.AppendOption{lakestream.WithPublishTime(a.PublishMs), lakestream.WithDonatedPayload(), h.chainOpt}
	if h.opts.Guard != nil {
		opts = append(opts, lakestream.WithAppendGuard(h.opts.Guard))
	}
	if a.Stage != "" {
		opts = append(opts, lakestream.WithStage(a.Stage))
	}
	err = h.opts.Log.AppendAsync(h.ctx, int(a.Records), a.Payload, func(eh lakestream.EntryHeader, err error) {
		res.Send(appendDoneMsg{token: token, h: eh, err: err})
		res.Release()
	}, opts...)
	if err != nil {
		res.Release() // the callback is not called
	} else {
		h.appending++
	}
	if errors.Is(err, lakestream.ErrGuardLost) && h.lostBy(err) {
		return nil
	}
	if err != nil {
		return h.sm.AppendDone(token, lakestream.EntryHeader{}, err)
	}
	return nil
}

// loadStaged starts the read of a staging set's staged entries (off the
// actor's goroutine); the result comes back as stagedLoadedMsg, on a
// reservation kept for it (StartPartition: the machine has at most
// StagedLoadsMax reads in flight).
func (h *partHandler) loadStaged(set string) []Action {
	res, err := h.self.Reserve()
	if err != nil {
		return h.sm.StagedLoaded(set, nil, err)
	}
	go func() {
		ctx, cancel := context.WithTimeout(h.ctx, h.opts.PersistTimeout)
		defer cancel()
		seqs, err := stagedSequences(ctx, h.opts.Log, set)
		res.Send(stagedLoadedMsg{set: set, seqs: seqs, err: err})
		res.Release()
	}()
	return nil
}

// persistEpoch starts the persist of the topic epoch; its outcome comes
// back as epochPersistedMsg. The machine has at most one in flight, and a
// reservation is kept for it (StartPartition), so Reserve fails only if
// that rule broke: the persist then fails at once.
func (h *partHandler) persistEpoch(epoch uint64) []Action {
	lp, c := h.opts.State, h.opts.State.epochCursor
	res, err := h.self.Reserve()
	if err != nil {
		return h.sm.EpochPersisted(epoch, err)
	}
	h.persisting++
	go func() {
		ctx, cancel := context.WithTimeout(h.ctx, h.opts.PersistTimeout)
		defer cancel()
		c, err := lp.epochCursorFor(ctx, c)
		if err == nil {
			err = c.MarkDelete(ctx, c.MarkDeleteOffset(), map[string]int64{epochProperty: int64(epoch)})
		}
		res.Send(epochPersistedMsg{epoch: epoch, cursor: c, err: err})
		res.Release()
	}()
	return nil
}

// persistDedup starts the write of a deduplication snapshot; its outcome
// comes back as dedupPersistedMsg (reserved as persistEpoch's).
func (h *partHandler) persistDedup(a PersistDedup) []Action {
	c := h.opts.State.dedupCursor
	if c == nil {
		h.sm.DedupPersisted(nil)
		return nil
	}
	res, err := h.self.Reserve()
	if err != nil {
		return h.sm.DedupPersisted(err)
	}
	h.persisting++
	go func() {
		// A graceful unload waits for this write: it does not end with
		// the actor's context.
		ctx, cancel := context.WithTimeout(context.Background(), h.opts.PersistTimeout)
		defer cancel()
		err := c.MarkDelete(ctx, a.End-1, a.Sequences)
		if err != nil {
			err = fmt.Errorf("deduplication snapshot below %d: %w", a.End, err)
		}
		res.Send(dedupPersistedMsg{err: err})
		res.Release()
	}()
	return nil
}
