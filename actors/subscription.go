package actors

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
)

// This file is the subscription state machine: pure, deterministic, no
// goroutines and no I/O. Inputs are method calls (a consumer attached, a FLOW,
// an ACK, a read result ...); outputs are Actions the driver (the
// subscription actor, or a test) carries out. Acknowledgement state lives in
// an AckState — the subscription's lakestream.LogCursor in production, a map
// in tests — which the machine reads and updates synchronously (the cursor's
// acknowledgement calls are in-memory; persistence is batched by the cursor).
//
// Positions are log record offsets. An entry (one producer SEND) holds
// Records consecutive offsets starting at its Offset; the machine dispatches
// whole entries and tracks them by their first offset.
//
// An acknowledgement names an entry; without an ack_set it acknowledges
// every record of the entry, as a Pulsar broker deletes the whole position.
// The machine knows the record count of the entries it delivered or has
// queued for redelivery. For any other entry (acked before the machine
// delivered it again: after a restart, or on the node a consumer moved
// to) it asks the driver for the entry's header (ResolveEntries) and
// applies the acknowledgement when the answer comes (OnResolved).
// Acknowledgements are applied in arrival order: while one waits for a
// header, the later ones queue behind it (AckQueueMaxIDs bounds the
// queue). Every Ack is answered by exactly one AckDone, once applied.
//
// Unacknowledged limits (Pulsar's maxUnackedMessagesPerConsumer and
// maxUnackedMessagesPerSubscription): on Shared and Key_Shared
// subscriptions, a consumer holding MaxUnackedPerConsumer unacknowledged
// records is blocked — it is given nothing more, its permits kept — until
// acknowledgements (or redeliveries, or its leaving) bring it to half of
// that; a subscription holding MaxUnackedPerSubscription blocks dispatch to
// every consumer the same way. Acknowledgements are never refused: only
// dispatch waits. Records count per entry at delivery (those of a batch
// already acknowledged excepted) and again when a batch-index ack names the
// entry. Exclusive and Failover subscriptions are not limited, as in
// Pulsar.
//
// Delayed delivery (Pulsar's deliverAfter/deliverAt): on Shared and
// Key_Shared subscriptions an entry whose metadata has a deliver_at_time
// later than now (SubscriptionConfig.Now) is not delivered when read but
// held in a bounded index (delayed.go) until then; the machine asks the
// driver to call Tick at the earliest such time (WakeAt), and Tick queues
// the entries due for redelivery-style replay. Every dispatch checks the
// time again, so no entry goes out before its deliver_at_time. Exclusive
// and Failover subscriptions deliver at once, as Pulsar's do. Nothing of
// the index is persisted: a machine started after a restart or an
// ownership move reads the unacknowledged entries again and holds the
// delayed ones again.

// SubType is a Pulsar subscription type.
type SubType int

// Subscription types (values equal Pulsar's CommandSubscribe.SubType).
const (
	SubExclusive SubType = 0
	SubShared    SubType = 1
	SubFailover  SubType = 2
	SubKeyShared SubType = 3
)

func (t SubType) String() string {
	switch t {
	case SubExclusive:
		return "Exclusive"
	case SubShared:
		return "Shared"
	case SubFailover:
		return "Failover"
	case SubKeyShared:
		return "Key_Shared"
	}
	return fmt.Sprintf("SubType(%d)", int(t))
}

// Errors returned by the subscription machine. The gateway maps them to
// Pulsar ServerError codes.
var (
	// ErrConsumerBusy: an Exclusive subscription already has a consumer, or
	// the requested type differs from the subscription's.
	ErrConsumerBusy = errors.New("actors: subscription busy")
	// ErrUnknownConsumer: a command names a consumer that is not attached.
	ErrUnknownConsumer = errors.New("actors: unknown consumer")
	// ErrUnsupportedSubType: the subscription type is not implemented yet.
	ErrUnsupportedSubType = errors.New("actors: subscription type not supported")
	// ErrSubscriptionClosed: the subscription was closed or unsubscribed.
	ErrSubscriptionClosed = errors.New("actors: subscription closed")
	// ErrSubscriptionBusy: a consumer came while
	// SubscriptionOptions.ConsumersMax were attached; it is refused.
	ErrSubscriptionBusy = errors.New("actors: subscription busy: too many consumers")
	// ErrAckQueueFull: an acknowledgement came while AckQueueMaxIDs ids
	// already waited for entry headers; it is dropped (AckDone) and its
	// messages are redelivered. The gateway answers ServiceNotReady.
	ErrAckQueueFull = errors.New("actors: too many acknowledgements waiting for entry lookups")
)

// AckState is the acknowledgement state the machine reads and updates. A
// lakestream.LogCursor satisfies it. Calls are synchronous and cheap.
type AckState interface {
	MarkDeleteOffset() int64
	IsIndividuallyDeleted(offset int64) bool
	IndividualDelete(offset, records int64) error
}

// Action is an output of the machine. The concrete types are ReadTail,
// ReadReplay, CancelRead, Deliver, ActiveChange, ResolveEntries and AckDone.
type Action interface{ isAction() }

// ReadTail asks the driver to read entries from the log starting at From
// (waiting at the tail if there are none yet), at most MaxRecords records,
// and to report them with OnRead(Gen, ...).
type ReadTail struct {
	Gen        uint64
	From       int64
	MaxRecords int
}

// ReadReplay asks the driver to read the entries starting at Offsets (each
// an entry's first offset, ascending) and report them with OnRead(Gen, ...).
type ReadReplay struct {
	Gen     uint64
	Offsets []int64
}

// CancelRead tells the driver that the read in flight (if any) is stale: its
// result will be ignored, so it may be abandoned.
type CancelRead struct{}

// Deliver sends one entry to a consumer. AckSet is nil unless some records
// of the entry are already acknowledged (then bit i = record i unacked).
type Deliver struct {
	ConsumerID      uint64
	Entry           lakestream.Entry
	RedeliveryCount uint32
	AckSet          []int64
}

// ActiveChange tells a Failover consumer whether it is now the active one.
type ActiveChange struct {
	ConsumerID uint64
	Active     bool
}

// ResolveEntries asks the driver for the headers of the entries that
// contain Offsets (ascending, unique; at most ResolveMaxOffsets) and to
// report them with OnResolved(Gen, ...), or OnResolveFailed(Gen) when the
// log could not be read (the driver then retries with Poke).
type ResolveEntries struct {
	Gen     uint64
	Offsets []int64
}

// AckDone reports that the acknowledgement given Token was applied to the
// acknowledgement state (Err nil), or why it was not (wholly) applied.
type AckDone struct {
	Token uint64
	Err   error
}

// WakeAt asks the driver to call Tick at or after At (Unix ms): an entry
// held for delayed delivery is due then. A later WakeAt supersedes an
// earlier one only when it is earlier; Tick is harmless at any time.
type WakeAt struct {
	At int64
}

func (WakeAt) isAction()         {}
func (ReadTail) isAction()       {}
func (ReadReplay) isAction()     {}
func (CancelRead) isAction()     {}
func (Deliver) isAction()        {}
func (ActiveChange) isAction()   {}
func (ResolveEntries) isAction() {}
func (AckDone) isAction()        {}

// Resolved is the driver's answer for one offset of a ResolveEntries.
type Resolved struct {
	// Offset is the offset asked for.
	Offset int64
	// Header is the entry containing Offset, when Err is nil.
	Header lakestream.EntryHeader
	// Err is nil, lakestream.ErrOffsetTrimmed (the entry is gone: an ack
	// of it covers the named record only) or lakestream.ErrOffsetOutOfRange
	// (no such entry: the ack of it is refused). Other errors are not
	// answers: the driver reports OnResolveFailed and retries.
	Err error
}

// AckKind is individual or cumulative.
type AckKind int

// Ack kinds (values equal Pulsar's CommandAck.AckType).
const (
	AckIndividual AckKind = 0
	AckCumulative AckKind = 1
)

