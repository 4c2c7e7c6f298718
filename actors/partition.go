package actors

import (
	"container/list"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/lakegate/lakegate/lakestream"
)

// This file is the partition state machine: the producer side of one
// topic-partition, pure and deterministic like the subscription machine
// (subscription.go). Inputs are method calls — a producer attached or
// detached, a SEND, the outcome of an append or of a persist —; outputs are
// Actions the partition actor (partition_actor.go) carries out: appends to
// the log, receipts and answers to producers, persists of the topic epoch
// and of the deduplication snapshot.
//
// It enforces Pulsar's producer rules for the partition: unique producer
// names, the access modes (Shared, Exclusive, WaitForExclusive,
// ExclusiveWithFencing) and the topic epoch, deduplication by sequence id
// (when on), receipts in SEND order per producer, and termination.
//
// Order: a producer's SENDs are appended in the order they arrive and the
// driver appends in the order the actions are emitted, so entries of one
// producer are stored in SEND order; receipts go out in SEND order too.
//
// Transactional SENDs (SendRequest.Stage) are judged by the same
// deduplication state (docs/dedup.md, "Transactional sends"): one sequence
// per producer name. Before it judges a SEND staged into a set it has not
// learned, the machine asks the driver to read the set's staged entries
// (LoadStaged, StagedLoaded): an earlier owner may have staged into it.
//
// Failures keep that order, as Pulsar's ManagedLedger does (docs/dedup.md,
// "Order and failures"): the appends are links of an append chain
// (AppendEntry.Chain, lakestream.AppendChain), so once one fails none
// issued after it is stored. The machine then issues no append until every
// append in flight has ended, and starts a new chain; a producer whose SEND
// failed has its later SENDs failed (ErrEarlierSendFailed) rather than
// appended, since its client resends them all, in order, on a new
// connection. So the log never holds a producer's SEND after one of its
// SENDs that failed — which a deduplicating owner, loading the state from
// the log, could not tell from a duplicate.

// AccessMode is a Pulsar producer access mode (values equal Pulsar's
// ProducerAccessMode).
type AccessMode int

// Producer access modes.
const (
	AccessShared               AccessMode = 0
	AccessExclusive            AccessMode = 1
	AccessWaitForExclusive     AccessMode = 2
	AccessExclusiveWithFencing AccessMode = 3
)

func (m AccessMode) String() string {
	switch m {
	case AccessShared:
		return "Shared"
	case AccessExclusive:
		return "Exclusive"
	case AccessWaitForExclusive:
		return "WaitForExclusive"
	case AccessExclusiveWithFencing:
		return "ExclusiveWithFencing"
	}
	return fmt.Sprintf("AccessMode(%d)", int(m))
}

// Errors of the partition machine and actor. The gateway maps them to Pulsar
// ServerError codes.
var (
	// ErrProducerBusy: the producer name is in use on the partition, or a
	// Shared producer meets an exclusive one.
	ErrProducerBusy = errors.New("actors: producer busy")
	// ErrProducerFenced: an exclusive producer holds the partition, the
	// producer asked for an old topic epoch, or an ExclusiveWithFencing
	// producer took the partition from this one.
	ErrProducerFenced = errors.New("actors: producer fenced")
	// ErrUnknownProducer: a command names a producer that is not attached.
	ErrUnknownProducer = errors.New("actors: unknown producer")
	// ErrPartitionClosed: the partition is no longer served here (unloaded,
	// or this node lost its ownership); the client must look it up again.
	ErrPartitionClosed = errors.New("actors: partition closed")
	// ErrPartitionBusy: a SEND came while PartitionOptions.AppendsInflightMax
	// appends were in flight; it failed (SendFailed), as an append the
	// engine refused would, and the client resends on a new connection.
	ErrPartitionBusy = errors.New("actors: partition busy: too many appends in flight")
	// ErrEarlierSendFailed: a SEND was not appended because an earlier SEND
	// of its producer failed (it wraps that failure): stored after it, it
	// would break the producer's order. The client resends both, in order,
	// on a new connection (the Pulsar clients do on SEND_ERROR).
	ErrEarlierSendFailed = errors.New("actors: an earlier SEND of the producer failed")
)

// ProducerSpec is what PRODUCER says about a producer.
type ProducerSpec struct {
	// ID names the producer to the machine; unique in the process.
	ID   uint64
	Name string
	Mode AccessMode
	// Epoch is the topic epoch a reconnecting exclusive producer asks for;
	// nil for none.
	Epoch *uint64
	// Dedup: the partition judges this producer's sequence ids even when
	// deduplication is off for the topic, with a Kafka idempotent
	// producer's rules (docs/kafka.md): its first SEND has sequence 0 and
	// each next one follows the highest stored or in flight — a gap is
	// refused with ErrOutOfOrderSequence (the client resends in order); a
	// resend is a duplicate, as Pulsar's. It needs a deduplication state
	// (PartitionConfig.Dedup, or PartitionState.Sequences loaded: the
	// deduplication cursor exists); otherwise AddProducer answers
	// ErrNoDedupState.
	Dedup bool
}

// ErrOutOfOrderSequence: a SEND of a Dedup producer whose sequence does
// not follow the producer's last (Kafka's OUT_OF_ORDER_SEQUENCE_NUMBER).
var ErrOutOfOrderSequence = errors.New("actors: out of order sequence")

// ErrNoDedupState: a producer asks for deduplication (ProducerSpec.Dedup)
// from a partition that keeps no deduplication state; the caller creates
// the state (EnsureDedupCursor) and loads the partition again.
var ErrNoDedupState = errors.New("actors: the partition keeps no deduplication state")

