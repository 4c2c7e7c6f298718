package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/lakegate/lakegate/lakestream"
)

// ConsumerSink receives what a subscription sends to one consumer. Its
// methods run on the subscription actor's goroutine and must never wait
// for the consumer's connection (one slow consumer would stall the whole
// subscription), nor call back into the subscription synchronously.
type ConsumerSink interface {
	// Deliver hands the entry to the consumer's connection, or returns
	// false when the connection cannot take it now (its outbound queue is
	// full). Refused, the entry goes to another consumer or waits for
	// redelivery, and the consumer is sent nothing more until SinkReady
	// is called with its id.
	Deliver(d Deliver) bool
	ActiveChange(active bool)
	// Disconnect tells the consumer the subscription dropped it (after a
	// seek); the client is expected to subscribe again.
	Disconnect()
}

// SubscriptionOptions configure StartSubscription.
type SubscriptionOptions struct {
	Name   string
	Type   SubType
	Log    lakestream.Log
	Cursor lakestream.LogCursor
	// ReadFrom is where dispatch starts; normally Cursor.MarkDeleteOffset()+1.
	ReadFrom int64
	// PartitionIndex is the topic partition of Log (-1: not partitioned);
	// Failover elects its active consumer with it. Default 0.
	PartitionIndex int32
	// ReadMaxRecords bounds one tail read, in records. Default 100.
	ReadMaxRecords int
	// ReadMaxBytes bounds one tail read, in payload bytes. Default 4 MiB.
	ReadMaxBytes int64
	// MailboxMsgs bounds the requests queued in the actor's mailbox, in
	// messages (Mailbox.SendMsgs). Default 1024.
	MailboxMsgs int
	// ConsumersMax bounds the consumers attached at a time: each holds a
	// reservation for its SinkReady (Ref.Reserve). One more is refused
	// with ErrSubscriptionBusy. Default 65536.
	ConsumersMax int
	// RetryBackoff is the delay before a failed read is retried. Default 100 ms.
	RetryBackoff time.Duration
	// Compacted, when set, makes the subscription read compacted (Pulsar's
	// readCompacted): below the compacted view's horizon it reads the
	// compacted log — the latest record of each key — and acknowledges
	// what compaction removed as it goes; from the horizon on, the log.
	Compacted CompactedView
	// MaxUnackedPerConsumer and MaxUnackedPerSubscription are the
	// machine's unacknowledged limits (SubscriptionConfig; 0: none);
	// SetUnackedLimits changes them.
	MaxUnackedPerConsumer, MaxUnackedPerSubscription int64
	// DispatchLimiters pace dispatch (dispatch rate limits): every read
	// waits until none of them asks for a delay, reads at most the
	// smallest record budget, and every delivery is counted by each.
	DispatchLimiters []DispatchLimiter
	Logger           *slog.Logger
}

// DispatchLimiter paces a subscription's dispatch (a dispatch rate). Safe
// for concurrent use: a limiter may be shared by the subscriptions of a
// topic, and is called off the actor (Delay, Budget) and on it (Consume).
type DispatchLimiter interface {
	// Delay is how long dispatch must wait before its next read (≤ 0: it
	// may read now).
	Delay() time.Duration
	// Budget bounds the next read, in records (≤ 0: no bound).
	Budget() int
	// Consume counts a delivery of msgs records and bytes payload bytes.
	Consume(msgs, bytes int)
}

// closePersistTimeout bounds the cursor write when a consumer leaves.
const closePersistTimeout = 5 * time.Second

// SubscriptionActor is the handle of a running subscription actor. Its
// methods are safe for concurrent use; the ones that return errors wait for
// the actor's answer.
type SubscriptionActor struct {
	ref     Ref
	h       *subHandler // its ready places only (SinkReady)
	stopped chan struct{}
}

// Messages of the subscription actor.
type (
	addConsumerMsg struct {
		id    uint64
		typ   SubType
		ks    KeySharedPolicy // Key_Shared only
		meta  ConsumerMeta
		sink  ConsumerSink
		reply chan error
	}
	removeConsumerMsg struct {
		id    uint64
		reply chan error
	}
	flowMsg struct {
		id      uint64
		permits uint32
	}
	ackMsg struct {
		id    uint64
		kind  AckKind
		ids   []AckID
		reply func(error)
	}
	redeliverMsg struct {
		id      uint64
		offsets []int64
	}
	ackTxnMsg struct {
		id    uint64
		txn   TxnID
		kind  AckKind
		ids   []AckID
		reply func(ranges []AckRange, cumulative bool, err error)
	}
	endTxnMsg struct {
		txn    TxnID
		commit bool
		reply  chan error
	}
	restoreTxnMsg struct {
		txn        TxnID
		ranges     []AckRange
		cumulative bool
		reply      chan error
	}
	unsubscribeMsg struct {
		id    uint64
		reply chan error
	}
	closeMsg struct{ reply chan error }
	seekMsg  struct {
		target int64
		reply  chan error
	}
	readDoneMsg struct {
		gen     uint64
		tail    bool
		entries []lakestream.Entry
		// acks are record ranges [start, end) a compacted read found
		// superseded (acknowledged before the entries are dispatched);
		// next is where the log was covered to (0: the entries' end).
		acks [][2]int64
		next int64
		err  error
	}
	// sinkReadyMsg: SinkReady(id), queued on the consumer's reservation.
	sinkReadyMsg   struct{ id uint64 }
	resolveDoneMsg struct {
		gen uint64
		rs  []Resolved
		err error
	}
	pokeMsg struct{}
	// tickMsg: a WakeAt's time came (delayed delivery).
	tickMsg   struct{}
	expireMsg struct {
		before int64
		reply  chan error
	}
	infoMsg         struct{ reply chan SubscriptionInfo }
	unackedLimitMsg struct{ perConsumer, perSubscription int64 }
)