// AckID is one acknowledged message id, in log terms: EntryOffset is the
// entry's first offset (Pulsar entryId; any offset of the entry names the
// entry); AckSet, when non-nil, lists the records of the entry still
// unacknowledged (batch-index ack: bit i = record i unacked). The entry's
// record count always comes from the log, never from the client (its
// batch_size hint is not used).
type AckID struct {
	EntryOffset int64
	AckSet      []int64
}

// SubscriptionConfig configures a Subscription.
type SubscriptionConfig struct {
	Type SubType
	// ReadMaxRecords bounds one read, in records. Default 100.
	ReadMaxRecords int
	// ReplayMaxEntries bounds one replay read, in entries. Default 100.
	ReplayMaxEntries int
	// ReadGenBase: read generations start above it, so that reads issued by
	// a machine this one replaces are recognised as stale. Default 0.
	ReadGenBase uint64
	// PartitionIndex is the partition of the log's topic, -1 for a
	// non-partitioned topic (treated as 0). Failover picks the active
	// consumer with it. Default 0.
	PartitionIndex int32
	// LookAheadMaxEntries bounds the replay list of a Key_Shared
	// subscription, in entries: while this many entries wait (their keys'
	// consumers have no permits or are draining), the tail is not read
	// further. Default 10000.
	LookAheadMaxEntries int
	// AckQueueMaxIDs bounds the acknowledgements waiting for entry headers,
	// in message ids: an Ack that would exceed it is refused with
	// ErrAckQueueFull (its messages are redelivered later, as after a lost
	// ack). Default 10000.
	AckQueueMaxIDs int
	// ResolveMaxOffsets bounds one ResolveEntries, in offsets. Default 1000.
	ResolveMaxOffsets int
	// DelayedMaxEntries bounds the entries held for delayed delivery, in
	// entries (about 40 bytes each). At the bound the entry due last is
	// let go and read again from the log once the index is half empty.
	// Default 100000.
	DelayedMaxEntries int
	// Now is the clock delayed delivery compares deliver_at_time with
	// (Unix ms). Default time.Now.
	Now func() int64
	// MaxUnackedPerConsumer blocks a Shared or Key_Shared consumer holding
	// this many unacknowledged records until it is down to half (see the
	// file comment), in records. 0: no limit. SetUnackedLimits changes it.
	MaxUnackedPerConsumer int64
	// MaxUnackedPerSubscription blocks a Shared or Key_Shared
	// subscription's dispatch while its consumers hold this many
	// unacknowledged records, until half, in records. 0: no limit.
	MaxUnackedPerSubscription int64
	// TxnAckRangesMax bounds what one transaction holds pending on the
	// subscription, in record ranges (AckTxn beyond it: ErrTxnAckLimit).
	// Default 10000.
	TxnAckRangesMax int
	// TxnPendingMax bounds the transactions holding pending
	// acknowledgements on the subscription, in transactions (AckTxn of
	// one more: ErrTxnAckLimit). Default 10000.
	TxnPendingMax int
}

type subConsumer struct {
	id      uint64
	permits int64
	meta    ConsumerMeta
	// sinkFull: the consumer's connection refused an entry (Undelivered)
	// and has not had room since (SinkReady); nothing is dispatched to it.
	sinkFull bool
	// unacked is the records of its pending entries (pendingEntry.unacked
	// summed); blocked: it reached MaxUnackedPerConsumer and has not come
	// down to half since.
	unacked int64
	blocked bool
	// drainingCleared counts the key hashes that left the draining state
	// while this consumer held them (Key_Shared; PIP-379's
	// drainingHashesClearedTotal): see hashHold.
	drainingCleared int64
}

// canTake reports whether entries may be dispatched to c now: it has
// permits, its connection has room, and it is not blocked on unacked
// messages.
func (c *subConsumer) canTake() bool { return c.permits > 0 && !c.sinkFull && !c.blocked }

// ConsumerMeta is what SUBSCRIBE says about a consumer that Failover
// ordering uses: consumers sort by (PriorityLevel, Name), a lower level
// first (Pulsar's priority_level: 0 is the highest priority).
type ConsumerMeta struct {
	Name          string
	PriorityLevel int32
}

// waitingAck is an acknowledgement waiting for entry headers.
type waitingAck struct {
	token uint64
	kind  AckKind
	ids   []AckID
	// inTxn: an acknowledgement in transaction txn (AckTxn).
	txn   TxnID
	inTxn bool
}

type pendingEntry struct {
	consumer uint64
	records  int32
	hash     int32 // Key_Shared key hash; 0 for other types
	// unacked is the entry's records counted against its consumer and the
	// subscription (its unacknowledged records when delivered, or when a
	// batch-index ack named it last).
	unacked int32
}

// hashHold counts the pending entries of one key hash; in Key_Shared they
// are all held by one consumer at a time. A hold whose consumer is no
// longer the hash's owner (another consumer joined or the ranges moved) is
// draining: the owner gets nothing of the key until the holder has
// acknowledged it all (see dispatch). blockedAttempts counts the
// dispatches it held back meanwhile (PIP-379's blockedAttempts).
type hashHold struct {
	consumer        uint64
	entries         int
	blockedAttempts int64
}

// Subscription is the state of one subscription on one log.
//
// Invariants: an entry offset is in at most one of pending, replay and
// delayed; pending entries were delivered to a consumer that is still
// attached; every unacknowledged entry below readPos is in one of them,
// above the delay index's eviction point, or wholly settled with records
// pending in a transaction that remembers it (pendingTxn.hidden, or at or
// above its rewindFrom); readPos only moves forward except on Rewind, a
// delay-index rescan and the abort of a transaction that overflowed.
type Subscription struct {
	cfg  SubscriptionConfig
	acks AckState

	consumers []*subConsumer // attach order; [0] is the active one for Exclusive
	rr        int            // round-robin cursor for Shared
	// active is the Failover consumer entries go to (see electActive);
	// valid when hasActive.
	active    uint64
	hasActive bool

	readPos     int64  // next offset the tail read starts at
	gen         uint64 // the last generation given to a read or a lookup
	readGen     uint64 // generation of the read in flight; bumped to invalidate
	reading     bool
	readingTail bool // the read in flight is a ReadTail
	// replaying is the offsets of the replay read in flight.
	replaying []int64

	pending     map[int64]pendingEntry // delivered, not fully acknowledged
	replay      []int64                // entry offsets to redeliver, ascending, unique
	records     map[int64]int32        // record counts of entries in replay
	redelivered map[int64]uint32       // redelivery counts of entries in pending or replay, or hidden by a transaction
	closed      bool

	// Acknowledgements waiting for entry headers, in arrival order, and
	// the lookups answered so far (by offset asked; emptied with the queue).
	acksWaiting    []waitingAck
	acksWaitingIDs int
	headers        map[int64]Resolved
	resolving      bool   // a ResolveEntries is in flight
	resolveGen     uint64 // its generation

	// Key_Shared only (rules on dispatch; hashing and selection in keyshared.go).
	keys         keySelector
	held         map[int32]hashHold // key hash → the consumer holding its pending entries
	replayHash   map[int64]int32    // key hash of each entry in replay
	replayByHash map[int32][]int64  // entries in replay per key hash, ascending

	// Delayed delivery (Shared and Key_Shared): entries read before their
	// deliver_at_time, and the Tick asked for (0: none).
	delayed delayIndex
	wakeAt  int64

	// Unacknowledged limits (Shared and Key_Shared): the records counted
	// in pending (pendingEntry.unacked summed), whether dispatch is blocked
	// by MaxUnackedPerSubscription, and whether a consumer or the
	// subscription was unblocked since dispatch last ran.
	unacked   int64
	blocked   bool
	unblocked bool

	// Transactional acknowledgements (subscription_txn.go): what each
	// transaction holds pending, and all their ranges as spans.
	txns    map[TxnID]*pendingTxn
	txnHeld []txnSpan
}