// SendRequest is one SEND: an entry of Records records.
type SendRequest struct {
	// Seq and Highest are the SEND's sequence_id and highest_sequence_id
	// (Highest < Seq means "not given").
	Seq, Highest uint64
	Records      int32
	PublishMs    int64
	// Payload is handed over: neither the sender nor the machine touches it
	// after the append (the driver donates it to the log).
	Payload []byte
	// Stage, when set, makes the SEND transactional: its entry is staged
	// into the staging set Stage (lakestream.WithStage) and enters the log
	// only when the transaction commits; its receipt has no offset
	// (Header.Offset -1). Deduplication judges it like a plain SEND, once
	// the set is learned (docs/dedup.md, "Transactional sends").
	Stage string
}

// PartitionConfig configures a Partition.
type PartitionConfig struct {
	// Dedup turns producer deduplication on (Pulsar's brokerDeduplication)
	// for every producer. Without it, a partition whose state was loaded
	// (PartitionState.Sequences not nil) judges only the producers that ask
	// (ProducerSpec.Dedup).
	Dedup bool
	// DedupSnapshotEntries: appends between deduplication snapshots, at
	// most. Default 1000.
	DedupSnapshotEntries int
	// DedupFailedMax bounds the failed appends remembered per producer
	// name, in sequence ids. Default 10000.
	DedupFailedMax int
	// StagedSetsMax bounds the staging sets a deduplicating partition
	// remembers having learned, in sets (least recently used forgotten
	// first: read again when a SEND names it). Default 10000.
	StagedSetsMax int
	// StagedLoadsMax bounds the reads of staging sets in flight
	// (LoadStaged), in reads; more sets wait for a place. Default 16.
	StagedLoadsMax int
}

// PartitionState is what a partition loads from storage before it serves:
// the persisted topic epoch, the deduplication state and termination.
type PartitionState struct {
	// Epoch is the topic epoch, valid when HasEpoch.
	Epoch    uint64
	HasEpoch bool
	// Sequences is, per producer name, the highest sequence id durable in
	// the log (deduplication; nil when off).
	Sequences map[string]int64
	// DedupEnd is the offset just past the entries Sequences covers.
	DedupEnd int64
	// Terminated: the log is fenced (the topic was terminated).
	Terminated bool
	// Staged are the staging sets open at load whose staged entries'
	// sequences Sequences holds: learned already (docs/dedup.md,
	// "Transactional sends").
	Staged []string
}

// Partition actions.
type (
	// AppendEntry asks the driver to append one entry and report the
	// outcome with AppendDone(Token, ...). Appends must be issued in the
	// order the actions come, each as a link of the append chain numbered
	// Chain (lakestream.AppendChain): the driver starts a new chain when
	// the number changes. Chains never overlap: a new number comes only
	// once every append of the previous chain has been reported done.
	AppendEntry struct {
		Token     uint64
		Chain     uint64
		Records   int32
		PublishMs int64
		Payload   []byte
		// Stage: append staged into this staging set (SendRequest.Stage).
		Stage string
	}
	// SendReceipt answers a SEND: stored at Header (Dup: a duplicate that was
	// not stored; Header is then zero).
	SendReceipt struct {
		Producer     uint64
		Seq, Highest uint64
		Header       lakestream.EntryHeader
		Dup          bool
	}
	// SendFailed answers a SEND that was not stored.
	SendFailed struct {
		Producer uint64
		Seq      uint64
		Err      error
	}
	// ProducerAnswer answers AddProducer: Err, or the producer is attached
	// (Ready false: it waits for exclusive access and gets a
	// ProducerPromoted later). LastSequence is the highest durable sequence
	// id of its name (-1 without deduplication or history).
	ProducerAnswer struct {
		Producer     uint64
		Err          error
		Ready        bool
		Epoch        uint64
		HasEpoch     bool
		LastSequence int64
	}
	// ProducerPromoted tells a waiting producer it now holds exclusive
	// access (Pulsar's second PRODUCER_SUCCESS).
	ProducerPromoted struct {
		Producer     uint64
		Epoch        uint64
		LastSequence int64
	}
	// ProducerFencedOut tells a producer that an ExclusiveWithFencing
	// producer took the partition: an attached one is closed, a waiting one
	// gets ErrProducerFenced as its (late) answer. Either way it is gone.
	ProducerFencedOut struct {
		Producer uint64
		Waiting  bool
	}
	// ProducerClosed answers CloseProducer once every SEND accepted before
	// it is answered.
	ProducerClosed struct {
		Producer uint64
	}
	// PersistEpoch asks the driver to make the topic epoch durable and
	// report with EpochPersisted.
	PersistEpoch struct {
		Epoch uint64
	}
	// PersistDedup asks the driver to make a deduplication snapshot durable:
	// Sequences covers every entry below End. Report with DedupPersisted.
	PersistDedup struct {
		Sequences map[string]int64
		End       int64
	}
	// Drained follows Drain once no append is in flight (and after the
	// receipts of every append): the driver may close the producers.
	Drained struct{}
	// LoadStaged asks the driver to read the staging set Set's staged
	// entries of the log (lakestream.LogStaged) and report, per producer
	// name, their highest sequence id with StagedLoaded. SENDs staged
	// into Set wait until then.
	LoadStaged struct {
		Set string
	}
)

func (AppendEntry) isAction()       {}
func (SendReceipt) isAction()       {}
func (SendFailed) isAction()        {}
func (ProducerAnswer) isAction()    {}
func (ProducerPromoted) isAction()  {}
func (ProducerFencedOut) isAction() {}
func (ProducerClosed) isAction()    {}
func (PersistEpoch) isAction()      {}
func (PersistDedup) isAction()      {}
func (Drained) isAction()           {}
func (LoadStaged) isAction()        {}