// SubscriptionInfo is a snapshot for stats and GET_LAST_MESSAGE_ID.
type SubscriptionInfo struct {
	Type             SubType
	Consumers        int
	MarkDeleteOffset int64
	// AckedRanges are the records acknowledged above MarkDeleteOffset, as
	// ascending half-open [start, end) ranges (a copy).
	AckedRanges [][2]int64
	// Unacked is the number of entries delivered to consumers and not yet
	// wholly acknowledged.
	Unacked int
	// AcksWaiting is the number of acknowledgements waiting for entry
	// headers (not applied yet).
	AcksWaiting int
	// ConsumerCounts are the permits and unacknowledged records of each
	// attached consumer, by the id it was added with.
	ConsumerCounts map[uint64]ConsumerCounts
	// Delayed is the number of entries held for delayed delivery.
	Delayed int
	// PersistedMarkDeleteOffset is the mark-delete offset last persisted
	// (what survives this node: retention never trims above it).
	PersistedMarkDeleteOffset int64
	// BlockedOnUnacked: dispatch is blocked by MaxUnackedPerSubscription
	// (Pulsar's blockedSubscriptionOnUnackedMsgs); UnackedMessages is the
	// records that limit counts (delivered, not acknowledged).
	BlockedOnUnacked bool
	UnackedMessages  int64
	// KeySharedMode is "AUTO_SPLIT" or "STICKY" for a Key_Shared
	// subscription with consumers, else "".
	KeySharedMode string
	// PendingAckTxns is the number of transactions holding pending
	// acknowledgements on the subscription; PendingAckRecords the records
	// in their ranges (Subscription.PendingAckRecords).
	PendingAckTxns    int
	PendingAckRecords int64
}

// UnackedRecords is the number of records in [first, next) that are
// neither at or below MarkDeleteOffset nor in AckedRanges: the backlog of
// a log whose readable records are [first, next).
func (i SubscriptionInfo) UnackedRecords(first, next int64) int64 {
	lo := max(first, i.MarkDeleteOffset+1)
	if lo >= next {
		return 0
	}
	n := next - lo
	for _, r := range i.AckedRanges {
		if s, e := max(r[0], lo), min(r[1], next); s < e {
			n -= e - s
		}
	}
	return n
}

