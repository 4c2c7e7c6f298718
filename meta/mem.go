package meta

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// Defaults of MemOptions.
const (
	// DefaultMaxTxnOps is etcd's default --max-txn-ops, the limit of Mem and
	// of an Etcd store on an external cluster unless configured otherwise.
	DefaultMaxTxnOps = 128
	// EtcdDefaultMaxRequestBytes is etcd's default --max-request-bytes
	// (1.5 MiB), the request size limit of Mem and of an Etcd store on an
	// external cluster unless configured otherwise.
	EtcdDefaultMaxRequestBytes = 3 << 19
	// DefaultWatchBufferEvents is the default per-watch buffer, in events.
	DefaultWatchBufferEvents = 1024
	// DefaultMemHistoryRevisions is how many revisions of change history Mem
	// keeps for watches from a past revision by default.
	DefaultMemHistoryRevisions = 10000
)

// MemOptions configures NewMem. The zero value gives the defaults.
type MemOptions struct {
	// MaxTxnOps is the most compares, and the most ops, one Txn may carry
	// (ErrTooManyOps beyond). Default DefaultMaxTxnOps (128, like etcd).
	MaxTxnOps int
	// MaxRequestBytes bounds the size of one Txn: its keys and values plus
	// 16 bytes per compare and op (ErrTooManyOps beyond). Default
	// EtcdDefaultMaxRequestBytes (1.5 MiB, like etcd).
	MaxRequestBytes int
	// WatchBufferEvents is the capacity of each watch channel, in events.
	// A watcher whose buffer is full when an event arrives is closed.
	// Default DefaultWatchBufferEvents (1024).
	WatchBufferEvents int
	// HistoryRevisions is how many of the latest revisions keep their
	// changes for watches from a past revision, like etcd's revision-mode
	// auto-compaction: a watch from an older revision is closed at once.
	// Default DefaultMemHistoryRevisions (10000).
	HistoryRevisions int
	// Now is the clock leases expire by. Default time.Now.
	Now func() time.Time
	// LeaseCheckInterval is how often a background pass expires leases
	// (calls also expire them as they begin). Default 50 ms.
	LeaseCheckInterval time.Duration
	// Fault, if set, is consulted before every Get, Range, RangeReverse and
	// Txn that InjectFault has not already decided, and returns the fault to
	// inject (FaultNone for none). It is called without Mem's lock held,
	// possibly concurrently, and must not modify the Call's slices.
	Fault func(Call) Fault
}

// Method names the Store methods faults can be injected into.
type Method int

// Methods for fault injection.
const (
	MethodGet   Method = iota + 1
	MethodRange        // Range and RangeReverse
	MethodTxn
)

// String returns the method's name.
func (m Method) String() string {
	switch m {
	case MethodGet:
		return "Get"
	case MethodRange:
		return "Range"
	case MethodTxn:
		return "Txn"
	}
	return fmt.Sprintf("Method(%d)", int(m))
}

// Call describes one store call, as seen by MemOptions.Fault.
type Call struct {
	Method Method
	// Key is the key of a Get and the start of a Range.
	Key string
	// End is the end of a Range; Reverse tells RangeReverse.
	End     string
	Reverse bool
	// Cmps and Ops are a Txn's (read-only).
	Cmps []Cmp
	Ops  []Op
}

// Fault is a failure Mem injects into one call.
type Fault int

// Faults.
const (
	// FaultNone lets the call run normally.
	FaultNone Fault = iota
	// FaultUnavailable fails the call with ErrUnavailable before it takes
	// effect: a Txn is not applied (the request was lost, or the node
	// crashed before committing).
	FaultUnavailable
	// FaultLostReply runs a Txn (applying it if its compares hold) and then
	// fails it with ErrUnavailable, as when the commit reached the store but
	// its reply was lost: the caller cannot tell what happened. For reads it
	// is FaultUnavailable.
	FaultLostReply
)