// NewSubscription returns a machine whose tail read starts at readFrom
// (normally the cursor's mark-delete offset + 1).
func NewSubscription(cfg SubscriptionConfig, acks AckState, readFrom int64) *Subscription {
	if cfg.ReadMaxRecords <= 0 {
		cfg.ReadMaxRecords = 100
	}
	if cfg.ReplayMaxEntries <= 0 {
		cfg.ReplayMaxEntries = 100
	}
	if cfg.LookAheadMaxEntries <= 0 {
		cfg.LookAheadMaxEntries = 10000
	}
	if cfg.AckQueueMaxIDs <= 0 {
		cfg.AckQueueMaxIDs = 10000
	}
	if cfg.ResolveMaxOffsets <= 0 {
		cfg.ResolveMaxOffsets = 1000
	}
	if cfg.DelayedMaxEntries <= 0 {
		cfg.DelayedMaxEntries = 100000
	}
	if cfg.TxnAckRangesMax <= 0 {
		cfg.TxnAckRangesMax = 10000
	}
	if cfg.TxnPendingMax <= 0 {
		cfg.TxnPendingMax = 10000
	}
	if cfg.Now == nil {
		cfg.Now = func() int64 { return time.Now().UnixMilli() }
	}
	return &Subscription{
		cfg:          cfg,
		acks:         acks,
		readPos:      readFrom,
		gen:          cfg.ReadGenBase,
		readGen:      cfg.ReadGenBase,
		headers:      map[int64]Resolved{},
		pending:      map[int64]pendingEntry{},
		records:      map[int64]int32{},
		redelivered:  map[int64]uint32{},
		held:         map[int32]hashHold{},
		replayHash:   map[int64]int32{},
		replayByHash: map[int32][]int64{},
		delayed:      newDelayIndex(cfg.DelayedMaxEntries),
		txns:         map[TxnID]*pendingTxn{},
	}
}

// Type is the subscription type.
func (s *Subscription) Type() SubType { return s.cfg.Type }

// Consumers is the number of attached consumers.
func (s *Subscription) Consumers() int { return len(s.consumers) }

// ReadGen is the latest generation issued to a read or an entry lookup: a
// machine replacing this one starts above it (ReadGenBase).
func (s *Subscription) ReadGen() uint64 { return s.gen }

// nextGen returns a new generation for a read or a lookup.
func (s *Subscription) nextGen() uint64 {
	s.gen++
	return s.gen
}

// AcksWaiting is the number of acknowledgements waiting for entry headers.
func (s *Subscription) AcksWaiting() int { return len(s.acksWaiting) }

// ReadPosition is the offset the next tail read starts at.
func (s *Subscription) ReadPosition() int64 { return s.readPos }

// PendingEntries is the number of delivered entries not yet fully acknowledged.
func (s *Subscription) PendingEntries() int { return len(s.pending) }

// DelayedEntries is the number of entries held for delayed delivery.
func (s *Subscription) DelayedEntries() int { return s.delayed.len() }

// delays reports whether the subscription type honours deliver_at_time.
func (s *Subscription) delays() bool {
	return s.cfg.Type == SubShared || s.cfg.Type == SubKeyShared
}

// Tick releases the entries held for delayed delivery that are due now
// (they are dispatched like redeliveries), and — when the index had to let
// entries go and has room again — restarts the tail read at the first of
// them. The driver calls it as WakeAt asked; calling it at other times is
// harmless.
func (s *Subscription) Tick() []Action {
	if s.closed {
		return nil
	}
	s.wakeAt = 0
	for _, e := range s.delayed.popDue(s.cfg.Now()) {
		if s.fullySettled(e.offset, e.records) {
			s.forget(e.offset, e.records, e.hash, true)
		} else {
			s.addReplay(e.offset, e.records, e.hash)
		}
	}
	var out []Action
	if from, ok := s.delayed.takeRescan(); ok && from < s.readPos {
		s.readPos = from
		if s.reading && s.readingTail {
			s.reading = false
			s.readGen = s.nextGen()
			out = append(out, CancelRead{})
		}
	}
	out = append(out, s.interruptTail()...)
	return append(out, s.dispatch(nil)...)
}

// Expire acknowledges every record below offset before (Pulsar's message
// expiry: a TTL, or a backlog quota evicting the oldest messages): the
// entries wholly below it are forgotten wherever they wait (delivered,
// queued for redelivery, held for delayed delivery) and the tail read
// starts at before at the earliest. A no-op when everything below before
// is acknowledged already.
func (s *Subscription) Expire(before int64) ([]Action, error) {
	if s.closed {
		return nil, ErrSubscriptionClosed
	}
	md := s.acks.MarkDeleteOffset()
	if before <= md+1 {
		return nil, nil
	}
	if err := s.acks.IndividualDelete(md+1, before-(md+1)); err != nil {
		return nil, err
	}
	for off, p := range s.pending {
		if off+int64(p.records) <= before {
			s.unpend(off)
			delete(s.redelivered, off)
		}
	}
	for _, off := range slices.Clone(s.replay) {
		if off+int64(s.records[off]) <= before {
			s.removeReplay(off)
			delete(s.redelivered, off)
		}
	}
	s.delayed.removeBelow(before)
	s.readPos = max(s.readPos, before)
	return append(s.afterAcks(), s.dispatch(nil)...), nil
}

// scheduleWake asks for a Tick at the earliest delivery time held, unless
// one at or before it is asked for already.
func (s *Subscription) scheduleWake() []Action {
	at, ok := s.delayed.next()
	if !ok || (s.wakeAt != 0 && s.wakeAt <= at) {
		return nil
	}
	s.wakeAt = at
	return []Action{WakeAt{At: at}}
}

// ConsumerCounts is what one consumer of a subscription holds.
type ConsumerCounts struct {
	// Permits is the number of messages the consumer asked for (FLOW) and
	// was not sent yet (≥ 0: an entry larger than the permits left takes
	// them all).
	Permits int64
	// UnackedRecords is the number of records delivered to the consumer
	// and not acknowledged yet (Pulsar's per-consumer unackedMessages).
	UnackedRecords int64
	// Blocked: the consumer holds MaxUnackedPerConsumer unacknowledged
	// records (Pulsar's blockedConsumerOnUnackedMsgs).
	Blocked bool
	// KeyShared: the consumer's Key_Shared counts; nil for other types.
	KeyShared *KeySharedCounts
}

// KeySharedCounts is what a Key_Shared consumer holds (PIP-379).
// KeyHashRanges are the hashes it owns now (inclusive, ascending, adjacent
// ranges merged). Draining are the key hashes it still holds
// unacknowledged entries of although another consumer owns them now,
// ascending by hash, at most DrainingHashesListMax (DrainingCount counts
// them all, DrainingUnacked sums all their records); DrainingCleared
// counts the hashes that stopped draining since the consumer attached.
type KeySharedCounts struct {
	KeyHashRanges   []HashRange
	Draining        []DrainingHash
	DrainingCount   int
	DrainingUnacked int64
	DrainingCleared int64
}

// KeySharedMode is "AUTO_SPLIT" or "STICKY" for a Key_Shared subscription
// with consumers (the first consumer fixes it), else "".
func (s *Subscription) KeySharedMode() string {
	switch {
	case s.cfg.Type != SubKeyShared || s.keys.members == 0:
		return ""
	case s.keys.sticky:
		return "STICKY"
	}
	return "AUTO_SPLIT"
}

// DrainingHash is one draining key hash of a Key_Shared consumer (Pulsar's
// DrainingHash): its unacknowledged records and the dispatches of the
// key's entries to its new owner that it held back.
type DrainingHash struct {
	Hash            int32
	UnackedRecords  int64
	BlockedAttempts int64
}

// DrainingHashesListMax bounds ConsumerCounts.Draining: a stats answer
// lists at most this many draining hashes per consumer (the counts cover
// them all).
const DrainingHashesListMax = 1000