// sendState is where one SEND is.
type sendState int

const (
	sendNew       sendState = iota // not judged yet (waits behind a parked SEND)
	sendAppending                  // appended, outcome pending
	sendDone                       // outcome known, receipt not yet sent
)

type pendingSend struct {
	producer uint64 // its producer's id
	name     string // its producer's name
	req      SendRequest
	state    sendState
	token    uint64
	dup      bool
	h        lakestream.EntryHeader
	err      error
	// admitted: counted in the dedup table's in-flight set (finish must be
	// called when its append ends).
	admitted bool
}

type partProducer struct {
	spec  ProducerSpec
	ready bool
	// answered: its ProducerAnswer went out (an attached producer whose
	// epoch is being persisted has not been answered yet).
	answered bool
	closing  bool // CloseProducer: answer ProducerClosed once queue drains
	queue    []*pendingSend
	// failed is the failure of one of its SENDs (nil: none): its later
	// SENDs are not appended (ErrEarlierSendFailed).
	failed error
}

// Partition is the producer-side state of one topic-partition.
//
// Invariants: byName holds the attached (not waiting) producers; exclusive,
// when set, is one of them; waiting holds producers in arrival order, none
// of them in byName; every AppendEntry issued is in inflight until its
// AppendDone.
type Partition struct {
	cfg PartitionConfig

	producers map[uint64]*partProducer // attached and waiting
	byName    map[string]uint64        // attached producers by name
	exclusive uint64                   // the exclusive holder's id, 0 for none
	waiting   []uint64                 // WaitForExclusive producers, in arrival order

	epoch    uint64
	hasEpoch bool
	// durableEpoch is the epoch known durable, valid when hasDurable.
	durableEpoch uint64
	hasDurable   bool
	// epochWait are producers whose answer waits for the epoch to be
	// durable (PersistEpoch in flight).
	epochWait    []uint64
	epochPersist bool // a PersistEpoch is in flight
	epochDirty   bool // the epoch changed after the persist in flight began

	terminated bool
	closed     bool
	// draining: an orderly unload began; SENDs are refused with
	// ErrPartitionClosed (the client resends them to the next owner) and
	// Drained is emitted once no append is in flight.
	draining bool
	drained  bool

	nextToken uint64
	inflight  map[uint64]*pendingSend // by token
	// chain numbers the append chain of the appends issued now
	// (AppendEntry.Chain). chainBroken: an append of it failed, so the
	// engine fails every later one; no append is issued until every one
	// in flight has ended, then the next chain begins.
	chain       uint64
	chainBroken bool

	dedup *dedupTable // nil when off
	// staged are the staging sets the deduplication state has learned
	// (nil when dedup is).
	staged *stagedSets
}

// NewPartition returns the machine of a partition whose persisted state is st.
func NewPartition(cfg PartitionConfig, st PartitionState) *Partition {
	if cfg.DedupSnapshotEntries <= 0 {
		cfg.DedupSnapshotEntries = 1000
	}
	if cfg.DedupFailedMax <= 0 {
		cfg.DedupFailedMax = 10000
	}
	if cfg.StagedSetsMax <= 0 {
		cfg.StagedSetsMax = 10000
	}
	if cfg.StagedLoadsMax <= 0 {
		cfg.StagedLoadsMax = 16
	}
	p := &Partition{
		cfg:          cfg,
		producers:    map[uint64]*partProducer{},
		byName:       map[string]uint64{},
		epoch:        st.Epoch,
		hasEpoch:     st.HasEpoch,
		durableEpoch: st.Epoch,
		hasDurable:   st.HasEpoch,
		terminated:   st.Terminated,
		inflight:     map[uint64]*pendingSend{},
		chain:        1,
	}
	if cfg.Dedup || st.Sequences != nil {
		p.dedup = newDedupTable(st.Sequences, st.DedupEnd, cfg.DedupFailedMax)
		p.staged = newStagedSets(cfg.StagedSetsMax, cfg.StagedLoadsMax)
		for _, set := range st.Staged {
			p.staged.learn(set)
		}
	}
	return p
}

// KeepsDedup reports whether the partition keeps a deduplication state.
func (p *Partition) KeepsDedup() bool { return p.dedup != nil }

// Producers is the number of attached producers (waiting ones excluded).
func (p *Partition) Producers() int { return len(p.byName) }

// Waiting is the number of producers waiting for exclusive access.
func (p *Partition) Waiting() int { return len(p.waiting) }

// Inflight is the number of appends issued and not yet done.
func (p *Partition) Inflight() int { return len(p.inflight) }

// Terminated reports whether the partition's log is known to be fenced.
func (p *Partition) Terminated() bool { return p.terminated }

// Epoch returns the topic epoch (ok false: none yet).
func (p *Partition) Epoch() (epoch uint64, ok bool) { return p.epoch, p.hasEpoch }

// LastSequence is the highest durable sequence id of a producer name (-1
// without deduplication or history).
func (p *Partition) LastSequence(name string) int64 {
	if p.dedup == nil {
		return -1
	}
	if v, ok := p.dedup.persisted[name]; ok {
		return v
	}
	return -1
}