// Mem is an in-memory Store for unit tests, with etcd's revision model,
// sorted keys, watches from past revisions (within HistoryRevisions) and
// fault injection. Create it with NewMem.
type Mem struct {
	opts MemOptions

	// mu guards everything below. It is held while events are handed to
	// watch channels (non-blocking sends), so watchers see changes in
	// revision order with no gaps. Lock order: Mem.mu only; Fault hooks run
	// without it.
	mu struct {
		sync.Mutex
		closed bool
		// rev is the store revision; 1 when empty, as in a fresh etcd.
		rev int64
		// kvs holds the live keys in ascending key order. Values are never
		// modified in place (a put stores a fresh copy), so they may be
		// shared by the history.
		kvs []memKV
		// history holds the changes of revisions (compacted, rev], oldest
		// first.
		history []memChange
		// compacted is the highest revision whose changes are gone: a
		// watch must start at compacted+1 or later.
		compacted int64
		watchers  map[*memWatcher]struct{}
		// faults are one-shot faults queued by InjectFault, per method.
		faults map[Method][]Fault
		// leases by id; nextLease numbers them; janitor is set while the
		// background expiry pass runs.
		leases    map[LeaseID]*memLease
		nextLease LeaseID
		janitor   chan struct{} // closed by Close
	}
}

type memLease struct {
	ttl     time.Duration
	expires time.Time
	keys    map[string]struct{}
}

type memKV struct {
	key            string
	value          []byte
	modRevision    int64
	createRevision int64
	lease          LeaseID
}

type memChange struct {
	rev int64
	ev  Event // KV.Value shared with the store: clone before handing out
}

type memWatcher struct {
	prefix string
	minRev int64 // first revision delivered
	ch     chan Event
	stop   func() bool // stops the context.AfterFunc that closes the watch
}

var _ Store = (*Mem)(nil)

// NewMem returns an empty in-memory store at revision 1.
func NewMem(opts MemOptions) *Mem {
	if opts.MaxTxnOps <= 0 {
		opts.MaxTxnOps = DefaultMaxTxnOps
	}
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = EtcdDefaultMaxRequestBytes
	}
	if opts.WatchBufferEvents <= 0 {
		opts.WatchBufferEvents = DefaultWatchBufferEvents
	}
	if opts.HistoryRevisions <= 0 {
		opts.HistoryRevisions = DefaultMemHistoryRevisions
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.LeaseCheckInterval <= 0 {
		opts.LeaseCheckInterval = 50 * time.Millisecond
	}
	m := &Mem{opts: opts}
	m.mu.leases = map[LeaseID]*memLease{}
	m.mu.rev = 1
	m.mu.watchers = make(map[*memWatcher]struct{})
	m.mu.faults = make(map[Method][]Fault)
	return m
}

// InjectFault queues f for the next call of method that has no fault queued
// before it (calls consume queued faults in order, ahead of
// MemOptions.Fault). For example InjectFault(MethodTxn, FaultLostReply)
// makes the next Txn apply and then report ErrUnavailable.
func (m *Mem) InjectFault(method Method, f Fault) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.faults[method] = append(m.mu.faults[method], f)
}

// Revision returns the current store revision.
func (m *Mem) Revision() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.rev
}

// Compact drops the change history up to and including rev (capped at the
// current revision), like etcd's compaction: later watches from a revision
// ≤ rev are closed at once. Watches already open are unaffected.
func (m *Mem) Compact(rev int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.compactLocked(min(rev, m.mu.rev))
}

func (m *Mem) compactLocked(rev int64) {
	if rev <= m.mu.compacted {
		return
	}
	i, _ := slices.BinarySearchFunc(m.mu.history, rev+1, func(c memChange, r int64) int {
		return cmp.Compare(c.rev, r)
	})
	// Reslicing also shrinks the capacity, so the next append that grows
	// the slice copies only live changes and the old array is released.
	m.mu.history = m.mu.history[i:]
	m.mu.compacted = rev
}

// fault returns the fault to inject into c.
func (m *Mem) fault(c Call) Fault {
	m.mu.Lock()
	if q := m.mu.faults[c.Method]; len(q) > 0 {
		m.mu.faults[c.Method] = q[1:]
		m.mu.Unlock()
		return q[0]
	}
	m.mu.Unlock()
	if m.opts.Fault != nil {
		return m.opts.Fault(c)
	}
	return FaultNone
}