// ConsumerCounts returns the counts of every attached consumer, by id.
// Its cost is one pass over the pending entries (and, for Key_Shared, over
// the key holds and the hash ring).
func (s *Subscription) ConsumerCounts() map[uint64]ConsumerCounts {
	out := make(map[uint64]ConsumerCounts, len(s.consumers))
	for _, c := range s.consumers {
		cc := ConsumerCounts{Permits: max(c.permits, 0), Blocked: c.blocked}
		if s.cfg.Type == SubKeyShared {
			cc.KeyShared = &KeySharedCounts{DrainingCleared: c.drainingCleared}
		}
		out[c.id] = cc
	}
	var byHash map[int32]int64 // Key_Shared: unacknowledged records per held hash
	if s.cfg.Type == SubKeyShared {
		byHash = make(map[int32]int64, len(s.held))
	}
	for off, p := range s.pending {
		cc, ok := out[p.consumer]
		if !ok {
			continue
		}
		_, unacked := s.ackSetOf(lakestream.EntryHeader{Offset: off, Records: p.records})
		cc.UnackedRecords += int64(unacked)
		out[p.consumer] = cc
		if byHash != nil {
			byHash[p.hash] += int64(unacked)
		}
	}
	if byHash != nil {
		s.keyCountsInto(out, byHash)
	}
	return out
}

// keyCountsInto adds the Key_Shared counts (hash ranges, draining hashes)
// to out; byHash is the unacknowledged records of each held hash.
func (s *Subscription) keyCountsInto(out map[uint64]ConsumerCounts, byHash map[int32]int64) {
	for id, rs := range s.keys.rangesByConsumer() {
		if cc, ok := out[id]; ok {
			cc.KeyShared.KeyHashRanges = rs
		}
	}
	hashes := make([]int32, 0, len(s.held))
	for h := range s.held {
		hashes = append(hashes, h)
	}
	slices.Sort(hashes)
	for _, h := range hashes {
		hold := s.held[h]
		if owner, ok := s.keys.owner(h); ok && owner == hold.consumer {
			continue
		}
		cc, ok := out[hold.consumer]
		if !ok {
			continue
		}
		ks := cc.KeyShared
		ks.DrainingCount++
		ks.DrainingUnacked += byHash[h]
		if len(ks.Draining) < DrainingHashesListMax {
			ks.Draining = append(ks.Draining, DrainingHash{Hash: h, UnackedRecords: byHash[h], BlockedAttempts: hold.blockedAttempts})
		}
	}
}

// AddConsumer attaches a consumer. Exclusive allows one; Shared, Failover
// and Key_Shared any number (Key_Shared consumers added this way use
// AUTO_SPLIT; see AddKeySharedConsumer).
func (s *Subscription) AddConsumer(id uint64, t SubType) ([]Action, error) {
	return s.addConsumer(id, t, KeySharedPolicy{}, ConsumerMeta{})
}

// AddConsumerWithMeta is AddConsumer with the consumer's name and priority
// level, which order Failover consumers (see electActive).
func (s *Subscription) AddConsumerWithMeta(id uint64, t SubType, m ConsumerMeta) ([]Action, error) {
	return s.addConsumer(id, t, KeySharedPolicy{}, m)
}

// AddKeySharedConsumer attaches a Key_Shared consumer with its hash-range
// policy (AUTO_SPLIT consumers get their hashes from m.Name).
// ErrConsumerAssign when its sticky ranges overlap another consumer's or
// its mode differs from the other consumers'.
func (s *Subscription) AddKeySharedConsumer(id uint64, p KeySharedPolicy, m ConsumerMeta) ([]Action, error) {
	return s.addConsumer(id, SubKeyShared, p, m)
}

func (s *Subscription) addConsumer(id uint64, t SubType, p KeySharedPolicy, m ConsumerMeta) ([]Action, error) {
	if s.closed {
		return nil, ErrSubscriptionClosed
	}
	if t != s.cfg.Type {
		return nil, fmt.Errorf("%w: subscription is %s, consumer asked for %s", ErrConsumerBusy, s.cfg.Type, t)
	}
	if s.find(id) >= 0 {
		return nil, fmt.Errorf("%w: consumer %d already attached", ErrConsumerBusy, id)
	}
	if t == SubExclusive && len(s.consumers) > 0 {
		return nil, fmt.Errorf("%w: exclusive subscription has a consumer", ErrConsumerBusy)
	}
	if t == SubKeyShared {
		if err := s.keys.add(id, m.Name, p); err != nil {
			return nil, err
		}
	}
	s.consumers = append(s.consumers, &subConsumer{id: id, meta: m})
	if t != SubFailover {
		return nil, nil
	}
	if out, changed := s.electActive(); changed {
		return out, nil
	}
	// No change: only the newcomer learns who it is.
	return []Action{ActiveChange{ConsumerID: id, Active: false}}, nil
}

// RemoveConsumer detaches a consumer; the entries it had not acknowledged
// are redelivered to the remaining (or next) consumers.
func (s *Subscription) RemoveConsumer(id uint64) []Action {
	i := s.find(id)
	if i < 0 {
		return nil
	}
	s.consumers = slices.Delete(s.consumers, i, i+1)
	s.keys.remove(id)
	s.requeue(func(p pendingEntry, _ int64) bool { return p.consumer == id }, false)
	if s.cfg.Type == SubFailover {
		if out, changed := s.electActive(); changed {
			return out
		}
	}
	out := s.interruptTail()
	return append(out, s.dispatch(nil)...)
}

// electActive picks the active Failover consumer as Pulsar's
// PersistentDispatcherSingleActiveConsumer does: consumers sorted by
// (priority level, name) — attach order among equals —, only those of the
// highest priority (lowest level) count, and the active one for partition i
// is sorted[i % count] (i = 0 for a non-partitioned topic). When it
// changes, every consumer is told (ActiveConsumerChange) and the entries
// the previous active consumer had not acknowledged are redelivered to the
// new one.
func (s *Subscription) electActive() (out []Action, changed bool) {
	if len(s.consumers) == 0 {
		changed = s.hasActive
		s.hasActive = false
		return nil, changed
	}
	sorted := slices.Clone(s.consumers)
	slices.SortStableFunc(sorted, func(a, b *subConsumer) int {
		if a.meta.PriorityLevel != b.meta.PriorityLevel {
			return cmp.Compare(a.meta.PriorityLevel, b.meta.PriorityLevel)
		}
		return cmp.Compare(a.meta.Name, b.meta.Name)
	})
	n := len(sorted)
	for k, c := range sorted {
		if c.meta.PriorityLevel != sorted[0].meta.PriorityLevel {
			n = k
			break
		}
	}
	next := sorted[int(max(s.cfg.PartitionIndex, 0))%n].id
	if s.hasActive && s.active == next {
		return nil, false
	}
	if s.hasActive {
		old := s.active
		s.requeue(func(p pendingEntry, _ int64) bool { return p.consumer == old }, false)
	}
	s.active, s.hasActive = next, true
	for _, c := range s.consumers {
		out = append(out, ActiveChange{ConsumerID: c.id, Active: c.id == next})
	}
	out = append(out, s.interruptTail()...)
	return append(out, s.dispatch(nil)...), true
}

// Flow adds permits (messages) to a consumer.
func (s *Subscription) Flow(id uint64, permits uint32) ([]Action, error) {
	i := s.find(id)
	if i < 0 {
		return nil, fmt.Errorf("%w: %d", ErrUnknownConsumer, id)
	}
	s.consumers[i].permits += int64(permits)
	if s.cfg.Type == SubKeyShared {
		// Entries waiting for this consumer may go now, ahead of a tail
		// read waiting at the end of the log.
		return append(s.interruptTail(), s.dispatch(nil)...), nil
	}
	return s.dispatch(nil), nil
}