// AddProducer attaches a producer, enforcing the access modes as Pulsar's
// AbstractTopic does:
//
//   - Shared: refused (ErrProducerBusy) while an exclusive producer holds
//     the partition or WaitForExclusive producers wait.
//   - Exclusive: refused (ErrProducerFenced) while any producer is attached
//     or waits.
//   - WaitForExclusive: queued (not ready) while any producer is attached;
//     promoted when the partition has no producer left.
//   - ExclusiveWithFencing: every attached and waiting producer is fenced
//     out (ProducerFencedOut), and the newcomer takes the partition.
//
// Taking exclusive access increments the topic epoch, unless the producer
// asks for an epoch (a reconnecting exclusive producer): then an epoch below
// the current one is fenced and any other becomes the partition's epoch.
// The exclusive holder coming back under its name with the current epoch
// replaces its old self (fenced out), whatever connection that is on.
//
// The answer is a ProducerAnswer action — at once, or once the new topic
// epoch is durable (PersistEpoch, EpochPersisted).
func (p *Partition) AddProducer(spec ProducerSpec) []Action {
	refuse := func(err error) []Action {
		return []Action{ProducerAnswer{Producer: spec.ID, Err: err, LastSequence: -1}}
	}
	switch {
	case p.closed:
		return refuse(ErrPartitionClosed)
	case p.terminated:
		return refuse(fmt.Errorf("%w: the topic was terminated", lakestream.ErrFenced))
	case p.producers[spec.ID] != nil:
		return refuse(fmt.Errorf("%w: producer %d is attached already", ErrProducerBusy, spec.ID))
	case spec.Dedup && p.dedup == nil:
		return refuse(ErrNoDedupState)
	}
	switch spec.Mode {
	case AccessShared, AccessExclusive, AccessWaitForExclusive, AccessExclusiveWithFencing:
	default:
		return refuse(fmt.Errorf("%w: producer access mode %s", ErrProducerFenced, spec.Mode))
	}
	var out []Action
	if x := p.producers[p.exclusive]; x != nil && x.spec.Name == spec.Name && spec.Mode != AccessShared &&
		spec.Epoch != nil && *spec.Epoch == p.epoch {
		// The holder coming back (typically on a new connection, before
		// the old one is torn down): it still holds the partition.
		out = append(out, p.fenceOut(x.spec.ID, false)...)
	}
	_, dup := p.byName[spec.Name]
	dup = dup || slices.ContainsFunc(p.waiting, func(id uint64) bool { return p.producers[id].spec.Name == spec.Name })
	if dup && spec.Mode != AccessExclusiveWithFencing {
		return append(out, refuse(fmt.Errorf("%w: producer %q is already connected", ErrProducerBusy, spec.Name))...)
	}
	busy := len(p.byName) > 0 || len(p.waiting) > 0
	np := &partProducer{spec: spec}
	switch spec.Mode {
	case AccessShared:
		if p.exclusive != 0 || len(p.waiting) > 0 {
			return append(out, refuse(fmt.Errorf("%w: the partition has an exclusive producer (%d waiting for exclusive access)",
				ErrProducerBusy, len(p.waiting)))...)
		}
		p.attach(np)
		np.ready, np.answered = true, true
		return append(out, p.answer(np))
	case AccessExclusive:
		if p.exclusive != 0 || len(p.waiting) > 0 {
			return append(out, refuse(fmt.Errorf("%w: the partition has an exclusive producer", ErrProducerFenced))...)
		}
		if busy {
			return append(out, refuse(fmt.Errorf("%w: the partition has other producers", ErrProducerFenced))...)
		}
	case AccessWaitForExclusive:
		if busy {
			p.producers[spec.ID] = np
			p.waiting = append(p.waiting, spec.ID)
			np.answered = true
			return append(out, p.answer(np))
		}
	case AccessExclusiveWithFencing:
		if err := p.checkEpoch(spec); err != nil {
			return append(out, refuse(err)...)
		}
		for _, id := range slices.Clone(p.waiting) {
			out = append(out, p.fenceOut(id, true)...)
		}
		for _, id := range slices.Sorted(maps.Values(p.byName)) {
			out = append(out, p.fenceOut(id, false)...)
		}
	}
	if err := p.checkEpoch(spec); err != nil {
		return append(out, refuse(err)...)
	}
	p.attach(np)
	return append(out, p.takeExclusive(np, spec.Epoch)...)
}

func (p *Partition) attach(np *partProducer) {
	p.producers[np.spec.ID] = np
	p.byName[np.spec.Name] = np.spec.ID
}

// checkEpoch fences a producer asking for an epoch older than the
// partition's: another exclusive producer held it meanwhile.
func (p *Partition) checkEpoch(spec ProducerSpec) error {
	if spec.Epoch != nil && p.hasEpoch && *spec.Epoch < p.epoch {
		return fmt.Errorf("%w: topic epoch moved to %d, producer has %d", ErrProducerFenced, p.epoch, *spec.Epoch)
	}
	return nil
}

// takeExclusive gives np exclusive access and sets the topic epoch; np is
// answered (or, if it waited, promoted) once the epoch is durable.
func (p *Partition) takeExclusive(np *partProducer, asked *uint64) []Action {
	switch {
	case asked != nil:
		p.epoch = *asked
	case p.hasEpoch:
		p.epoch++
	default:
		p.epoch = 0
	}
	p.hasEpoch = true
	p.exclusive = np.spec.ID
	np.ready = true
	if p.hasDurable && p.epoch == p.durableEpoch && !p.epochPersist {
		// Durable already (a reconnecting holder asking for it).
		return []Action{p.readyAnswer(np)}
	}
	p.epochWait = append(p.epochWait, np.spec.ID)
	if p.epochPersist {
		p.epochDirty = true
		return nil
	}
	p.epochPersist = true
	return []Action{PersistEpoch{Epoch: p.epoch}}
}

// readyAnswer is a ready producer's answer: its ProducerAnswer, or the
// promotion of a producer that waited (and was answered not ready).
func (p *Partition) readyAnswer(np *partProducer) Action {
	if np.answered {
		return ProducerPromoted{Producer: np.spec.ID, Epoch: p.epoch, LastSequence: p.LastSequence(np.spec.Name)}
	}
	np.answered = true
	return p.answer(np)
}