func injected(c Call, f Fault) error {
	what := "request lost"
	if f == FaultLostReply && c.Method == MethodTxn {
		what = "txn applied, reply lost"
	}
	return fmt.Errorf("%w: injected fault in %v (%s)", ErrUnavailable, c.Method, what)
}

// begin checks the store and the context before a call, and expires the
// leases that are due.
func (m *Mem) begin(ctx context.Context) error {
	m.mu.Lock()
	closed := m.mu.closed
	if !closed {
		m.expireLocked()
	}
	m.mu.Unlock()
	if closed {
		return ErrClosed
	}
	return ctxErr(ctx)
}

// searchLocked returns the index of the first key ≥ key and whether it is
// key itself.
func (m *Mem) searchLocked(key string) (int, bool) {
	return slices.BinarySearchFunc(m.mu.kvs, key, func(kv memKV, k string) int {
		return strings.Compare(kv.key, k)
	})
}

func (kv *memKV) export() KV {
	return KV{
		Key:            kv.key,
		Value:          bytes.Clone(kv.value),
		ModRevision:    kv.modRevision,
		CreateRevision: kv.createRevision,
	}
}

// Get implements Store.
func (m *Mem) Get(ctx context.Context, key string) (KV, bool, error) {
	if err := m.begin(ctx); err != nil {
		return KV{}, false, err
	}
	if key == "" {
		return KV{}, false, fmt.Errorf("%w: empty key", ErrInvalid)
	}
	c := Call{Method: MethodGet, Key: key}
	if f := m.fault(c); f != FaultNone {
		return KV{}, false, injected(c, f)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return KV{}, false, ErrClosed
	}
	i, found := m.searchLocked(key)
	if !found {
		return KV{}, false, nil
	}
	return m.mu.kvs[i].export(), true, nil
}

// Range implements Store.
func (m *Mem) Range(ctx context.Context, start, end string, limit int) ([]KV, error) {
	return m.rangeKeys(ctx, start, end, limit, false)
}

// RangeReverse implements Store.
func (m *Mem) RangeReverse(ctx context.Context, start, end string, limit int) ([]KV, error) {
	return m.rangeKeys(ctx, start, end, limit, true)
}

func (m *Mem) rangeKeys(ctx context.Context, start, end string, limit int, reverse bool) ([]KV, error) {
	if err := m.begin(ctx); err != nil {
		return nil, err
	}
	c := Call{Method: MethodRange, Key: start, End: end, Reverse: reverse}
	if f := m.fault(c); f != FaultNone {
		return nil, injected(c, f)
	}
	if end != "" && end <= start {
		return nil, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return nil, ErrClosed
	}
	lo, _ := m.searchLocked(start)
	hi := len(m.mu.kvs)
	if end != "" {
		hi, _ = m.searchLocked(end)
	}
	n := hi - lo
	if limit > 0 && n > limit {
		n = limit
	}
	out := make([]KV, 0, n)
	for j := range n {
		i := lo + j
		if reverse {
			i = hi - 1 - j
		}
		out = append(out, m.mu.kvs[i].export())
	}
	return out, nil
}

// Txn implements Store.
func (m *Mem) Txn(ctx context.Context, cmps []Cmp, ops []Op) (bool, int64, error) {
	if err := m.begin(ctx); err != nil {
		return false, 0, err
	}
	if err := checkTxn(cmps, ops, m.opts.MaxTxnOps, m.opts.MaxRequestBytes); err != nil {
		return false, 0, err
	}
	c := Call{Method: MethodTxn, Cmps: cmps, Ops: ops}
	f := m.fault(c)
	if f == FaultUnavailable {
		return false, 0, injected(c, f)
	}
	m.mu.Lock()
	if m.mu.closed {
		m.mu.Unlock()
		return false, 0, ErrClosed
	}
	ok := m.holdsLocked(cmps)
	if ok {
		for _, op := range ops {
			if op.Kind == OpPut && op.Lease != 0 && m.mu.leases[op.Lease] == nil {
				m.mu.Unlock()
				return false, 0, fmt.Errorf("%w: lease %x (put of %q)", ErrLeaseExpired, int64(op.Lease), op.Key)
			}
		}
		m.applyLocked(ops)
	}
	rev := m.mu.rev
	m.mu.Unlock()
	if f == FaultLostReply {
		return false, 0, injected(c, f)
	}
	return ok, rev, nil
}