// Undelivered reports that consumer id's connection could not take e, an
// entry the machine had just dispatched to it (its outbound queue was
// full): e goes to another consumer that may take it now, or waits for
// redelivery, with its redelivery count unchanged (nobody got it); the
// consumer gets its permits back and nothing more until SinkReady(id).
// Entries dispatched to it after e and not handed over yet must be
// reported the same way (the driver checks SinkFull), so that nothing it
// is sent later overtakes them.
func (s *Subscription) Undelivered(id uint64, e lakestream.Entry) []Action {
	if p, ok := s.pending[e.Offset]; !ok || p.consumer != id {
		return nil // acknowledged or requeued meanwhile
	}
	s.unpend(e.Offset)
	if i := s.find(id); i >= 0 {
		s.consumers[i].permits += int64(e.Records)
		s.consumers[i].sinkFull = true
	}
	out := s.dispatch([]lakestream.Entry{e})
	if s.reading && s.readingTail && !s.anyPermits() {
		// What the tail read brings nobody could take: read it when
		// someone can (SinkReady, Flow, a new consumer).
		s.reading = false
		s.readGen = s.nextGen()
		out = append(out, CancelRead{})
	}
	return out
}

// SinkFull reports whether consumer id's connection refused an entry and
// has not had room since.
func (s *Subscription) SinkFull(id uint64) bool {
	i := s.find(id)
	return i >= 0 && s.consumers[i].sinkFull
}

// SinkReady reports that consumer id's connection has room again after
// Undelivered: dispatch to it resumes, entries waiting for redelivery
// first.
func (s *Subscription) SinkReady(id uint64) []Action {
	i := s.find(id)
	if i < 0 || !s.consumers[i].sinkFull {
		return nil
	}
	s.consumers[i].sinkFull = false
	return append(s.interruptTail(), s.dispatch(nil)...)
}

// Ack applies an acknowledgement from consumer id; token names it in the
// AckDone that answers it. When an id names an entry whose record count
// the machine does not know, the acknowledgement (and every later one)
// waits for ResolveEntries; AckDone then comes with OnResolved's actions.
// Acknowledgements of a consumer that left meanwhile are still applied:
// they acknowledge the subscription's messages, not the consumer's.
func (s *Subscription) Ack(token, id uint64, kind AckKind, ids []AckID) []Action {
	return s.ack(waitingAck{token: token, kind: kind, ids: ids}, id)
}

// ack applies w from consumer id, or queues it behind the lookups it or
// the acknowledgements before it need.
func (s *Subscription) ack(w waitingAck, id uint64) []Action {
	token, ids := w.token, w.ids
	switch {
	case s.closed:
		return []Action{AckDone{Token: token, Err: ErrSubscriptionClosed}}
	case s.find(id) < 0:
		return []Action{AckDone{Token: token, Err: fmt.Errorf("%w: %d", ErrUnknownConsumer, id)}}
	}
	if len(s.acksWaiting) == 0 && s.knowsAll(w) {
		out := []Action{AckDone{Token: token, Err: s.applyAck(w)}}
		return append(out, s.afterAcks()...)
	}
	if s.acksWaitingIDs+len(ids) > s.cfg.AckQueueMaxIDs {
		return []Action{AckDone{Token: token, Err: fmt.Errorf("%w (%d ids waiting)", ErrAckQueueFull, s.acksWaitingIDs)}}
	}
	s.acksWaiting = append(s.acksWaiting, w)
	s.acksWaitingIDs += len(ids)
	return s.resolveNext()
}

// OnResolved delivers the answers of the lookup of generation gen (answers
// of a stale generation are ignored) and applies every waiting
// acknowledgement they complete, in arrival order.
func (s *Subscription) OnResolved(gen uint64, rs []Resolved) []Action {
	if gen != s.resolveGen || !s.resolving {
		return nil
	}
	s.resolving = false
	for _, r := range rs {
		s.headers[r.Offset] = r
	}
	out := s.applyKnownAcks()
	out = append(out, s.resolveNext()...)
	if len(out) > 0 {
		out = append(out, s.afterAcks()...)
	}
	return out
}

// applyKnownAcks applies the waiting acknowledgements at the head of the
// queue whose entries are all known, in arrival order, and drops the
// lookup answers no waiting acknowledgement names any more.
func (s *Subscription) applyKnownAcks() []Action {
	var out []Action
	for len(s.acksWaiting) > 0 && s.knowsAll(s.acksWaiting[0]) {
		w := s.acksWaiting[0]
		s.acksWaiting[0] = waitingAck{}
		s.acksWaiting = s.acksWaiting[1:]
		s.acksWaitingIDs -= len(w.ids)
		out = append(out, AckDone{Token: w.token, Err: s.applyAck(w)})
	}
	if len(s.acksWaiting) == 0 {
		s.acksWaiting = nil
		clear(s.headers)
	} else {
		// Keep only the answers the waiting acks name: bounded by
		// AckQueueMaxIDs however long the queue stays non-empty.
		named := map[int64]bool{}
		for _, w := range s.acksWaiting {
			for _, a := range w.ids {
				named[a.EntryOffset] = true
			}
		}
		maps.DeleteFunc(s.headers, func(off int64, _ Resolved) bool { return !named[off] })
	}
	return out
}

// OnResolveFailed reports that the lookup of generation gen failed; the
// machine asks again on the next Poke (or Ack).
func (s *Subscription) OnResolveFailed(gen uint64) {
	if gen == s.resolveGen {
		s.resolving = false
	}
}

// ResolveNow returns a lookup of every offset the waiting acknowledgements
// still need (ok false when none wait), superseding one in flight. The
// driver uses it to apply them synchronously before a consumer leaves or
// the subscription closes.
func (s *Subscription) ResolveNow() (r ResolveEntries, ok bool) {
	if len(s.acksWaiting) == 0 {
		return ResolveEntries{}, false
	}
	s.resolving = false
	offs := s.unknownOffsets(s.cfg.AckQueueMaxIDs)
	s.resolveGen = s.nextGen()
	s.resolving = true
	return ResolveEntries{Gen: s.resolveGen, Offsets: offs}, true
}

// resolveNext issues the lookup the first waiting acknowledgements need,
// unless one is in flight.
func (s *Subscription) resolveNext() []Action {
	if s.resolving || len(s.acksWaiting) == 0 {
		return nil
	}
	offs := s.unknownOffsets(s.cfg.ResolveMaxOffsets)
	s.resolveGen = s.nextGen()
	s.resolving = true
	return []Action{ResolveEntries{Gen: s.resolveGen, Offsets: offs}}
}

// unknownOffsets lists (ascending, unique, at most limit) the offsets
// whose entries the waiting acknowledgements need, the first ones first.
func (s *Subscription) unknownOffsets(limit int) []int64 {
	seen := map[int64]bool{}
	var offs []int64
	for _, w := range s.acksWaiting {
		for _, a := range w.ids {
			if len(offs) == limit {
				break
			}
			if _, ok := s.entryOf(a, w.kind); !ok && !seen[a.EntryOffset] {
				seen[a.EntryOffset] = true
				offs = append(offs, a.EntryOffset)
			}
		}
	}
	slices.Sort(offs)
	return offs
}

// afterAcks is what follows applied acknowledgements: in Key_Shared an
// ack may end a key's drain, so its waiting entries may go now; an ack
// that unblocked a consumer or the subscription (unacknowledged limits)
// lets dispatch go on.
func (s *Subscription) afterAcks() []Action {
	if s.cfg.Type != SubKeyShared && !s.unblocked {
		return nil
	}
	s.unblocked = false
	return append(s.interruptTail(), s.dispatch(nil)...)
}

// knowsAll reports whether every entry w names is known.
func (s *Subscription) knowsAll(w waitingAck) bool {
	for _, a := range w.ids {
		if _, ok := s.entryOf(a, w.kind); !ok {
			return false
		}
	}
	return true
}