func (p *Partition) answer(np *partProducer) ProducerAnswer {
	return ProducerAnswer{Producer: np.spec.ID, Ready: np.ready, Epoch: p.epoch, HasEpoch: p.hasEpoch,
		LastSequence: p.LastSequence(np.spec.Name)}
}

// EpochPersisted reports the outcome of the PersistEpoch in flight. On
// success the producers waiting for it are answered (or promoted); on
// failure they are refused with err and detached.
func (p *Partition) EpochPersisted(epoch uint64, err error) []Action {
	p.epochPersist = false
	if err == nil {
		p.durableEpoch, p.hasDurable = max(p.durableEpoch, epoch), true
	}
	if err == nil && p.epochDirty {
		// The epoch moved while this persist ran: persist the newer one
		// before answering anyone.
		p.epochDirty = false
		p.epochPersist = true
		return []Action{PersistEpoch{Epoch: p.epoch}}
	}
	p.epochDirty = false
	waiters := p.epochWait
	p.epochWait = nil
	var out []Action
	for _, id := range waiters {
		np := p.producers[id]
		if np == nil || np.closing {
			continue // left meanwhile
		}
		if err != nil {
			out = append(out, p.dropFailed(np, fmt.Errorf("persisting the topic epoch: %w", err))...)
			continue
		}
		out = append(out, p.readyAnswer(np))
	}
	return out
}

// dropFailed detaches a producer whose answer failed and tells it.
func (p *Partition) dropFailed(np *partProducer, err error) []Action {
	out := p.detach(np.spec.ID)
	if !np.answered {
		return append(out, ProducerAnswer{Producer: np.spec.ID, Err: err, LastSequence: -1})
	}
	// It had been answered (waiting) and promotion failed: it is gone.
	return append(out, ProducerFencedOut{Producer: np.spec.ID, Waiting: true})
}

// fenceOut removes a producer fenced by an ExclusiveWithFencing producer (or
// replaced by its own reconnection).
func (p *Partition) fenceOut(id uint64, waiting bool) []Action {
	out := p.detach(id)
	return append(out, ProducerFencedOut{Producer: id, Waiting: waiting})
}

// detach removes a producer from the registry (not its queued SENDs: their
// appends are in flight and their outcomes are dropped). When the partition
// is left without producers, the first waiting producer is promoted.
func (p *Partition) detach(id uint64) []Action {
	np := p.producers[id]
	if np == nil {
		return nil
	}
	delete(p.producers, id)
	p.waiting = slices.DeleteFunc(p.waiting, func(w uint64) bool { return w == id })
	if p.byName[np.spec.Name] == id {
		delete(p.byName, np.spec.Name)
	}
	if p.exclusive == id {
		p.exclusive = 0
	}
	np.queue = nil // appends in flight stay in inflight; their outcomes are dropped
	if len(p.byName) > 0 || len(p.waiting) == 0 || p.closed {
		return nil
	}
	next := p.producers[p.waiting[0]]
	p.waiting = p.waiting[1:]
	p.attach(next)
	return p.takeExclusive(next, nil) // a queued producer always gets a new epoch
}

// RemoveProducer detaches a producer at once (its connection is gone): the
// outcomes of its SENDs in flight are dropped.
func (p *Partition) RemoveProducer(id uint64) []Action {
	np := p.producers[id]
	if np == nil {
		return nil
	}
	out := p.detach(id)
	return append(out, p.snapshotIfDue(true)...)
}

// CloseProducer detaches a producer that asked to close: it leaves the
// registry now, and ProducerClosed answers it once every SEND it sent
// before is answered.
func (p *Partition) CloseProducer(id uint64) []Action {
	np := p.producers[id]
	if np == nil {
		return []Action{ProducerClosed{Producer: id}}
	}
	// Leave the registry (its name is free again) but keep draining.
	queue := np.queue
	np.queue = nil
	out := p.detach(id)
	np.queue = queue
	np.closing = true
	if len(np.queue) == 0 {
		return append(append(out, ProducerClosed{Producer: id}), p.snapshotIfDue(true)...)
	}
	p.producers[id] = np // still answered, no longer attached or named
	return out
}

// Send accepts one SEND of producer id.
func (p *Partition) Send(id uint64, req SendRequest) []Action {
	np := p.producers[id]
	switch {
	case p.closed || p.draining:
		return []Action{SendFailed{Producer: id, Seq: req.Seq, Err: ErrPartitionClosed}}
	case np == nil || np.closing:
		return []Action{SendFailed{Producer: id, Seq: req.Seq, Err: fmt.Errorf("%w: %d", ErrUnknownProducer, id)}}
	case !np.ready || !np.answered:
		return []Action{SendFailed{Producer: id, Seq: req.Seq, Err: fmt.Errorf("%w: the producer waits for exclusive access", ErrProducerFenced)}}
	}
	np.queue = append(np.queue, &pendingSend{producer: id, name: np.spec.Name, req: req})
	out := p.pump(np)
	return append(out, p.receipts(np)...)
}