// StartSubscription spawns the actor of one subscription. It owns
// opts.Cursor from now on and closes it when the actor stops.
func StartSubscription(rt Runtime, opts SubscriptionOptions) *SubscriptionActor {
	if opts.ReadMaxBytes <= 0 {
		opts.ReadMaxBytes = 4 << 20
	}
	if opts.RetryBackoff <= 0 {
		opts.RetryBackoff = 100 * time.Millisecond
	}
	if opts.ConsumersMax <= 0 {
		opts.ConsumersMax = 1 << 16
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &subHandler{
		opts:       opts,
		ctx:        ctx,
		cancel:     cancel,
		sinks:      map[uint64]ConsumerSink{},
		ackReplies: map[uint64]func(error){},
		sm: NewSubscription(SubscriptionConfig{Type: opts.Type, ReadMaxRecords: opts.ReadMaxRecords, PartitionIndex: opts.PartitionIndex,
			MaxUnackedPerConsumer: opts.MaxUnackedPerConsumer, MaxUnackedPerSubscription: opts.MaxUnackedPerSubscription},
			opts.Cursor, opts.ReadFrom),
	}
	a := &SubscriptionActor{h: h, stopped: make(chan struct{})}
	h.stopped = a.stopped
	h.ready.places = map[uint64]Reservation{}
	a.ref = rt.Spawn(h, Mailbox{SendMsgs: opts.MailboxMsgs, ReservedMax: opts.ConsumersMax})
	h.self = a.ref
	return a
}

func (a *SubscriptionActor) call(msg any, reply chan error) error {
	select {
	case <-a.stopped:
		return ErrSubscriptionClosed
	default:
	}
	if a.ref.Send(msg) != nil {
		return ErrSubscriptionClosed
	}
	select {
	case err := <-reply:
		return err
	case <-a.stopped:
		select {
		case err := <-reply:
			return err
		default:
			return ErrSubscriptionClosed
		}
	}
}

// AddConsumer attaches a consumer with its sink.
func (a *SubscriptionActor) AddConsumer(id uint64, t SubType, sink ConsumerSink) error {
	r := make(chan error, 1)
	return a.call(addConsumerMsg{id: id, typ: t, sink: sink, reply: r}, r)
}

// AddConsumerWithMeta attaches a consumer with its sink, name and priority
// level (which order Failover consumers).
func (a *SubscriptionActor) AddConsumerWithMeta(id uint64, t SubType, m ConsumerMeta, sink ConsumerSink) error {
	r := make(chan error, 1)
	return a.call(addConsumerMsg{id: id, typ: t, meta: m, sink: sink, reply: r}, r)
}

// AddKeySharedConsumer attaches a Key_Shared consumer with its hash-range
// policy (ErrConsumerAssign when it cannot be honoured); AUTO_SPLIT
// consumers get their hashes from m.Name.
func (a *SubscriptionActor) AddKeySharedConsumer(id uint64, p KeySharedPolicy, m ConsumerMeta, sink ConsumerSink) error {
	r := make(chan error, 1)
	return a.call(addConsumerMsg{id: id, typ: SubKeyShared, ks: p, meta: m, sink: sink, reply: r}, r)
}

// RemoveConsumer detaches a consumer and waits until the actor no longer
// calls its sink. Its unacknowledged entries go to the other consumers.
func (a *SubscriptionActor) RemoveConsumer(id uint64) error {
	r := make(chan error, 1)
	return a.call(removeConsumerMsg{id: id, reply: r}, r)
}

// Flow adds permits. ErrSubscriptionClosed once the actor has stopped.
func (a *SubscriptionActor) Flow(id uint64, permits uint32) error {
	return a.tell(flowMsg{id: id, permits: permits})
}

// Ack acknowledges; reply (may be nil) is called on the actor's goroutine
// once the acknowledgement is applied (after the log was asked for the
// record counts of entries the subscription did not know), or refused —
// or, when the actor has stopped already, at once on the caller's
// goroutine with ErrSubscriptionClosed.
func (a *SubscriptionActor) Ack(id uint64, kind AckKind, ids []AckID, reply func(error)) {
	if err := a.tell(ackMsg{id: id, kind: kind, ids: ids, reply: reply}); err != nil && reply != nil {
		reply(err)
	}
}

// AckTxn acknowledges in transaction txn (Subscription.AckTxn): the
// records become pending for txn, the cursor does not move. reply (may be
// nil) is called on the actor's goroutine once the acknowledgement is
// applied, with every range txn holds pending on the subscription then
// and whether they came from a cumulative acknowledgement — what the
// caller persists (txn-acks/…) before it answers the client, and gives
// RestoreTxnAcks on a new owner — or with the error that refused it
// (ErrTxnConflict, ErrTxnAckLimit, …; ranges nil). When the actor has
// stopped already, reply is called at once on the caller's goroutine
// with ErrSubscriptionClosed.
func (a *SubscriptionActor) AckTxn(id uint64, txn TxnID, kind AckKind, ids []AckID, reply func(ranges []AckRange, cumulative bool, err error)) {
	if err := a.tell(ackTxnMsg{id: id, txn: txn, kind: kind, ids: ids, reply: reply}); err != nil && reply != nil {
		reply(nil, false, err)
	}
}

// EndTxn commits or aborts what transaction txn holds pending on the
// subscription (Subscription.EndTxn) and returns once it is applied — for
// a commit of a durable cursor, once the cursor is persisted too
// (bounded by 5 s), so that the caller may then delete the persisted
// pending acks. An error means they may not be: call EndTxn again (a
// commit of a transaction applied already persists the cursor again).
// Unknown txn: nil.
func (a *SubscriptionActor) EndTxn(txn TxnID, commit bool) error {
	r := make(chan error, 1)
	return a.call(endTxnMsg{txn: txn, commit: commit, reply: r}, r)
}

// RestoreTxnAcks makes ranges pending for txn again
// (Subscription.RestoreTxnAcks): a new owner calls it with what AckTxn's
// replies persisted, before consumers attach.
func (a *SubscriptionActor) RestoreTxnAcks(txn TxnID, ranges []AckRange, cumulative bool) error {
	r := make(chan error, 1)
	return a.call(restoreTxnMsg{txn: txn, ranges: ranges, cumulative: cumulative, reply: r}, r)
}

// tell queues a request that has no answer of its own.
func (a *SubscriptionActor) tell(msg any) error {
	if a.ref.Send(msg) != nil {
		return ErrSubscriptionClosed
	}
	return nil
}

// SinkReady tells the subscription that consumer id's connection, which
// refused an entry (ConsumerSink.Deliver returned false), has room again.
// It never blocks: safe from a connection's writer goroutine. It is queued
// on the reservation the consumer holds while attached, so it is never
// refused for room; calls while one is queued coalesce into it. A no-op
// for a consumer not attached.
func (a *SubscriptionActor) SinkReady(id uint64) {
	a.h.ready.Lock()
	p := a.h.ready.places[id]
	a.h.ready.Unlock()
	if p != nil {
		p.Send(sinkReadyMsg{id: id})
	}
}

// Redeliver asks for redelivery of the consumer's unacknowledged entries
// (all when offsets is nil). ErrSubscriptionClosed once the actor has
// stopped.
func (a *SubscriptionActor) Redeliver(id uint64, offsets []int64) error {
	return a.tell(redeliverMsg{id: id, offsets: offsets})
}

// Unsubscribe deletes the subscription if id is its only consumer, and
// stops the actor.
func (a *SubscriptionActor) Unsubscribe(id uint64) error {
	r := make(chan error, 1)
	return a.call(unsubscribeMsg{id: id, reply: r}, r)
}

// ResetCursor resets the subscription to offset target, as Pulsar's reset cursor:
// every consumer is disconnected, and the cursor is recreated with
// everything below target acknowledged and nothing at or above it (durable
// cursors are deleted and opened again; ephemeral ones reopened).
func (a *SubscriptionActor) ResetCursor(target int64) error {
	r := make(chan error, 1)
	return a.call(seekMsg{target: target, reply: r}, r)
}

// Expire acknowledges every record below offset before (message TTL,
// backlog-quota eviction); see Subscription.Expire. The cursor persists it
// with its next batch.
func (a *SubscriptionActor) Expire(before int64) error {
	r := make(chan error, 1)
	return a.call(expireMsg{before: before, reply: r}, r)
}

// SetUnackedLimits changes the unacknowledged limits (0: none); they
// apply at once (Subscription.SetUnackedLimits). ErrSubscriptionClosed
// once the actor has stopped.
func (a *SubscriptionActor) SetUnackedLimits(perConsumer, perSubscription int64) error {
	return a.tell(unackedLimitMsg{perConsumer: perConsumer, perSubscription: perSubscription})
}

// Close persists the cursor and stops the actor (the subscription survives).
func (a *SubscriptionActor) Close() error {
	r := make(chan error, 1)
	err := a.call(closeMsg{reply: r}, r)
	<-a.stopped
	return err
}

// Info returns a snapshot of the subscription.
func (a *SubscriptionActor) Info() (SubscriptionInfo, error) {
	r := make(chan SubscriptionInfo, 1)
	select {
	case <-a.stopped:
		return SubscriptionInfo{}, ErrSubscriptionClosed
	default:
	}
	if a.ref.Send(infoMsg{reply: r}) != nil {
		return SubscriptionInfo{}, ErrSubscriptionClosed
	}
	select {
	case i := <-r:
		return i, nil
	case <-a.stopped:
		return SubscriptionInfo{}, ErrSubscriptionClosed
	}
}

// Done is closed when the actor has stopped.
func (a *SubscriptionActor) Done() <-chan struct{} { return a.stopped }

// subHandler is the actor: it owns sm, the cursor and the sinks, and runs
// reads on goroutines that report back with readDoneMsg.
type subHandler struct {
	opts       SubscriptionOptions
	sm         *Subscription
	sinks      map[uint64]ConsumerSink
	ackSeq     uint64                 // tokens of acknowledgements
	ackReplies map[uint64]func(error) // by token, until AckDone
	self       Ref
	ctx        context.Context
	cancel     context.CancelFunc
	cancelRead context.CancelFunc
	// wake is the timer of the latest WakeAt (delayed delivery), wakeAt
	// its time (Unix ms).
	wake    *time.Timer
	wakeAt  int64
	stopped chan struct{}
	done    bool

	// ready.places are the reservations of the attached consumers, by
	// id, on which SinkReady queues (written on the actor, read by
	// SinkReady's callers).
	ready struct {
		sync.Mutex
		places map[uint64]Reservation
	}
}

func (h *subHandler) Receive(msg any) {
	if h.done {
		h.receiveStopped(msg)
		return
	}
	switch m := msg.(type) {
	case sinkReadyMsg:
		h.run(h.sm.SinkReady(m.id))
	case addConsumerMsg:
		acts, err := h.addConsumer(m)
		m.reply <- err
		h.run(acts)
	case removeConsumerMsg:
		h.removeConsumer(m)
	case flowMsg:
		acts, err := h.sm.Flow(m.id, m.permits)
		if err != nil {
			h.opts.Logger.Debug("flow", "sub", h.opts.Name, "err", err)
		}
		h.run(acts)
	case ackMsg:
		h.ackSeq++
		if m.reply != nil {
			h.ackReplies[h.ackSeq] = m.reply
		}
		h.run(h.sm.Ack(h.ackSeq, m.id, m.kind, m.ids))
	case ackTxnMsg:
		h.ackSeq++
		if m.reply != nil {
			txn, reply := m.txn, m.reply
			h.ackReplies[h.ackSeq] = func(err error) {
				if err != nil {
					reply(nil, false, err)
					return
				}
				rs, cum := h.sm.TxnAcks(txn)
				reply(rs, cum, nil)
			}
		}
		h.run(h.sm.AckTxn(h.ackSeq, m.id, m.txn, m.kind, m.ids))
	case endTxnMsg:
		h.endTxn(m)
	case restoreTxnMsg:
		acts, err := h.sm.RestoreTxnAcks(m.txn, m.ranges, m.cumulative)
		m.reply <- err
		h.run(acts)
	case resolveDoneMsg:
		if m.err != nil {
			h.sm.OnResolveFailed(m.gen)
			if h.ctx.Err() == nil {
				h.opts.Logger.Warn("looking up acknowledged entries failed; retrying", "sub", h.opts.Name, "err", m.err)
				h.retryLater()
			}
			return
		}
		h.run(h.sm.OnResolved(m.gen, m.rs))
	case redeliverMsg:
		acts, _ := h.sm.Redeliver(m.id, m.offsets)
		h.run(acts)
	case readDoneMsg:
		h.readDone(m)
	case pokeMsg:
		h.run(h.sm.Poke())
	case tickMsg:
		h.wakeAt = 0
		h.run(h.sm.Tick())
	case expireMsg:
		acts, err := h.sm.Expire(m.before)
		m.reply <- err
		h.run(acts)
	case infoMsg:
		m.reply <- h.info()
	case unackedLimitMsg:
		h.opts.MaxUnackedPerConsumer, h.opts.MaxUnackedPerSubscription = m.perConsumer, m.perSubscription
		h.run(h.sm.SetUnackedLimits(m.perConsumer, m.perSubscription))
	case unsubscribeMsg:
		if h.sm.Consumers() > 1 {
			m.reply <- fmt.Errorf("%w: other consumers are attached", ErrConsumerBusy)
			return
		}
		h.stop()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		m.reply <- h.opts.Cursor.Delete(ctx)
	case closeMsg:
		h.applyWaitingAcks() // then persisted by Close
		h.stop()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		m.reply <- h.opts.Cursor.Close(ctx)
	case seekMsg:
		m.reply <- h.seek(m.target)
	}
}

// receiveStopped answers what comes after the actor stopped: requests
// fail with ErrSubscriptionClosed (a close or a removal succeeds: there
// is nothing left to do), the rest is dropped.
func (h *subHandler) receiveStopped(msg any) {
	switch m := msg.(type) {
	case addConsumerMsg:
		m.reply <- ErrSubscriptionClosed
	case removeConsumerMsg:
		m.reply <- nil
	case unsubscribeMsg:
		m.reply <- ErrSubscriptionClosed
	case closeMsg:
		m.reply <- nil
	case seekMsg:
		m.reply <- ErrSubscriptionClosed
	case ackMsg:
		if m.reply != nil {
			m.reply(ErrSubscriptionClosed)
		}
	case infoMsg:
		m.reply <- SubscriptionInfo{}
	case expireMsg:
		m.reply <- ErrSubscriptionClosed
	case ackTxnMsg:
		if m.reply != nil {
			m.reply(nil, false, ErrSubscriptionClosed)
		}
	case endTxnMsg:
		m.reply <- ErrSubscriptionClosed
	case restoreTxnMsg:
		m.reply <- ErrSubscriptionClosed
	}
}

// endTxn applies EndTxn. A commit is persisted before the answer: the
// caller deletes the transaction's persisted pending acks once it has
// it, and after that only the cursor remembers them. Like a consumer's
// leave, that is cursor I/O on the actor, bounded by closePersistTimeout;
// it is one write per transaction ended, not per acknowledgement.
func (h *subHandler) endTxn(m endTxnMsg) {
	acts, err := h.sm.EndTxn(m.txn, m.commit)
	if err == nil && m.commit && h.opts.Cursor.Durable() {
		ctx, cancel := context.WithTimeout(h.ctx, closePersistTimeout)
		if err = h.opts.Cursor.PersistState(ctx); err != nil {
			err = fmt.Errorf("persisting the cursor after committing transaction %s: %w", m.txn, err)
		}
		cancel()
	}
	m.reply <- err
	h.run(acts)
}

// removeConsumer detaches consumer m.id and persists the cursor.
func (h *subHandler) removeConsumer(m removeConsumerMsg) {
	// Acknowledgements the consumer sent before leaving are applied
	// first: its entries they cover are not handed to others.
	h.applyWaitingAcks()
	acts := h.sm.RemoveConsumer(m.id)
	h.dropSink(m.id)
	// A consumer that leaves has its acknowledgements persisted now, not
	// at the next persistence tick: after a clean close nothing it
	// acknowledged is redelivered, even if this node dies right after.
	if h.opts.Cursor.Durable() {
		ctx, cancel := context.WithTimeout(h.ctx, closePersistTimeout)
		if err := h.opts.Cursor.PersistState(ctx); err != nil && h.ctx.Err() == nil {
			h.opts.Logger.Warn("persisting the cursor of a closing consumer", "sub", h.opts.Name, "err", err)
		}
		cancel()
	}
	m.reply <- nil
	h.run(acts)
}

// readDone takes a read's entries into the machine, or retries a failed
// read later.
func (h *subHandler) readDone(m readDoneMsg) {
	if m.err != nil {
		h.sm.OnReadFailed(m.gen)
		if h.ctx.Err() == nil {
			// Retry on any error: the machine issues no read by itself
			// until its next input, which may never come.
			if !errors.Is(m.err, context.Canceled) {
				h.opts.Logger.Warn("subscription read failed; retrying", "sub", h.opts.Name, "err", m.err)
			}
			h.retryLater()
		}
		return
	}
	for _, r := range m.acks {
		if err := h.opts.Cursor.IndividualDelete(r[0], r[1]-r[0]); err != nil {
			h.opts.Logger.Warn("acknowledging records compaction removed", "sub", h.opts.Name, "err", err)
		}
	}
	h.run(h.sm.OnReadTo(m.gen, m.tail, m.entries, m.next))
}

// info is the subscription's state for stats.
func (h *subHandler) info() SubscriptionInfo {
	blocked, _ := h.sm.BlockedOnUnacked()
	return SubscriptionInfo{Type: h.sm.Type(), Consumers: h.sm.Consumers(), MarkDeleteOffset: h.opts.Cursor.MarkDeleteOffset(),
		AckedRanges: h.opts.Cursor.AckedRanges(), Unacked: h.sm.PendingEntries(), AcksWaiting: h.sm.AcksWaiting(),
		ConsumerCounts: h.sm.ConsumerCounts(), Delayed: h.sm.DelayedEntries(),
		PersistedMarkDeleteOffset: h.opts.Cursor.PersistedMarkDeleteOffset(),
		BlockedOnUnacked:          blocked, UnackedMessages: h.sm.UnackedRecords(),
		KeySharedMode: h.sm.KeySharedMode(), PendingAckTxns: len(h.sm.PendingTxns()), PendingAckRecords: h.sm.PendingAckRecords()}
}

// addConsumer attaches a consumer: its reservation for SinkReady, then the
// machine; the sink once both took it.
func (h *subHandler) addConsumer(m addConsumerMsg) ([]Action, error) {
	res, err := h.self.Reserve()
	if err != nil {
		return nil, fmt.Errorf("%w: %d consumers attached", ErrSubscriptionBusy, h.sm.Consumers())
	}
	var acts []Action
	if m.typ == SubKeyShared {
		acts, err = h.sm.AddKeySharedConsumer(m.id, m.ks, m.meta)
	} else {
		acts, err = h.sm.AddConsumerWithMeta(m.id, m.typ, m.meta)
	}
	if err != nil {
		res.Release()
		return acts, err
	}
	h.sinks[m.id] = m.sink
	h.ready.Lock()
	if old := h.ready.places[m.id]; old != nil {
		old.Release()
	}
	h.ready.places[m.id] = res
	h.ready.Unlock()
	return acts, nil
}

// dropSink forgets a consumer's sink and gives its reservation back.
func (h *subHandler) dropSink(id uint64) {
	delete(h.sinks, id)
	h.ready.Lock()
	if p := h.ready.places[id]; p != nil {
		p.Release()
		delete(h.ready.places, id)
	}
	h.ready.Unlock()
}

// dropSinks forgets every sink and gives their reservations back.
func (h *subHandler) dropSinks() {
	for id := range h.sinks {
		h.dropSink(id)
	}
	h.ready.Lock()
	for id, p := range h.ready.places {
		p.Release()
		delete(h.ready.places, id)
	}
	h.ready.Unlock()
}

// seek implements ResetCursor on the actor. Cursor I/O runs here: seeks are rare
// and every consumer is being disconnected anyway.
func (h *subHandler) seek(target int64) error {
	for _, sink := range h.sinks {
		sink.Disconnect()
	}
	h.dropSinks()
	h.run(h.sm.Close()) // cancels the read in flight
	ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
	defer cancel()
	old := h.opts.Cursor
	name := old.Name()
	var (
		cursor lakestream.LogCursor
		err    error
	)
	if old.Durable() {
		if err = old.Delete(ctx); err == nil {
			cursor, err = h.opts.Log.OpenCursor(ctx, name, target-1)
		}
	} else {
		old.Close(ctx)
		cursor, err = h.opts.Log.OpenEphemeralCursor(ctx, name, target)
	}
	if err != nil {
		// The subscription cannot go on without a cursor.
		h.opts.Logger.Error("seek: recreating the cursor failed; closing the subscription", "sub", h.opts.Name, "err", err)
		h.stop()
		return err
	}
	h.opts.Cursor = cursor
	prev := h.sm
	h.sm = NewSubscription(SubscriptionConfig{Type: h.opts.Type, ReadMaxRecords: h.opts.ReadMaxRecords,
		PartitionIndex: h.opts.PartitionIndex, ReadGenBase: h.sm.ReadGen() + 1,
		MaxUnackedPerConsumer: h.opts.MaxUnackedPerConsumer, MaxUnackedPerSubscription: h.opts.MaxUnackedPerSubscription}, cursor, target)
	// Pending acknowledgements belong to their transactions, not to the
	// cursor position: they survive the reset (those below target commit
	// as no-ops).
	for _, txn := range prev.PendingTxns() {
		rs, cum := prev.TxnAcks(txn)
		if _, err := h.sm.RestoreTxnAcks(txn, rs, cum); err != nil {
			h.opts.Logger.Warn("seek: keeping pending acknowledgements", "sub", h.opts.Name, "txn", txn.String(), "err", err)
		}
	}
	return nil
}

// stop closes the machine, cancels reads and stops the actor.
func (h *subHandler) stop() {
	h.run(h.sm.Close()) // answers the acknowledgements still waiting
	if h.wake != nil {
		h.wake.Stop()
	}
	h.done = true
	h.dropSinks()
	h.sinks = nil
	h.cancel()
	h.self.Stop()
}

func (h *subHandler) Stopped() {
	h.cancel()
	for token, reply := range h.ackReplies {
		reply(ErrSubscriptionClosed)
		delete(h.ackReplies, token)
	}
	if !h.done {
		h.done = true
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		h.opts.Cursor.Close(ctx)
	}
	close(h.stopped)
}

func (h *subHandler) run(acts []Action) {
	for i := 0; i < len(acts); i++ {
		switch a := acts[i].(type) {
		case Deliver:
			s := h.sinks[a.ConsumerID]
			if s == nil {
				continue
			}
			// Once the connection refused one entry, the entries after
			// it go elsewhere too (or wait): never out of order.
			if h.sm.SinkFull(a.ConsumerID) || !s.Deliver(a) {
				acts = append(acts, h.sm.Undelivered(a.ConsumerID, a.Entry)...)
			}
			for _, l := range h.opts.DispatchLimiters {
				l.Consume(int(a.Entry.Records), len(a.Entry.Payload))
			}
		case ActiveChange:
			if s := h.sinks[a.ConsumerID]; s != nil {
				s.ActiveChange(a.Active)
			}
		case CancelRead:
			if h.cancelRead != nil {
				h.cancelRead()
				h.cancelRead = nil
			}
		case ReadTail:
			h.startRead(a.Gen, func(ctx context.Context) (readResult, error) {
				budget, err := h.pace(ctx)
				if err != nil {
					return readResult{}, err
				}
				if budget > 0 {
					a.MaxRecords = max(1, min(a.MaxRecords, budget))
				}
				if h.opts.Compacted != nil {
					return h.readCompacted(ctx, a)
				}
				es, err := h.readTail(ctx, a)
				return readResult{entries: es}, err
			}, true)
		case ReadReplay:
			h.startRead(a.Gen, func(ctx context.Context) (readResult, error) {
				if _, err := h.pace(ctx); err != nil {
					return readResult{}, err
				}
				if h.opts.Compacted != nil {
					return h.readReplayCompacted(ctx, a)
				}
				es, err := h.readReplay(ctx, a)
				return readResult{entries: es}, err
			}, false)
		case ResolveEntries:
			self, ctx, lg := h.self, h.ctx, h.opts.Log
			go func() {
				rs, err := resolveEntries(ctx, lg, a.Offsets)
				self.Send(resolveDoneMsg{gen: a.Gen, rs: rs, err: err})
			}()
		case WakeAt:
			if h.wakeAt != 0 && h.wakeAt <= a.At {
				continue // a tick at or before it is coming
			}
			if h.wake != nil {
				h.wake.Stop()
			}
			self := h.self
			h.wakeAt = a.At
			h.wake = time.AfterFunc(time.Until(time.UnixMilli(a.At)), func() { self.Send(tickMsg{}) })
		case AckDone:
			if reply := h.ackReplies[a.Token]; reply != nil {
				delete(h.ackReplies, a.Token)
				reply(a.Err)
			} else if a.Err != nil {
				h.opts.Logger.Warn("ack", "sub", h.opts.Name, "err", a.Err)
			}
		}
	}
}

// pace runs off the actor, before a read: it waits until no dispatch
// limiter asks for a delay (or ctx ends), and returns the smallest record
// budget (0: none).
func (h *subHandler) pace(ctx context.Context) (int, error) {
	ls := h.opts.DispatchLimiters
	for {
		var wait time.Duration
		for _, l := range ls {
			wait = max(wait, l.Delay())
		}
		if wait <= 0 {
			break
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		}
	}
	budget := 0
	for _, l := range ls {
		if b := l.Budget(); b > 0 && (budget == 0 || b < budget) {
			budget = b
		}
	}
	return budget, nil
}

// retryLater pokes the machine after RetryBackoff: it issues no read or
// lookup by itself until its next input, which may never come.
func (h *subHandler) retryLater() {
	self := h.self
	time.AfterFunc(h.opts.RetryBackoff, func() { self.Send(pokeMsg{}) })
}

// applyWaitingAcks applies the acknowledgements waiting for entry headers
// now, looking the entries up on the actor (bounded by
// closePersistTimeout): a consumer leaving or the subscription closing
// must not overtake acknowledgements sent before. On failure they stay
// queued for the asynchronous retry.
func (h *subHandler) applyWaitingAcks() {
	r, ok := h.sm.ResolveNow()
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(h.ctx, closePersistTimeout)
	defer cancel()
	rs, err := resolveEntries(ctx, h.opts.Log, r.Offsets)
	if err != nil {
		h.sm.OnResolveFailed(r.Gen)
		h.opts.Logger.Warn("looking up acknowledged entries failed; retrying", "sub", h.opts.Name, "err", err)
		h.retryLater()
		return
	}
	h.run(h.sm.OnResolved(r.Gen, rs))
}

// Offsets to look up closer than resolveGapRecords to each other, within
// resolveSpanRecords, are found with one index walk (Log.IndexRange)
// rather than one lookup each.
const (
	resolveGapRecords  = 4096
	resolveSpanRecords = 1 << 16
)

// resolveEntries runs off the actor (or on it, from applyWaitingAcks): the
// headers of the entries containing offsets (ascending). An offset that is
// trimmed or beyond the head gets that error as its answer; any other
// error fails the whole lookup.
func resolveEntries(ctx context.Context, lg lakestream.Log, offsets []int64) ([]Resolved, error) {
	out := make([]Resolved, 0, len(offsets))
	for i := 0; i < len(offsets); {
		j := i + 1
		for j < len(offsets) && offsets[j]-offsets[j-1] <= resolveGapRecords && offsets[j]-offsets[i] < resolveSpanRecords {
			j++
		}
		hs, err := lg.IndexRange(ctx, offsets[i], offsets[j-1]+1)
		if err != nil {
			return nil, err
		}
		k := 0
		for _, off := range offsets[i:j] {
			for k < len(hs) && hs[k].End() <= off {
				k++
			}
			if k < len(hs) && hs[k].Contains(off) {
				out = append(out, Resolved{Offset: off, Header: hs[k]})
				continue
			}
			// Outside the readable range: which side, exactly.
			eh, err := lg.EntryHeader(ctx, off)
			switch {
			case err == nil:
				out = append(out, Resolved{Offset: off, Header: eh})
			case errors.Is(err, lakestream.ErrOffsetTrimmed), errors.Is(err, lakestream.ErrOffsetOutOfRange):
				out = append(out, Resolved{Offset: off, Err: err})
			default:
				return nil, err
			}
		}
		i = j
	}
	return out, nil
}

// readResult is what a read hands back to the actor.
type readResult struct {
	entries []lakestream.Entry
	acks    [][2]int64
	next    int64
}

func (h *subHandler) startRead(gen uint64, f func(context.Context) (readResult, error), tail bool) {
	ctx, cancel := context.WithCancel(h.ctx)
	h.cancelRead = cancel
	self := h.self
	go func() {
		res, err := f(ctx)
		// Whether the read was cancelled (CancelRead or stop) must be known
		// before cancel() below, which cancels ctx in every case: testing
		// ctx.Err() after it would drop every failed read, leaving the
		// machine waiting for a result that never comes.
		cancelled := ctx.Err() != nil
		cancel()
		if cancelled && err != nil {
			return // cancelled: the machine no longer waits for it
		}
		self.Send(readDoneMsg{gen: gen, tail: tail, entries: res.entries, acks: res.acks, next: res.next, err: err})
	}()
}

// readCompacted runs off the actor: a tail read of a readCompacted
// subscription. Below the compacted view's horizon it reads the compacted
// log: the latest record of each key, in offset order (whole entries, or
// single messages out of batches; actors/compacted.go). The records
// between them are superseded: they come back as acks (applied before the
// entries are dispatched) and the read covers the log up to the last
// entry, or to the horizon once the compacted log is read to its end. At
// or beyond the horizon (or never compacted) it is readTail.
func (h *subHandler) readCompacted(ctx context.Context, a ReadTail) (readResult, error) {
	for attempt := 0; ; attempt++ {
		clog, horizon, ok, err := h.opts.Compacted.Current(ctx)
		if err != nil {
			return readResult{}, err
		}
		if !ok || a.From >= horizon {
			es, err := h.readTail(ctx, a)
			return readResult{entries: es}, err
		}
		res, err := readCompactedLog(ctx, clog, horizon, a.From, a.MaxRecords, h.opts.ReadMaxBytes)
		if (errors.Is(err, lakestream.ErrNoSuchLog) || errors.Is(err, lakestream.ErrNoSuchStream)) && attempt < 3 {
			continue // replaced by a newer compaction meanwhile
		}
		return res, err
	}
}

// readCompactedLog reads the compacted entries of original offsets ≥ from
// (see readCompacted).
func readCompactedLog(ctx context.Context, clog lakestream.Log, horizon, from int64, maxRecords int, maxBytes int64) (readResult, error) {
	first, err := clog.FirstOffset(ctx)
	if err != nil {
		return readResult{}, err
	}
	next, err := clog.NextOffset(ctx)
	if err != nil {
		return readResult{}, err
	}
	pos, err := clog.SearchOffset(ctx, first, next, func(h lakestream.EntryHeader) bool { return h.PublishTimeMs-1 >= from })
	if err != nil {
		return readResult{}, err
	}
	var es []lakestream.Entry
	if pos < next {
		if es, err = clog.ReadEntries(ctx, pos, maxRecords, maxBytes); err != nil {
			return readResult{}, err
		}
	}
	var res readResult
	at := from // the original offsets below it are covered
	for _, ce := range es {
		e, err := DecodeCompactedEntry(ce.Payload)
		if err != nil {
			return readResult{}, fmt.Errorf("compacted log %d at %d: %w", clog.ID(), ce.Offset, err)
		}
		if e.Offset < at || e.Offset >= horizon {
			continue
		}
		if e.Offset > at {
			res.acks = append(res.acks, [2]int64{at, e.Offset})
		}
		res.entries = append(res.entries, lakestream.Entry{
			EntryHeader: lakestream.EntryHeader{Offset: e.Offset, Records: e.Records, WriteTimeMs: ce.WriteTimeMs, Size: int32(len(e.Entry))},
			Payload:     e.Entry,
		})
		at = e.Offset + int64(e.Records)
	}
	if len(es) == 0 || es[len(es)-1].End() >= next {
		// The compacted log is read to its end: the rest up to the
		// horizon was superseded.
		if at < horizon {
			res.acks = append(res.acks, [2]int64{at, horizon})
		}
		res.next = horizon
	}
	return res, nil
}

// readTail runs off the actor: read, or wait at the tail and read.
func (h *subHandler) readTail(ctx context.Context, a ReadTail) ([]lakestream.Entry, error) {
	for {
		es, err := h.opts.Log.ReadEntries(ctx, a.From, a.MaxRecords, h.opts.ReadMaxBytes)
		if errors.Is(err, lakestream.ErrOffsetTrimmed) {
			first, ferr := h.opts.Log.FirstOffset(ctx)
			if ferr != nil {
				return nil, ferr
			}
			a.From = first
			continue
		}
		if err != nil || len(es) > 0 {
			return es, err
		}
		if _, err := h.opts.Log.WaitForEntries(ctx, a.From); err != nil {
			return nil, err
		}
	}
}

// readReplayCompacted runs off the actor: a redelivery of a readCompacted
// subscription reads an offset below the horizon from the compacted log
// (the entry it delivered first: a message out of a batch is its own
// entry there), others from the log.
func (h *subHandler) readReplayCompacted(ctx context.Context, a ReadReplay) (readResult, error) {
	clog, horizon, ok, err := h.opts.Compacted.Current(ctx)
	if err != nil {
		return readResult{}, err
	}
	var below, above []int64
	for _, off := range a.Offsets {
		if ok && off < horizon {
			below = append(below, off)
		} else {
			above = append(above, off)
		}
	}
	out, err := h.readReplay(ctx, ReadReplay{Gen: a.Gen, Offsets: above})
	if err != nil || len(below) == 0 {
		return readResult{entries: out}, err
	}
	first, err := clog.FirstOffset(ctx)
	if err != nil {
		return readResult{}, err
	}
	next, err := clog.NextOffset(ctx)
	if err != nil {
		return readResult{}, err
	}
	var res readResult
	for _, off := range below {
		pos, err := clog.SearchOffset(ctx, first, next, func(h lakestream.EntryHeader) bool { return h.PublishTimeMs-1 >= off })
		if err != nil {
			return readResult{}, err
		}
		var e CompactedEntry
		var ce lakestream.Entry
		if pos < next {
			if ce, err = clog.ReadEntry(ctx, pos); err != nil {
				return readResult{}, err
			}
			if e, err = DecodeCompactedEntry(ce.Payload); err != nil {
				return readResult{}, err
			}
		}
		if pos >= next || e.Offset != off {
			// Superseded by a newer compaction: acknowledged, not
			// redelivered (what the log's entry holds there, or the one
			// message).
			end := off + 1
			if hd, err := h.opts.Log.EntryHeader(ctx, off); err == nil && hd.Offset == off {
				end = hd.End()
			}
			res.acks = append(res.acks, [2]int64{off, end})
			continue
		}
		res.entries = append(res.entries, lakestream.Entry{
			EntryHeader: lakestream.EntryHeader{Offset: e.Offset, Records: e.Records, WriteTimeMs: ce.WriteTimeMs, Size: int32(len(e.Entry))},
			Payload:     e.Entry,
		})
	}
	res.entries = append(res.entries, out...) // below the horizon first: ascending
	return res, nil
}

// readReplay runs off the actor: read the named entries, skipping trimmed ones.
func (h *subHandler) readReplay(ctx context.Context, a ReadReplay) ([]lakestream.Entry, error) {
	out := make([]lakestream.Entry, 0, len(a.Offsets))
	for _, off := range a.Offsets {
		e, err := h.opts.Log.ReadEntry(ctx, off)
		if errors.Is(err, lakestream.ErrOffsetTrimmed) || errors.Is(err, lakestream.ErrOffsetOutOfRange) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}