// ackedEntry is what an acknowledgement needs of the entry it names.
type ackedEntry struct {
	off     int64 // first offset
	records int64
	// invalid: the log has no such entry (the ack of it is refused).
	invalid error
}

func (e ackedEntry) end() int64 { return e.off + e.records }

// entryOf returns the entry an id names, if the machine knows it: one it
// delivered or queued for redelivery, one a lookup answered, or one a
// transaction took out of dispatch. A
// cumulative ack without ack_set needs only the entry's end, known when
// the next entry starts right after the id (the clients' "entryId - 1").
func (s *Subscription) entryOf(a AckID, kind AckKind) (ackedEntry, bool) {
	off := a.EntryOffset
	if p, ok := s.pending[off]; ok {
		return ackedEntry{off: off, records: int64(p.records)}, true
	}
	if n, ok := s.records[off]; ok {
		return ackedEntry{off: off, records: int64(n)}, true
	}
	if r, ok := s.headers[off]; ok {
		switch {
		case r.Err == nil:
			return ackedEntry{off: r.Header.Offset, records: int64(r.Header.Records)}, true
		case errors.Is(r.Err, lakestream.ErrOffsetTrimmed):
			// Gone from the log: never delivered again either way.
			return ackedEntry{off: off, records: 1}, true
		default:
			return ackedEntry{off: off, invalid: fmt.Errorf("%w: acknowledged offset %d: %w", lakestream.ErrInvalidArgument, off, r.Err)}, true
		}
	}
	if h, ok := s.hiddenEntry(off); ok {
		return ackedEntry{off: off, records: int64(h.records)}, true
	}
	if kind == AckCumulative && a.AckSet == nil {
		next := off + 1
		if _, ok := s.pending[next]; ok {
			return ackedEntry{off: off, records: 1}, true
		}
		if _, ok := s.records[next]; ok {
			return ackedEntry{off: off, records: 1}, true
		}
	}
	return ackedEntry{}, false
}

// applyAck applies an acknowledgement whose entries are all known.
func (s *Subscription) applyAck(w waitingAck) error {
	if w.inTxn {
		return s.applyTxnAck(w)
	}
	var errs []error
	for _, a := range w.ids {
		e, _ := s.entryOf(a, w.kind)
		if e.invalid != nil {
			errs = append(errs, e.invalid)
			continue
		}
		switch {
		case w.kind == AckCumulative:
			md := s.acks.MarkDeleteOffset()
			upTo := e.end() // exclusive
			if a.AckSet != nil {
				upTo = e.off
			}
			if upTo > md+1 {
				errs = append(errs, s.acks.IndividualDelete(md+1, upTo-(md+1)))
			}
			if a.AckSet != nil {
				errs = append(errs, s.ackBits(e.off, e.records, a.AckSet))
			}
			// Drop every pending entry now wholly acknowledged.
			for off, p := range s.pending {
				if off < upTo || off == e.off {
					s.forgetIfAcked(off, p.records)
				}
			}
			if a.AckSet != nil {
				s.recount(e.off)
			}
		case a.AckSet != nil:
			errs = append(errs, s.ackBits(e.off, e.records, a.AckSet))
			s.forgetIfAcked(e.off, int32(e.records))
			s.recount(e.off)
		default:
			errs = append(errs, s.acks.IndividualDelete(e.off, e.records))
			s.forgetIfAcked(e.off, int32(e.records))
		}
	}
	return errors.Join(errs...)
}

// Redeliver puts entries delivered to consumer id back for redelivery with
// an incremented redelivery count: those named by entryOffsets, or all of
// the consumer's unacknowledged entries when entryOffsets is nil.
func (s *Subscription) Redeliver(id uint64, entryOffsets []int64) ([]Action, error) {
	if s.find(id) < 0 {
		return nil, fmt.Errorf("%w: %d", ErrUnknownConsumer, id)
	}
	if entryOffsets == nil {
		s.requeue(func(p pendingEntry, _ int64) bool { return p.consumer == id }, true)
	} else {
		set := map[int64]bool{}
		for _, o := range entryOffsets {
			set[o] = true
		}
		s.requeue(func(p pendingEntry, off int64) bool { return p.consumer == id && set[off] }, true)
	}
	return append(s.interruptTail(), s.dispatch(nil)...), nil
}

// OnRead delivers the result of the read of generation gen. Results of a
// stale generation are ignored. entries must be whole entries in ascending
// order; for a tail read the next tail read starts after the last one.
func (s *Subscription) OnRead(gen uint64, tail bool, entries []lakestream.Entry) []Action {
	return s.OnReadTo(gen, tail, entries, 0)
}

// OnReadTo is OnRead for a tail read that covered the log up to next,
// beyond its last entry (a compacted read: what it skipped was superseded),
// so the next tail read starts at next at the earliest.
func (s *Subscription) OnReadTo(gen uint64, tail bool, entries []lakestream.Entry, next int64) []Action {
	if gen != s.readGen || !s.reading {
		return nil
	}
	s.reading = false
	if tail && len(entries) > 0 {
		s.readPos = max(s.readPos, entries[len(entries)-1].End())
	}
	if tail {
		s.readPos = max(s.readPos, next)
	}
	if !tail {
		// Every requested entry leaves the replay list, read or not (an
		// unreadable one is trimmed); undispatched ones are put back by
		// dispatch.
		for _, o := range s.replaying {
			s.removeReplay(o)
		}
		s.replaying = nil
	}
	return s.dispatch(entries)
}

// OnReadFailed reports that the read of generation gen failed; the machine
// will ask again on the next input.
func (s *Subscription) OnReadFailed(gen uint64) {
	if gen == s.readGen {
		s.reading = false
	}
}

// Poke re-evaluates dispatch and the lookups waiting acknowledgements need
// (for example after a failed read or lookup).
func (s *Subscription) Poke() []Action { return append(s.resolveNext(), s.dispatch(nil)...) }

// Rewind drops the replay list and restarts the tail read at from. Every
// pending entry is forgotten: it will be read again. Acknowledgements
// waiting for entry headers stay queued.
func (s *Subscription) Rewind(from int64) []Action {
	s.pending = map[int64]pendingEntry{}
	s.unacked, s.blocked = 0, false
	for _, c := range s.consumers {
		c.unacked, c.blocked = 0, false
	}
	s.replay = nil
	s.records = map[int64]int32{}
	s.held = map[int32]hashHold{}
	s.replayHash = map[int64]int32{}
	s.replayByHash = map[int32][]int64{}
	s.delayed.reset()
	s.readPos = from
	var out []Action
	if s.reading {
		s.reading = false
		s.readGen = s.nextGen()
		out = append(out, CancelRead{})
	}
	return append(out, s.dispatch(nil)...)
}

// Close detaches everything; later inputs fail with ErrSubscriptionClosed.
// Acknowledgements still waiting for entry headers are answered with
// ErrSubscriptionClosed (their messages will be delivered again).
func (s *Subscription) Close() []Action {
	s.closed = true
	s.consumers = nil
	var out []Action
	for _, w := range s.acksWaiting {
		out = append(out, AckDone{Token: w.token, Err: fmt.Errorf("%w: acknowledgement not applied", ErrSubscriptionClosed)})
	}
	s.acksWaiting, s.acksWaitingIDs, s.resolving = nil, 0, false
	clear(s.headers)
	if s.reading {
		s.reading = false
		s.readGen = s.nextGen()
		out = append(out, CancelRead{})
	}
	return out
}

// ---- internals ----

// interruptTail cancels a tail read in flight (it may be waiting at the end
// of the log indefinitely) when entries wait for redelivery, so that the
// replay read goes first. The tail read is simply reissued later from the
// same position.
func (s *Subscription) interruptTail() []Action {
	if !s.reading || !s.readingTail || len(s.replay) == 0 {
		return nil
	}
	if s.cfg.Type == SubKeyShared && len(s.eligibleReplay()) == 0 {
		return nil // nothing waiting could go anyway
	}
	s.reading = false
	s.readGen = s.nextGen()
	return []Action{CancelRead{}}
}