func (m *Mem) holdsLocked(cmps []Cmp) bool {
	for _, c := range cmps {
		var mod int64
		if i, found := m.searchLocked(c.Key); found {
			mod = m.mu.kvs[i].modRevision
		}
		if mod != c.ModRevision {
			return false
		}
	}
	return true
}

// applyLocked applies ops (already checked) at revision rev+1, and if any
// key changed advances rev, records the changes and notifies watchers.
func (m *Mem) applyLocked(ops []Op) {
	rev := m.mu.rev + 1
	first := len(m.mu.history)
	for _, op := range ops {
		switch op.Kind {
		case OpPut:
			value := bytes.Clone(op.Value)
			i, found := m.searchLocked(op.Key)
			if found {
				kv := &m.mu.kvs[i]
				m.detachLocked(kv.key, kv.lease)
				kv.value, kv.modRevision, kv.lease = value, rev, op.Lease
			} else {
				m.mu.kvs = slices.Insert(m.mu.kvs, i, memKV{key: op.Key, value: value, modRevision: rev, createRevision: rev, lease: op.Lease})
			}
			if l := m.mu.leases[op.Lease]; l != nil {
				l.keys[op.Key] = struct{}{}
			}
			kv := m.mu.kvs[i]
			m.mu.history = append(m.mu.history, memChange{rev: rev, ev: Event{Kind: EventPut, KV: KV{
				Key: kv.key, Value: kv.value, ModRevision: kv.modRevision, CreateRevision: kv.createRevision,
			}}})
		case OpDelete:
			if i, found := m.searchLocked(op.Key); found {
				m.deleteLocked(i, i+1, rev)
			}
		case OpDeletePrefix:
			lo, _ := m.searchLocked(op.Key)
			hi := lo
			for hi < len(m.mu.kvs) && strings.HasPrefix(m.mu.kvs[hi].key, op.Key) {
				hi++
			}
			m.deleteLocked(lo, hi, rev)
		}
	}
	if len(m.mu.history) == first {
		return // nothing changed: the revision stays
	}
	m.mu.rev = rev
	for _, c := range m.mu.history[first:] {
		for w := range m.mu.watchers {
			m.deliverLocked(w, c)
		}
	}
	m.compactLocked(rev - int64(m.opts.HistoryRevisions))
}

func (m *Mem) deleteLocked(lo, hi int, rev int64) {
	for _, kv := range m.mu.kvs[lo:hi] {
		m.detachLocked(kv.key, kv.lease)
		m.mu.history = append(m.mu.history, memChange{rev: rev, ev: Event{Kind: EventDelete, KV: KV{Key: kv.key, ModRevision: rev}}})
	}
	m.mu.kvs = slices.Delete(m.mu.kvs, lo, hi)
}

// deliverLocked hands c to w if w wants it, closing w when its buffer is
// full.
func (m *Mem) deliverLocked(w *memWatcher, c memChange) {
	if c.rev < w.minRev || !strings.HasPrefix(c.ev.KV.Key, w.prefix) {
		return
	}
	ev := c.ev
	if ev.Kind == EventPut {
		ev.KV.Value = bytes.Clone(ev.KV.Value)
	}
	select {
	case w.ch <- ev:
	default:
		m.closeWatcherLocked(w)
	}
}

func (m *Mem) closeWatcherLocked(w *memWatcher) {
	if _, ok := m.mu.watchers[w]; !ok {
		return
	}
	delete(m.mu.watchers, w)
	if w.stop != nil {
		w.stop()
	}
	close(w.ch)
}