// pump judges the producer's new SENDs in order, appending them, until one
// must wait (deduplication: an append in flight may cover it, or its
// staging set is being learned; a broken append chain: the appends in
// flight must end first).
func (p *Partition) pump(np *partProducer) []Action {
	var out []Action
	for _, s := range np.queue {
		if s.state != sendNew {
			continue
		}
		if p.terminated {
			s.state, s.err = sendDone, fmt.Errorf("%w: the topic was terminated", lakestream.ErrFenced)
			continue
		}
		if np.failed != nil {
			s.state, s.err = sendDone, fmt.Errorf("%w: %w", ErrEarlierSendFailed, np.failed)
			continue
		}
		if p.chainBroken {
			return out // later SENDs wait behind it, in order
		}
		if p.dedup != nil && (p.cfg.Dedup || np.spec.Dedup) {
			if s.req.Stage != "" {
				switch p.staged.use(s.req.Stage) {
				case setLoad:
					return append(out, LoadStaged{Set: s.req.Stage})
				case setWaiting:
					return out // later SENDs wait behind it, in order
				}
			}
			if np.spec.Dedup {
				if err := p.dedup.inOrder(np.spec.Name, s.req); err != nil {
					s.state, s.err = sendDone, err
					continue
				}
			}
			switch p.dedup.admit(np.spec.Name, s.req) {
			case dedupDuplicate:
				s.state, s.dup = sendDone, true
				continue
			case dedupWait:
				return out // later SENDs wait behind it, in order
			}
			s.admitted = true
		}
		p.nextToken++
		s.token = p.nextToken
		s.state = sendAppending
		p.inflight[s.token] = s
		out = append(out, AppendEntry{Token: s.token, Chain: p.chain, Records: s.req.Records, PublishMs: s.req.PublishMs, Payload: s.req.Payload, Stage: s.req.Stage})
	}
	return out
}

// receipts answers the producer's SENDs whose outcome is known, from the
// head of its queue (SEND order).
func (p *Partition) receipts(np *partProducer) []Action {
	var out []Action
	for len(np.queue) > 0 && np.queue[0].state == sendDone {
		s := np.queue[0]
		np.queue[0] = nil
		np.queue = np.queue[1:]
		switch {
		case s.err != nil:
			out = append(out, SendFailed{Producer: np.spec.ID, Seq: s.req.Seq, Err: s.err})
		case s.dup:
			out = append(out, SendReceipt{Producer: np.spec.ID, Seq: s.req.Seq, Highest: s.req.Highest, Dup: true})
		default:
			out = append(out, SendReceipt{Producer: np.spec.ID, Seq: s.req.Seq, Highest: s.req.Highest, Header: s.h})
		}
	}
	if np.closing && len(np.queue) == 0 {
		delete(p.producers, np.spec.ID)
		out = append(out, ProducerClosed{Producer: np.spec.ID})
		out = append(out, p.snapshotIfDue(true)...)
	}
	return out
}

// AppendDone reports the outcome of the append with token.
func (p *Partition) AppendDone(token uint64, h lakestream.EntryHeader, err error) []Action {
	s := p.inflight[token]
	if s == nil {
		return nil
	}
	delete(p.inflight, token)
	s.state, s.h, s.err = sendDone, h, err
	if errors.Is(err, lakestream.ErrFenced) {
		p.terminated = true
	}
	owner := p.producers[s.producer] // nil once it left: the outcome is dropped
	if breaksOrder(err) {
		// Every later append of the chain fails too; the producer's
		// later SENDs fail rather than being stored after this one.
		p.chainBroken = true
		if owner != nil && owner.failed == nil {
			owner.failed = err
		}
	}
	restarted := false
	if p.chainBroken && len(p.inflight) == 0 {
		// Every append of the broken chain has ended: a new one begins.
		p.chainBroken = false
		p.chain++
		restarted = true
	}
	var out []Action
	if p.dedup != nil && s.admitted {
		p.dedup.finish(s.name, s.req, h, err)
		// SENDs waiting for this append may be judged now (any producer
		// of the name: a resend on another connection).
		for _, id := range slices.Sorted(maps.Keys(p.producers)) {
			if np := p.producers[id]; np.spec.Name == s.name && np != owner {
				out = append(out, p.pump(np)...)
				out = append(out, p.receipts(np)...)
			}
		}
	}
	if owner != nil {
		out = append(out, p.pump(owner)...)
		out = append(out, p.receipts(owner)...)
	}
	if restarted {
		// SENDs that waited for the new chain.
		for _, id := range slices.Sorted(maps.Keys(p.producers)) {
			np := p.producers[id]
			out = append(out, p.pump(np)...)
			out = append(out, p.receipts(np)...)
		}
	}
	out = append(out, p.snapshotIfDue(p.draining)...)
	return append(out, p.drainedIfDone()...)
}

// StagedLoaded reports the read asked by LoadStaged{Set: set}: seqs holds,
// per producer name, the highest sequence id of the set's staged entries
// of the log. They raise the deduplication state (as a replay of the log
// does), the set is learned and the SENDs waiting for it are judged. A
// set that ended (lakestream.ErrStageEnded) has nothing to learn: its
// SENDs go on (their appends fail). Any other err fails the SENDs waiting
// for the set, and their producers' later SENDs (ErrEarlierSendFailed);
// the set stays unknown.
func (p *Partition) StagedLoaded(set string, seqs map[string]int64, err error) []Action {
	if p.staged == nil || !p.staged.reading(set) {
		return nil
	}
	learned := err == nil || errors.Is(err, lakestream.ErrStageEnded)
	if learned {
		for _, name := range slices.Sorted(maps.Keys(seqs)) {
			p.dedup.raise(name, seqs[name])
		}
	}
	next := p.staged.done(set, learned)
	if p.drained {
		// The driver closes the producers: what waited is resent to the
		// next owner.
		return nil
	}
	var out []Action
	for _, s := range next {
		out = append(out, LoadStaged{Set: s})
	}
	ferr := fmt.Errorf("learning staging set %s: %w", set, err)
	for _, id := range slices.Sorted(maps.Keys(p.producers)) {
		np := p.producers[id]
		if !learned {
			// The producer's first SEND not judged yet is the one that
			// waits; if it waits for this set, it fails.
			if i := slices.IndexFunc(np.queue, func(s *pendingSend) bool { return s.state == sendNew }); i >= 0 && np.queue[i].req.Stage == set {
				np.queue[i].state, np.queue[i].err = sendDone, ferr
				if np.failed == nil {
					np.failed = ferr
				}
			}
		}
		out = append(out, p.pump(np)...)
		out = append(out, p.receipts(np)...)
	}
	return out
}