func (s *Subscription) find(id uint64) int {
	return slices.IndexFunc(s.consumers, func(c *subConsumer) bool { return c.id == id })
}

// ackBits acknowledges the records of the entry at off whose bit in set is 0.
func (s *Subscription) ackBits(off, n int64, set []int64) error {
	var errs []error
	for i := int64(0); i < n; {
		if protocol.AckSetIsUnacked(set, int(i)) {
			i++
			continue
		}
		j := i
		for j < n && !protocol.AckSetIsUnacked(set, int(j)) {
			j++
		}
		errs = append(errs, s.acks.IndividualDelete(off+i, j-i))
		i = j
	}
	return errors.Join(errs...)
}

func (s *Subscription) fullyAcked(off int64, n int32) bool {
	if off+int64(n)-1 <= s.acks.MarkDeleteOffset() {
		return true
	}
	for i := int64(0); i < int64(n); i++ {
		if !s.acks.IsIndividuallyDeleted(off + i) {
			return false
		}
	}
	return true
}

// forgetIfAcked drops the pending entry at off (n records) from dispatch
// when all of it is acknowledged or pending in transactions.
func (s *Subscription) forgetIfAcked(off int64, n int32) {
	if !s.fullySettled(off, n) {
		return
	}
	// The key hash of an entry the machine holds (Key_Shared).
	hash, known := int32(0), s.cfg.Type != SubKeyShared
	if p, ok := s.pending[off]; ok {
		hash, known = p.hash, true
	} else if h, ok := s.replayHash[off]; ok {
		hash, known = h, true
	}
	s.unpend(off)
	s.forget(off, n, hash, known)
}

// unpend removes off from pending (and its key's hold).
func (s *Subscription) unpend(off int64) {
	p, ok := s.pending[off]
	if !ok {
		return
	}
	delete(s.pending, off)
	s.countUnacked(p.consumer, -int64(p.unacked))
	if s.cfg.Type != SubKeyShared {
		return
	}
	if h := s.held[p.hash]; h.entries <= 1 {
		delete(s.held, p.hash)
		if owner, ok := s.keys.owner(p.hash); !ok || owner != h.consumer {
			if i := s.find(h.consumer); i >= 0 {
				s.consumers[i].drainingCleared++ // the hash drained
			}
		}
	} else {
		h.entries--
		s.held[p.hash] = h
	}
}

// pend records off as delivered to consumer c.
func (s *Subscription) pend(off int64, p pendingEntry) {
	s.pending[off] = p
	s.countUnacked(p.consumer, int64(p.unacked))
	if s.cfg.Type != SubKeyShared {
		return
	}
	h := s.held[p.hash]
	h.consumer = p.consumer
	h.entries++
	s.held[p.hash] = h
}

// requeue moves pending entries matching f to the replay list.
func (s *Subscription) requeue(f func(pendingEntry, int64) bool, countRedelivery bool) {
	for off, p := range s.pending {
		if !f(p, off) {
			continue
		}
		s.unpend(off)
		if s.fullySettled(off, p.records) {
			s.forget(off, p.records, p.hash, true)
			continue
		}
		if countRedelivery {
			s.redelivered[off]++
		}
		s.addReplay(off, p.records, p.hash)
	}
}

func (s *Subscription) addReplay(off int64, n int32, hash int32) {
	i, found := slices.BinarySearch(s.replay, off)
	if !found {
		s.replay = slices.Insert(s.replay, i, off)
	}
	s.records[off] = n
	if s.cfg.Type == SubKeyShared && !found {
		s.replayHash[off] = hash
		offs := s.replayByHash[hash]
		j, _ := slices.BinarySearch(offs, off)
		s.replayByHash[hash] = slices.Insert(offs, j, off)
	}
}

func (s *Subscription) removeReplay(off int64) {
	if i, found := slices.BinarySearch(s.replay, off); found {
		s.replay = slices.Delete(s.replay, i, i+1)
	}
	delete(s.records, off)
	if h, ok := s.replayHash[off]; ok {
		delete(s.replayHash, off)
		offs := s.replayByHash[h]
		if j, found := slices.BinarySearch(offs, off); found {
			offs = slices.Delete(offs, j, j+1)
		}
		if len(offs) == 0 {
			delete(s.replayByHash, h)
		} else {
			s.replayByHash[h] = offs
		}
	}
}

// pick returns the consumer the next entry goes to, or nil if none has
// permits. Exclusive and Failover deliver to the first consumer only.
func (s *Subscription) pick() *subConsumer {
	if len(s.consumers) == 0 {
		return nil
	}
	if s.cfg.Type == SubFailover {
		if i := s.find(s.active); s.hasActive && i >= 0 && s.consumers[i].canTake() {
			return s.consumers[i]
		}
		return nil
	}
	if s.cfg.Type != SubShared {
		if c := s.consumers[0]; c.canTake() {
			return c
		}
		return nil
	}
	if s.blocked {
		return nil
	}
	for k := range s.consumers {
		c := s.consumers[(s.rr+k)%len(s.consumers)]
		if c.canTake() {
			s.rr = (s.rr + k + 1) % len(s.consumers)
			return c
		}
	}
	return nil
}

// ackSetOf returns the ack_set an entry is delivered with (nil: whole) and
// its records still to deliver: those neither acknowledged nor pending in
// a transaction.
func (s *Subscription) ackSetOf(e lakestream.EntryHeader) (set []int64, unacked int32) {
	if e.Records <= 1 {
		if s.fullySettled(e.Offset, e.Records) {
			return nil, 0
		}
		return nil, e.Records
	}
	partial := false
	set = protocol.AckSetAllUnacked(int(e.Records))
	for i := int32(0); i < e.Records; i++ {
		if s.settled(e.Offset + int64(i)) {
			set[i/64] &^= int64(uint64(1) << (i % 64))
			partial = true
		} else {
			unacked++
		}
	}
	if !partial {
		return nil, unacked
	}
	return set, unacked
}

// dispatch hands entries (just read) to consumers with permits, puts the
// ones nobody can take into the replay list, and issues the next read when
// some consumer has permits and no read is in flight.
//
// Key_Shared: an entry goes to the consumer owning its key hash (see
// keySelector) and only when that keeps the key's order, that is
//   - no earlier entry of the same key waits in the replay list, and
//   - no other consumer still holds unacknowledged entries of the key.
//
// The second rule is how ownership moves when consumers join or leave: the
// new owner gets nothing of a key until the old owner has acknowledged
// everything of it it was given (or left, which hands those entries back
// in order). It is the "draining hashes" rule of Pulsar 4's Key_Shared
// (PIP-379), simpler than the older "recently joined consumers" read-
// position rule and never delivers a key out of order. Entries that cannot
// go wait in the replay list (LookAheadMaxEntries bounds it).
func (s *Subscription) dispatch(entries []lakestream.Entry) []Action {
	out := s.dispatchEntries(entries)
	return append(out, s.scheduleWake()...)
}