// Watch implements Store. Changes are queued to the channel as the Txn that
// makes them commits; a watch from a past revision first replays the
// retained history. The channel holds MemOptions.WatchBufferEvents events.
func (m *Mem) Watch(ctx context.Context, prefix string, afterRev int64) <-chan Event {
	w := &memWatcher{prefix: prefix, ch: make(chan Event, m.opts.WatchBufferEvents)}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed || ctx.Err() != nil || (afterRev > 0 && afterRev < m.mu.compacted) {
		close(w.ch)
		return w.ch
	}
	w.minRev = afterRev + 1
	if afterRev <= 0 {
		w.minRev = m.mu.rev + 1
	}
	m.mu.watchers[w] = struct{}{}
	i, _ := slices.BinarySearchFunc(m.mu.history, w.minRev, func(c memChange, r int64) int {
		return cmp.Compare(c.rev, r)
	})
	for _, c := range m.mu.history[i:] {
		if _, open := m.mu.watchers[w]; !open {
			return w.ch // overflowed during the replay
		}
		m.deliverLocked(w, c)
	}
	if _, open := m.mu.watchers[w]; open {
		w.stop = context.AfterFunc(ctx, func() {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.closeWatcherLocked(w)
		})
	}
	return w.ch
}

// MaxTxnOps implements Store.
func (m *Mem) MaxTxnOps() int { return m.opts.MaxTxnOps }

// Close implements Store: it closes every watch channel; the data is
// dropped with the Mem.
func (m *Mem) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return nil
	}
	m.mu.closed = true
	for w := range m.mu.watchers {
		m.closeWatcherLocked(w)
	}
	if m.mu.janitor != nil {
		close(m.mu.janitor)
	}
	return nil
}

// detachLocked removes key from lease's keys.
func (m *Mem) detachLocked(key string, lease LeaseID) {
	if l := m.mu.leases[lease]; l != nil {
		delete(l.keys, key)
	}
}

// Grant implements Store. Leases expire by MemOptions.Now, checked as calls
// begin and every LeaseCheckInterval.
func (m *Mem) Grant(ctx context.Context, ttl time.Duration) (LeaseID, error) {
	if err := m.begin(ctx); err != nil {
		return 0, err
	}
	if ttl <= 0 {
		return 0, fmt.Errorf("%w: lease ttl %v", ErrInvalid, ttl)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return 0, ErrClosed
	}
	m.mu.nextLease++
	id := m.mu.nextLease
	m.mu.leases[id] = &memLease{ttl: ttl, expires: m.opts.Now().Add(ttl), keys: map[string]struct{}{}}
	if m.mu.janitor == nil {
		m.mu.janitor = make(chan struct{})
		go m.expireLoop(m.mu.janitor)
	}
	return id, nil
}

// KeepAlive implements Store.
func (m *Mem) KeepAlive(ctx context.Context, id LeaseID) (time.Duration, error) {
	if err := m.begin(ctx); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.mu.leases[id]
	if l == nil {
		return 0, fmt.Errorf("%w: lease %x", ErrLeaseExpired, int64(id))
	}
	l.expires = m.opts.Now().Add(l.ttl)
	return l.ttl, nil
}

// Revoke implements Store.
func (m *Mem) Revoke(ctx context.Context, id LeaseID) error {
	if err := m.begin(ctx); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.endLeaseLocked(id)
	return nil
}

// expireLocked ends every lease past its expiry, in id order.
func (m *Mem) expireLocked() {
	now := m.opts.Now()
	var due []LeaseID
	for id, l := range m.mu.leases {
		if !now.Before(l.expires) {
			due = append(due, id)
		}
	}
	slices.Sort(due)
	for _, id := range due {
		m.endLeaseLocked(id)
	}
}

// endLeaseLocked deletes a lease and its keys, all at one revision.
func (m *Mem) endLeaseLocked(id LeaseID) {
	l := m.mu.leases[id]
	if l == nil {
		return
	}
	keys := slices.Sorted(maps.Keys(l.keys))
	delete(m.mu.leases, id)
	ops := make([]Op, len(keys))
	for i, k := range keys {
		ops[i] = Delete(k)
	}
	m.applyLocked(ops)
}

func (m *Mem) expireLoop(stop <-chan struct{}) {
	t := time.NewTicker(m.opts.LeaseCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			m.mu.Lock()
			if !m.mu.closed {
				m.expireLocked()
			}
			m.mu.Unlock()
		}
	}
}