// breaksOrder reports whether an append's failure breaks its chain and its
// producer's order: every failure but the refusal of the entry itself
// (ErrInvalidArgument, ErrTooLarge), which takes no place in the log's
// order (lakestream.AppendChain).
func breaksOrder(err error) bool {
	return err != nil && !errors.Is(err, lakestream.ErrInvalidArgument) && !errors.Is(err, lakestream.ErrTooLarge)
}

// Terminate records that the log was fenced (an admin terminate): new
// producers are refused and SENDs not yet appended fail with ErrFenced.
func (p *Partition) Terminate() []Action {
	p.terminated = true
	var out []Action
	for _, id := range slices.Sorted(maps.Keys(p.producers)) {
		np := p.producers[id]
		out = append(out, p.pump(np)...)
		out = append(out, p.receipts(np)...)
	}
	return out
}

// Drain begins an orderly unload: later SENDs are refused with
// ErrPartitionClosed, and Drained is emitted once the appends in flight are
// done and answered (at once when none is), after a final deduplication
// snapshot is asked for.
func (p *Partition) Drain() []Action {
	p.draining = true
	return append(p.snapshotIfDue(true), p.drainedIfDone()...)
}

func (p *Partition) drainedIfDone() []Action {
	if !p.draining || p.drained || len(p.inflight) > 0 {
		return nil
	}
	p.drained = true
	return []Action{Drained{}}
}

// DedupPersisted reports the outcome of the PersistDedup in flight.
func (p *Partition) DedupPersisted(err error) []Action {
	if p.dedup == nil {
		return nil
	}
	p.dedup.snapshotting = false
	if err != nil {
		p.dedup.appended = max(p.dedup.appended, 1) // try again at the next chance
	}
	return nil
}

// snapshotIfDue asks for a deduplication snapshot when one is due and
// possible: nothing in flight (the state then covers every entry below
// its end), and DedupSnapshotEntries appends since the last one (or any,
// when a producer left).
func (p *Partition) snapshotIfDue(producerLeft bool) []Action {
	d := p.dedup
	if d == nil || d.snapshotting || d.appended == 0 || len(p.inflight) > 0 {
		return nil
	}
	if !producerLeft && d.appended < p.cfg.DedupSnapshotEntries {
		return nil
	}
	d.snapshotting = true
	d.appended = 0
	return []Action{PersistDedup{Sequences: maps.Clone(d.persisted), End: d.end}}
}

// Snapshot asks for a deduplication snapshot now if anything changed since
// the last one and nothing is in flight (before an orderly unload).
func (p *Partition) Snapshot() []Action { return p.snapshotIfDue(true) }

// Close stops the partition: every producer is detached (the driver tells
// them), later inputs are refused with ErrPartitionClosed. It returns the
// ids of the producers that were attached or waiting.
func (p *Partition) Close() []uint64 {
	p.closed = true
	ids := slices.Sorted(maps.Keys(p.producers))
	p.producers = map[uint64]*partProducer{}
	p.byName = map[string]uint64{}
	p.waiting = nil
	p.exclusive = 0
	p.epochWait = nil
	return ids
}

// ---- deduplication ----

// Verdicts of dedupTable.admit.
type dedupVerdict int

const (
	dedupAppend    dedupVerdict = iota // append it (finish must follow)
	dedupDuplicate                     // answer (-1,-1) without appending
	dedupWait                          // an append in flight may cover it: judge it when that ends
)

// dedupTable is Pulsar's brokerDeduplication state of one partition
// (docs/dedup.md): per producer name, the highest sequence id whose entry
// is durable. A SEND whose highest sequence id (max(sequence_id,
// highest_sequence_id)) is not above it is a duplicate. A SEND that an
// append in flight may cover (a resend on another connection) waits for
// that append's outcome. Appends that failed are remembered (at most
// failedMax per name, lowest evicted first) so that their resends are
// appended rather than answered as duplicates of something never stored.
type dedupTable struct {
	persisted map[string]int64
	inflight  map[string]*seqsInFlight // by name
	failed    map[string]map[int64]struct{}
	failedMax int

	end          int64 // offset just past the highest completed append
	appended     int   // appends since the last snapshot
	snapshotting bool
}

func newDedupTable(seqs map[string]int64, end int64, failedMax int) *dedupTable {
	d := &dedupTable{
		persisted: maps.Clone(seqs),
		inflight:  map[string]*seqsInFlight{},
		failed:    map[string]map[int64]struct{}{},
		failedMax: failedMax,
		end:       end,
	}
	if d.persisted == nil {
		d.persisted = map[string]int64{}
	}
	return d
}

func highestOf(r SendRequest) int64 { return max(int64(r.Seq), int64(r.Highest)) }

// inOrder checks a Kafka idempotent producer's SEND follows its last: a
// resend (at or below the highest known) is judged by admit; the next
// sequence is the highest stored or in flight + 1, and 0 without history.
func (d *dedupTable) inOrder(name string, r SendRequest) error {
	last := int64(-1)
	if v, ok := d.persisted[name]; ok {
		last = v
	}
	if f := d.inflight[name]; f != nil {
		last = max(last, f.max)
	}
	if seq := int64(r.Seq); seq > last+1 {
		return fmt.Errorf("%w: sequence %d after %d", ErrOutOfOrderSequence, seq, last)
	}
	return nil
}