func (s *Subscription) dispatchEntries(entries []lakestream.Entry) []Action {
	var out []Action
	keyShared := s.cfg.Type == SubKeyShared
	var now int64
	if s.delays() && len(entries) > 0 {
		now = s.cfg.Now()
	}
	for _, e := range entries {
		if _, dup := s.pending[e.Offset]; dup {
			continue // already out (a replay raced a tail read)
		}
		if _, queued := s.records[e.Offset]; queued || s.delayed.has(e.Offset) {
			continue // read again by a rescan: it waits where it is
		}
		set, unacked := s.ackSetOf(e.EntryHeader)
		if unacked == 0 {
			var hash int32
			if keyShared && s.txnHoldsAny(e.Offset, e.Records) {
				hash = EntryKeyHash(e.Payload)
			}
			s.forget(e.Offset, e.Records, hash, true)
			continue
		}
		if s.delays() {
			if at, ok := protocol.EntryDeliverAt(e.Payload); ok && at > now {
				var hash int32
				if keyShared {
					hash = EntryKeyHash(e.Payload)
				}
				s.delayed.add(delayedEntry{offset: e.Offset, deliverAt: at, records: e.Records, hash: hash})
				continue
			}
		}
		var (
			hash int32
			c    *subConsumer
		)
		if keyShared {
			hash = EntryKeyHash(e.Payload)
			c = s.pickKey(hash, e.Offset)
		} else {
			c = s.pick()
		}
		if c == nil {
			s.addReplay(e.Offset, e.Records, hash)
			continue
		}
		c.permits -= int64(e.Records)
		s.pend(e.Offset, pendingEntry{consumer: c.id, records: e.Records, hash: hash, unacked: unacked})
		out = append(out, Deliver{ConsumerID: c.id, Entry: e, RedeliveryCount: s.redelivered[e.Offset], AckSet: set})
	}
	if s.reading || s.closed || !s.anyPermits() {
		return out
	}
	if keyShared {
		if offs := s.eligibleReplay(); len(offs) > 0 {
			s.readGen = s.nextGen()
			s.reading = true
			s.readingTail = false
			s.replaying = offs
			return append(out, ReadReplay{Gen: s.readGen, Offsets: slices.Clone(offs)})
		}
		if len(s.replay) >= s.cfg.LookAheadMaxEntries {
			return out // wait for acks, permits or consumers
		}
		s.readGen = s.nextGen()
		s.reading = true
		s.readingTail = true
		return append(out, ReadTail{Gen: s.readGen, From: s.readPos, MaxRecords: s.cfg.ReadMaxRecords})
	}
	s.readGen = s.nextGen()
	s.reading = true
	if len(s.replay) > 0 {
		n := min(len(s.replay), s.cfg.ReplayMaxEntries)
		s.readingTail = false
		s.replaying = slices.Clone(s.replay[:n])
		return append(out, ReadReplay{Gen: s.readGen, Offsets: slices.Clone(s.replaying)})
	}
	maxRecords := s.cfg.ReadMaxRecords
	s.readingTail = true
	return append(out, ReadTail{Gen: s.readGen, From: s.readPos, MaxRecords: maxRecords})
}

// pickKey returns the Key_Shared consumer the entry at off with key hash
// hash may go to now, or nil (see dispatch for the rules).
func (s *Subscription) pickKey(hash int32, off int64) *subConsumer {
	if offs := s.replayByHash[hash]; len(offs) > 0 && offs[0] < off {
		return nil // an earlier entry of the key waits
	}
	c := s.keyOwnerReady(hash)
	return c
}

// keyOwnerReady returns the owner of hash if it has permits and no other
// consumer holds pending entries of the key.
func (s *Subscription) keyOwnerReady(hash int32) *subConsumer {
	owner, ok := s.keys.owner(hash)
	if !ok {
		return nil
	}
	if h, held := s.held[hash]; held && h.consumer != owner {
		h.blockedAttempts++
		s.held[hash] = h
		return nil // draining: the previous owner has not acknowledged it all
	}
	i := s.find(owner)
	if i < 0 || !s.consumers[i].canTake() || s.blocked {
		return nil
	}
	return s.consumers[i]
}

// eligibleReplay lists (ascending, at most ReplayMaxEntries) the replay
// entries whose key's owner could take them now.
func (s *Subscription) eligibleReplay() []int64 {
	var out []int64
	ready := map[int32]bool{}
	for _, off := range s.replay {
		h := s.replayHash[off]
		ok, seen := ready[h]
		if !seen {
			ok = s.keyOwnerReady(h) != nil
			ready[h] = ok
		}
		if ok {
			out = append(out, off)
			if len(out) == s.cfg.ReplayMaxEntries {
				break
			}
		}
	}
	return out
}

// anyPermits reports whether a consumer entries may go to has permits
// (and room on its connection):
// only the active one counts in Failover (an inactive one with permits
// would make the machine read entries nobody may take, over and over).
func (s *Subscription) anyPermits() bool {
	switch s.cfg.Type {
	case SubFailover:
		i := s.find(s.active)
		return s.hasActive && i >= 0 && s.consumers[i].canTake()
	case SubExclusive:
		return len(s.consumers) > 0 && s.consumers[0].canTake()
	}
	if s.blocked {
		return false // until acknowledgements bring the subscription to half its limit
	}
	for _, c := range s.consumers {
		if c.canTake() {
			return true
		}
	}
	return false
}

// ---- unacknowledged limits (see the file comment) ----

// limitsUnacked reports whether the subscription type has unacknowledged
// limits (Shared and Key_Shared, as in Pulsar).
func (s *Subscription) limitsUnacked() bool {
	return s.cfg.Type == SubShared || s.cfg.Type == SubKeyShared
}

// countUnacked adds delta records to the unacknowledged counts of consumer
// id (when still attached) and of the subscription, and blocks or
// unblocks them: blocked at the limit, unblocked at half of it.
func (s *Subscription) countUnacked(id uint64, delta int64) {
	if delta == 0 {
		return
	}
	s.unacked += delta
	s.blocked = s.blockedAt(s.blocked, s.unacked, s.cfg.MaxUnackedPerSubscription)
	if i := s.find(id); i >= 0 {
		c := s.consumers[i]
		c.unacked += delta
		c.blocked = s.blockedAt(c.blocked, c.unacked, s.cfg.MaxUnackedPerConsumer)
	}
}

// blockedAt is the blocked state that follows was with unacked records
// against limit (0: none): blocked from limit on, unblocked at half of it
// (noting the unblocking for afterAcks).
func (s *Subscription) blockedAt(was bool, unacked, limit int64) bool {
	switch {
	case limit <= 0 || !s.limitsUnacked():
		s.unblocked = s.unblocked || was
		return false
	case unacked >= limit:
		return true
	case was && unacked <= limit/2:
		s.unblocked = true
		return false
	}
	return was
}

// recount counts the pending entry at off again after a batch-index ack
// acknowledged some of its records.
func (s *Subscription) recount(off int64) {
	p, ok := s.pending[off]
	if !ok {
		return
	}
	_, n := s.ackSetOf(lakestream.EntryHeader{Offset: off, Records: p.records})
	delta := int64(n) - int64(p.unacked)
	p.unacked = n
	s.pending[off] = p
	s.countUnacked(p.consumer, delta)
}

// SetUnackedLimits changes MaxUnackedPerConsumer and
// MaxUnackedPerSubscription (0: no limit); consumers and the subscription
// are blocked or unblocked at once by the new limits, and dispatch goes on
// if it may.
func (s *Subscription) SetUnackedLimits(perConsumer, perSubscription int64) []Action {
	if s.closed {
		return nil
	}
	s.cfg.MaxUnackedPerConsumer, s.cfg.MaxUnackedPerSubscription = perConsumer, perSubscription
	fresh := func(unacked, limit int64) bool { return s.limitsUnacked() && limit > 0 && unacked >= limit }
	s.blocked = fresh(s.unacked, perSubscription)
	for _, c := range s.consumers {
		c.blocked = fresh(c.unacked, perConsumer)
	}
	s.unblocked = false
	return append(s.interruptTail(), s.dispatch(nil)...)
}

// BlockedOnUnacked reports whether the subscription's dispatch is blocked
// by MaxUnackedPerSubscription, and which attached consumers are blocked
// by MaxUnackedPerConsumer (by id; nil when none).
func (s *Subscription) BlockedOnUnacked() (subscription bool, consumers map[uint64]bool) {
	for _, c := range s.consumers {
		if c.blocked {
			if consumers == nil {
				consumers = map[uint64]bool{}
			}
			consumers[c.id] = true
		}
	}
	return s.blocked, consumers
}

// UnackedRecords is the number of records delivered and not acknowledged,
// as the unacknowledged limits count them.
func (s *Subscription) UnackedRecords() int64 { return s.unacked }