func (d *dedupTable) admit(name string, r SendRequest) dedupVerdict {
	seq, highest := int64(r.Seq), highestOf(r)
	if v, ok := d.persisted[name]; ok && highest <= v {
		if _, failed := d.failed[name][highest]; !failed {
			return dedupDuplicate
		}
	}
	f := d.inflight[name]
	if f != nil && f.max >= seq {
		return dedupWait
	}
	if f == nil {
		f = &seqsInFlight{counts: map[int64]int{}}
		d.inflight[name] = f
	}
	f.add(highest)
	return dedupAppend
}

// seqsInFlight are one producer name's appends in flight: the count of
// each highest sequence id, and the highest of them (kept, not scanned
// for: admit asks for it at every SEND, with up to a window of appends in
// flight).
type seqsInFlight struct {
	counts map[int64]int
	max    int64 // the highest key of counts
}

func (f *seqsInFlight) add(h int64) {
	if len(f.counts) == 0 || h > f.max {
		f.max = h
	}
	f.counts[h]++
}

// remove forgets one append of h. Appends mostly end in the order they
// began, lowest first, so the max is rarely looked for again.
func (f *seqsInFlight) remove(h int64) {
	if f.counts[h]--; f.counts[h] > 0 {
		return
	}
	delete(f.counts, h)
	if h == f.max && len(f.counts) > 0 {
		f.max = slices.Max(slices.Collect(maps.Keys(f.counts)))
	}
}

func (d *dedupTable) finish(name string, r SendRequest, h lakestream.EntryHeader, err error) {
	highest := highestOf(r)
	if f := d.inflight[name]; f != nil {
		f.remove(highest)
		if len(f.counts) == 0 {
			delete(d.inflight, name)
		}
	}
	if err != nil {
		f := d.failed[name]
		if f == nil {
			f = map[int64]struct{}{}
			d.failed[name] = f
		}
		f[highest] = struct{}{}
		if len(f) > d.failedMax {
			delete(f, slices.Min(slices.Collect(maps.Keys(f))))
		}
		return
	}
	if f := d.failed[name]; f != nil {
		delete(f, highest)
		if len(f) == 0 {
			delete(d.failed, name)
		}
	}
	d.raise(name, highest)
	if r.Stage == "" {
		d.end = max(d.end, h.End()) // a staged entry has no offset yet
	}
	d.appended++
}

// raise records that name's entries up to sequence id highest are durable.
func (d *dedupTable) raise(name string, highest int64) {
	if v, ok := d.persisted[name]; !ok || highest > v {
		d.persisted[name] = highest
	}
}

// ---- staging sets learned ----

// What stagedSets.use tells of a set.
type setUse int

const (
	setLearned setUse = iota // judge the SEND
	setLoad                  // emit LoadStaged for it, and wait
	setWaiting               // its read is in flight or queued: wait
)

// stagedSets are the staging sets whose staged entries' sequences the
// deduplication state holds (docs/dedup.md, "Transactional sends"): read
// once (LoadStaged) before the first SEND into the set is judged, every
// later staged append raising the state itself. At most max are
// remembered, the least recently used forgotten first (a forgotten set is
// read again: raising the state with what it holds already changes
// nothing), and at most loadsMax reads are in flight, further sets queued
// for a place in the order they were asked for. A set being read or
// queued is not learned, so it is never forgotten.
type stagedSets struct {
	learned  map[string]*list.Element // set → its element of lru
	lru      *list.List               // learned sets (string), most recently used first
	reads    map[string]bool          // set → its read is in flight (true) or queued (false)
	queue    []string                 // queued sets, in order
	inflight int
	max      int
	loadsMax int
}

func newStagedSets(max, loadsMax int) *stagedSets {
	return &stagedSets{learned: map[string]*list.Element{}, lru: list.New(), reads: map[string]bool{}, max: max, loadsMax: loadsMax}
}

// use tells whether set is learned (and marks it used), else makes sure
// it is read: at once when a place is free (setLoad: the caller emits
// LoadStaged), or later.
func (st *stagedSets) use(set string) setUse {
	if e, ok := st.learned[set]; ok {
		st.lru.MoveToFront(e)
		return setLearned
	}
	if _, ok := st.reads[set]; ok {
		return setWaiting
	}
	if st.inflight < st.loadsMax {
		st.reads[set] = true
		st.inflight++
		return setLoad
	}
	st.reads[set] = false
	st.queue = append(st.queue, set)
	return setWaiting
}

// learn marks set learned (the least recently used forgotten beyond max).
func (st *stagedSets) learn(set string) {
	if e, ok := st.learned[set]; ok {
		st.lru.MoveToFront(e)
		return
	}
	st.learned[set] = st.lru.PushFront(set)
	for st.lru.Len() > st.max {
		delete(st.learned, st.lru.Remove(st.lru.Back()).(string))
	}
}

// reading reports whether set's read is in flight.
func (st *stagedSets) reading(set string) bool { return st.reads[set] }

// done ends set's read (learned: it succeeded) and returns the queued
// sets whose reads start now.
func (st *stagedSets) done(set string, learned bool) []string {
	delete(st.reads, set)
	st.inflight--
	if learned {
		st.learn(set)
	}
	var next []string
	for st.inflight < st.loadsMax && len(st.queue) > 0 {
		s := st.queue[0]
		st.queue = st.queue[1:]
		st.reads[s] = true
		st.inflight++
		next = append(next, s)
	}
	return next
}
