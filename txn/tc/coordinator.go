package tc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
	"github.com/lakegate/lakegate/txn"
)

// reasonTimedOut is the Reason of a transaction aborted by its timeout.
const reasonTimedOut = "timed out"

// Limits of docs/transactions.md.
const (
	maxPartitions    = 1000
	maxSubscriptions = 1000
	seqBlock         = 1000 // sequences a coordinator takes from next at a time
)

// Config configures a Coordinator.
type Config struct {
	// Meta is the metadata store; Root the prefix of the coordinator's
	// keys. Required.
	Meta meta.Store
	Root string
	// Staging commits and discards the transactions' messages. Required.
	Staging lakestream.Staging
	// Membership: coordinator i is served by the owner of Unit(i).
	// Required.
	Membership lakestream.Membership
	// Coordinators is how many there are (1–256). Default 16.
	Coordinators int
	// MaxTimeout bounds a transaction's timeout. Default 6 h.
	MaxTimeout time.Duration
	// DefaultTimeout is the timeout of a transaction opened without one.
	// Default 1 min.
	DefaultTimeout time.Duration
	// MaxOpen bounds the open transactions of one coordinator. Default
	// 10 000.
	MaxOpen int
	// MaxOpenPerRole bounds the open transactions one role holds at one
	// coordinator, so that a role cannot take all of MaxOpen from the
	// others. 0: no bound but MaxOpen.
	MaxOpenPerRole int
	// EndedRetention: how long an ended transaction's record is kept (so
	// that a client retrying its END learns the outcome). Default 10 min.
	EndedRetention time.Duration
	// TickInterval: how often timeouts are checked and unfinished
	// decisions retried. Default 500 ms.
	TickInterval time.Duration
	// AdoptInterval: how often this node looks for coordinators that hold
	// transactions and that no live member serves (after a restart or the
	// loss of their node), and serves them, so that their timeouts and
	// unfinished decisions do not wait for a client. Default 5 s.
	AdoptInterval time.Duration
	// Superuser reports whether a role may use every transaction. nil:
	// none may.
	Superuser func(role string) bool
	// Now and Logger. Defaults time.Now and slog.Default().
	Now    func() time.Time
	Logger *slog.Logger
}

// Coordinator serves the transaction coordinators this node owns, and
// tells the node's subscriptions how transactions they wait for ended.
// Safe for concurrent use.
type Coordinator struct {
	cfg Config
	k   keys

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu  sync.Mutex
	tcs map[uint64]*tcState

	metrics metrics // metrics.go

	awaitMu sync.Mutex
	awaits  map[txn.ID][]func(committed bool)
}

// tcState is one coordinator this node serves.
type tcState struct {
	id  uint64
	own lakestream.Ownership

	mu   sync.Mutex // guards txns (not the entries' contents)
	txns map[uint64]*entry

	allocMu       sync.Mutex
	next, nextEnd uint64
}

// entry is one transaction as its coordinator knows it: the record and the
// revision it was read or written at.
type entry struct {
	mu  sync.Mutex // serializes the transaction's changes
	rec txn.Record
	rev int64
}

// New starts a coordinator on this node. It serves no coordinator until a
// client asks (Serve, or any request naming one).
func New(cfg Config) (*Coordinator, error) {
	if cfg.Meta == nil || cfg.Staging == nil || cfg.Membership == nil {
		return nil, errors.New("txn: Config needs Meta, Staging and Membership")
	}
	if cfg.Coordinators == 0 {
		cfg.Coordinators = 16
	}
	if cfg.Coordinators < 1 || cfg.Coordinators > 256 {
		return nil, fmt.Errorf("txn: %d coordinators: 1 to 256", cfg.Coordinators)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.MaxTimeout, 6*time.Hour)
	def(&cfg.DefaultTimeout, time.Minute)
	def(&cfg.EndedRetention, 10*time.Minute)
	def(&cfg.TickInterval, 500*time.Millisecond)
	def(&cfg.AdoptInterval, 5*time.Second)
	if cfg.MaxOpen <= 0 {
		cfg.MaxOpen = 10000
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Superuser == nil {
		cfg.Superuser = func(string) bool { return false }
	}
	c := &Coordinator{cfg: cfg, k: keys{cfg.Root}, tcs: map[uint64]*tcState{}, awaits: map[txn.ID][]func(bool){}}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.wg.Add(2)
	go c.tickLoop()
	go c.watchLoop()
	return c, nil
}

// Close stops the coordinator. Transactions stay as they are in the
// metadata store: the next owner of each coordinator carries on.
func (c *Coordinator) Close() {
	c.cancel()
	c.wg.Wait()
}

// Coordinators is the number of coordinators (the partition count of
// Pulsar's transaction_coordinator_assign topic).
func (c *Coordinator) Coordinators() int { return c.cfg.Coordinators }

// Serve makes this node serve coordinator tc (taking its unit unless
// another live member owns it: then ErrNotCoordinator, wrapping the
// lakestream.OwnedError that names the owner).
func (c *Coordinator) Serve(ctx context.Context, tc uint64) error {
	_, err := c.serve(ctx, tc)
	return err
}

func (c *Coordinator) serve(ctx context.Context, tc uint64) (*tcState, error) {
	if tc >= uint64(c.cfg.Coordinators) {
		return nil, fmt.Errorf("%w: coordinator %d (there are %d)", txn.ErrNotCoordinator, tc, c.cfg.Coordinators)
	}
	c.mu.Lock()
	st := c.tcs[tc]
	c.mu.Unlock()
	if st != nil && st.own.Held() {
		return st, nil
	}
	own, err := c.cfg.Membership.Acquire(ctx, txn.Unit(tc))
	if errors.Is(err, lakestream.ErrOwned) {
		return nil, fmt.Errorf("%w: %w", txn.ErrNotCoordinator, err)
	}
	if err != nil {
		return nil, err
	}
	kvs, err := c.cfg.Meta.Range(ctx, c.k.recPrefix(tc), c.k.recPrefix(tc)+"\xff", 0)
	if err != nil {
		return nil, err
	}
	fresh := &tcState{id: tc, own: own, txns: make(map[uint64]*entry, len(kvs))}
	for _, kv := range kvs {
		id, ok := c.k.idOfRec(kv.Key)
		rec, err := decodeRecord(kv.Value)
		if !ok || err != nil {
			c.cfg.Logger.Error("transaction coordinator: skipping an unreadable record", "key", kv.Key, "err", err)
			continue
		}
		fresh.txns[id.Least] = &entry{rec: rec, rev: kv.ModRevision}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.tcs[tc]; st != nil && st.own == own {
		return st, nil // another request loaded it meanwhile
	}
	c.tcs[tc] = fresh
	c.cfg.Logger.Info("serving transaction coordinator", "tc", tc, "transactions", len(fresh.txns))
	return fresh, nil
}

// served returns the coordinator state of tc if this node serves it now.
func (c *Coordinator) served(ctx context.Context, id txn.ID) (*tcState, error) {
	return c.serve(ctx, id.Most)
}

// Open opens a transaction at coordinator tc for role with the given
// timeout (0: the default one; above MaxTimeout: MaxTimeout).
func (c *Coordinator) Open(ctx context.Context, tc uint64, timeout time.Duration, role string) (txn.ID, error) {
	st, err := c.serve(ctx, tc)
	if err != nil {
		return txn.ID{}, err
	}
	if timeout <= 0 {
		timeout = c.cfg.DefaultTimeout
	}
	timeout = min(timeout, c.cfg.MaxTimeout)
	n, mine := st.open(role)
	if n >= c.cfg.MaxOpen {
		return txn.ID{}, fmt.Errorf("%w: %d open transactions at coordinator %d", txn.ErrTooMany, n, tc)
	}
	if c.cfg.MaxOpenPerRole > 0 && mine >= c.cfg.MaxOpenPerRole {
		return txn.ID{}, fmt.Errorf("%w: role %q holds %d open transactions at coordinator %d", txn.ErrTooMany, role, mine, tc)
	}
	now := c.cfg.Now().UnixMilli()
	rec := txn.Record{State: txn.Open, Owner: role, OpenMs: now, TimeoutMs: now + timeout.Milliseconds()}
	for range 3 {
		least, err := c.alloc(ctx, st)
		if err != nil {
			return txn.ID{}, err
		}
		id := txn.ID{Most: tc, Least: least}
		ok, rev, err := c.cfg.Meta.Txn(ctx, []meta.Cmp{{Key: c.k.rec(id)}}, []meta.Op{meta.Put(c.k.rec(id), encode(rec))})
		if err != nil {
			return txn.ID{}, err
		}
		if !ok {
			continue // the number was taken (a node that served tc before us): take another
		}
		c.metrics.add(tc, func(m *counters) { m.created++; m.appendLog++ })
		st.mu.Lock()
		st.txns[least] = &entry{rec: rec, rev: rev}
		st.mu.Unlock()
		return id, nil
	}
	return txn.ID{}, fmt.Errorf("%w: transaction numbers at coordinator %d keep being taken", txn.ErrNotCoordinator, tc)
}

// open counts the open transactions, and those of role.
func (st *tcState) open(role string) (n, mine int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, e := range st.txns {
		if !e.rec.State.Ended() {
			n++
			if e.rec.Owner == role {
				mine++
			}
		}
	}
	return n, mine
}

// alloc hands out the next sequence of tc, taking a block of them from the
// metadata store when the last is used up (a node that takes over skips
// what its predecessor took: sequences are unique, not dense).
func (c *Coordinator) alloc(ctx context.Context, st *tcState) (uint64, error) {
	st.allocMu.Lock()
	defer st.allocMu.Unlock()
	for st.next >= st.nextEnd {
		key := c.k.next(st.id)
		kv, found, err := c.cfg.Meta.Get(ctx, key)
		if err != nil {
			return 0, err
		}
		var cur uint64
		if found {
			if cur, err = strconv.ParseUint(string(kv.Value), 10, 64); err != nil {
				return 0, fmt.Errorf("txn: corrupt %s: %w", key, err)
			}
		}
		ok, _, err := c.cfg.Meta.Txn(ctx, []meta.Cmp{{Key: key, ModRevision: kv.ModRevision}},
			[]meta.Op{meta.Put(key, []byte(strconv.FormatUint(cur+seqBlock, 10)))})
		if err != nil {
			return 0, err
		}
		if ok {
			st.next, st.nextEnd = cur, cur+seqBlock
		}
	}
	n := st.next
	st.next++
	return n, nil
}

// entryOf returns the transaction id of a coordinator this node serves,
// reading it from the store when it is not in memory.
func (c *Coordinator) entryOf(ctx context.Context, id txn.ID) (*entry, error) {
	st, err := c.served(ctx, id)
	if err != nil {
		return nil, err
	}
	st.mu.Lock()
	e := st.txns[id.Least]
	st.mu.Unlock()
	if e != nil {
		return e, nil
	}
	kv, found, err := c.cfg.Meta.Get(ctx, c.k.rec(id))
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("%w: %v", txn.ErrNotFound, id)
	}
	rec, err := decodeRecord(kv.Value)
	if err != nil {
		return nil, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if e := st.txns[id.Least]; e != nil {
		return e, nil
	}
	e = &entry{rec: rec, rev: kv.ModRevision}
	st.txns[id.Least] = e
	return e, nil
}

// may reports whether role may use the transaction.
func (c *Coordinator) may(rec txn.Record, role string) error {
	if rec.Owner == "" || rec.Owner == role || c.cfg.Superuser(role) {
		return nil
	}
	return txn.ErrNotOwner
}

// write puts rec for id if the record is still at e.rev; on a lost compare
// it reloads e (the caller re-decides).
func (c *Coordinator) write(ctx context.Context, id txn.ID, e *entry, rec txn.Record) (bool, error) {
	ok, rev, err := c.cfg.Meta.Txn(ctx, []meta.Cmp{{Key: c.k.rec(id), ModRevision: e.rev}}, []meta.Op{meta.Put(c.k.rec(id), encode(rec))})
	if err != nil {
		return false, err
	}
	if ok {
		e.rec, e.rev = rec, rev
		c.metrics.add(id.Most, func(m *counters) {
			m.appendLog++
			switch rec.State {
			case txn.Committed:
				m.committed++
			case txn.Aborted:
				m.aborted++
				if rec.Reason == reasonTimedOut {
					m.timeout++
				}
			}
		})
		return true, nil
	}
	kv, found, err := c.cfg.Meta.Get(ctx, c.k.rec(id))
	if err != nil {
		return false, err
	}
	if !found {
		return false, fmt.Errorf("%w: %v", txn.ErrNotFound, id)
	}
	if e.rec, err = decodeRecord(kv.Value); err != nil {
		return false, err
	}
	e.rev = kv.ModRevision
	return false, nil
}

// AddPartitions records that the transaction produces to partitions (full
// topic names).
func (c *Coordinator) AddPartitions(ctx context.Context, id txn.ID, partitions []string, role string) error {
	return c.add(ctx, id, role, func(r *txn.Record) (bool, error) {
		return appendNew(&r.Partitions, partitions, maxPartitions, "partitions")
	})
}

// AddSubscriptions records that the transaction acknowledges on subs.
func (c *Coordinator) AddSubscriptions(ctx context.Context, id txn.ID, subs []txn.Sub, role string) error {
	return c.add(ctx, id, role, func(r *txn.Record) (bool, error) {
		return appendNew(&r.Subscriptions, subs, maxSubscriptions, "subscriptions")
	})
}

// appendNew appends to *list the items it lacks, reporting whether it
// changed; ErrTooMany when the list would hold more than max.
func appendNew[T comparable](list *[]T, items []T, max int, what string) (bool, error) {
	changed := false
	for _, it := range items {
		if !slices.Contains(*list, it) {
			*list = append(*list, it)
			changed = true
		}
	}
	if len(*list) > max {
		return false, fmt.Errorf("%w: over %d %s in one transaction", txn.ErrTooMany, max, what)
	}
	return changed, nil
}

// TrackSubscription records that the transaction acknowledges on sub, from
// any node: the subscription's owner calls it for each acknowledgement in
// the transaction (a client registers the subscription first, but the
// record must list it whatever the client did: its record is kept while
// the subscription holds its acks). On the node serving the coordinator it
// is AddSubscriptions; elsewhere it updates the record in the store by
// compare-and-put — the serving node's next write of the record loses its
// compare, reloads and decides again, as after any concurrent change.
func (c *Coordinator) TrackSubscription(ctx context.Context, id txn.ID, sub txn.Sub, role string) error {
	if c.servedHere(id.Most) {
		return c.AddSubscriptions(ctx, id, []txn.Sub{sub}, role)
	}
	for range 20 {
		kv, found, err := c.cfg.Meta.Get(ctx, c.k.rec(id))
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("%w: %v", txn.ErrNotFound, id)
		}
		rec, err := decodeRecord(kv.Value)
		if err != nil {
			return err
		}
		if err := c.may(rec, role); err != nil {
			return err
		}
		if rec.State != txn.Open {
			return fmt.Errorf("%w: %v is %s, not open", txn.ErrInvalidStatus, id, rec.State)
		}
		rec.Subscriptions = slices.Clone(rec.Subscriptions)
		if changed, err := appendNew(&rec.Subscriptions, []txn.Sub{sub}, maxSubscriptions, "subscriptions"); err != nil || !changed {
			return err
		}
		ok, _, err := c.cfg.Meta.Txn(ctx, []meta.Cmp{{Key: c.k.rec(id), ModRevision: kv.ModRevision}}, []meta.Op{meta.Put(c.k.rec(id), encode(rec))})
		if err != nil || ok {
			return err
		}
	}
	return fmt.Errorf("txn: %v keeps changing: subscription %s/%s not recorded", id, sub.Topic, sub.Sub)
}

// endedOrEnding is the answer to a request a transaction that is not
// open cannot take, as Pulsar's coordinator answers it: InvalidTxnStatus
// while its end is under way, TransactionNotFound once it has ended
// (Pulsar forgets an ended transaction; the record kept here for
// endedRetention serves a retry of the same END).
func endedOrEnding(id txn.ID, rec txn.Record) error {
	msg := fmt.Sprintf("%v is %s", id, rec.State)
	if rec.Reason != "" {
		msg += " (" + rec.Reason + ")"
	}
	if rec.State.Ended() {
		return fmt.Errorf("%w: %s", txn.ErrNotFound, msg)
	}
	return fmt.Errorf("%w: %s", txn.ErrInvalidStatus, msg)
}

// servedHere reports whether this node serves coordinator tc now.
func (c *Coordinator) servedHere(tc uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.tcs[tc]
	return st != nil && st.own.Held()
}

func (c *Coordinator) add(ctx context.Context, id txn.ID, role string, change func(*txn.Record) (bool, error)) error {
	e, err := c.entryOf(ctx, id)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for {
		if err := c.may(e.rec, role); err != nil {
			return err
		}
		if e.rec.State != txn.Open {
			return endedOrEnding(id, e.rec)
		}
		rec := e.rec
		rec.Partitions, rec.Subscriptions = slices.Clone(rec.Partitions), slices.Clone(rec.Subscriptions)
		changed, err := change(&rec)
		if err != nil || !changed {
			return err
		}
		if ok, err := c.write(ctx, id, e, rec); ok || err != nil {
			return err
		}
	}
}

// End commits (commit true) or aborts the transaction and returns once the
// outcome is durable. Ending it again the same way is answered nil; the
// other way, ErrInvalidStatus.
func (c *Coordinator) End(ctx context.Context, id txn.ID, commit bool, role string) error {
	e, err := c.entryOf(ctx, id)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := c.may(e.rec, role); err != nil {
		return err
	}
	return c.end(ctx, id, e, commit, "")
}

// end carries the transaction to its outcome; e.mu is held.
func (c *Coordinator) end(ctx context.Context, id txn.ID, e *entry, commit bool, reason string) error {
	for {
		want := map[bool]txn.State{true: txn.Committing, false: txn.Aborting}[commit]
		switch s := e.rec.State; {
		case s == txn.Open:
			rec := e.rec
			rec.State, rec.Reason = want, reason
			if _, err := c.write(ctx, id, e, rec); err != nil {
				return err
			}
			continue // re-decide on what was written (or what won)
		case s == want:
			return c.finish(ctx, id, e)
		case (s == txn.Committed) == commit && s.Ended():
			return nil
		default:
			return endedOrEnding(id, e.rec)
		}
	}
}

// finish carries out a decision (committing or aborting); e.mu is held.
func (c *Coordinator) finish(ctx context.Context, id txn.ID, e *entry) error {
	set := id.Set()
	next := txn.Committed
	var tooLarge error
	switch e.rec.State {
	case txn.Committing:
		err := c.cfg.Staging.CommitStaged(ctx, set)
		switch {
		case errors.Is(err, lakestream.ErrStageTooLarge):
			// Nothing was committed: the decision can still change.
			tooLarge = fmt.Errorf("%w: the transaction was aborted: %w", txn.ErrTooMany, err)
			rec := e.rec
			rec.State, rec.Reason = txn.Aborting, err.Error()
			if _, err := c.write(ctx, id, e, rec); err != nil {
				return err
			}
			if err := c.finish(ctx, id, e); err != nil {
				return err
			}
			return tooLarge
		case err != nil:
			return err
		}
	case txn.Aborting:
		if err := c.cfg.Staging.DiscardStaged(ctx, set); err != nil {
			return err
		}
		next = txn.Aborted
	default:
		return nil
	}
	rec := e.rec
	rec.State, rec.EndMs = next, c.cfg.Now().UnixMilli()
	ok, err := c.write(ctx, id, e, rec)
	if err != nil {
		return err
	}
	if !ok && e.rec.State != next {
		return fmt.Errorf("txn: %v changed under its coordinator: now %s", id, e.rec.State)
	}
	return nil
}

// Status returns a transaction's record (any node may ask).
func (c *Coordinator) Status(ctx context.Context, id txn.ID) (txn.Record, error) {
	kv, found, err := c.cfg.Meta.Get(ctx, c.k.rec(id))
	if err != nil {
		return txn.Record{}, err
	}
	if !found {
		return txn.Record{}, fmt.Errorf("%w: %v", txn.ErrNotFound, id)
	}
	return decodeRecord(kv.Value)
}

// Usable checks, on any node, that role may produce or acknowledge in the
// transaction now: it is open and role's.
func (c *Coordinator) Usable(ctx context.Context, id txn.ID, role string) error {
	rec, err := c.Status(ctx, id)
	if err != nil {
		return err
	}
	if err := c.may(rec, role); err != nil {
		return err
	}
	if rec.State != txn.Open {
		return fmt.Errorf("%w: %v is %s, not open", txn.ErrInvalidStatus, id, rec.State)
	}
	return nil
}

// tickLoop times transactions out, retries decisions not carried out
// and forgets ended transactions, for the coordinators this node serves.
func (c *Coordinator) tickLoop() {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.TickInterval)
	defer t.Stop()
	var adopted time.Time
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		if now := time.Now(); now.Sub(adopted) >= c.cfg.AdoptInterval {
			adopted = now
			c.adopt()
		}
		c.mu.Lock()
		var sts []*tcState
		for tc, st := range c.tcs {
			if !st.own.Held() {
				delete(c.tcs, tc) // lost: its next owner carries on
				continue
			}
			sts = append(sts, st)
		}
		c.mu.Unlock()
		for _, st := range sts {
			c.tick(st)
		}
	}
}

// adopt serves the coordinators that hold transaction records and that no
// live member serves. Two nodes adopting at once are safe: one acquires
// the unit, the other is told ErrNotCoordinator.
func (c *Coordinator) adopt() {
	for tc := range uint64(c.cfg.Coordinators) {
		c.mu.Lock()
		st := c.tcs[tc]
		c.mu.Unlock()
		if st != nil && st.own.Held() {
			continue
		}
		ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
		err := c.adoptOne(ctx, tc)
		cancel()
		if err != nil && !errors.Is(err, txn.ErrNotCoordinator) && c.ctx.Err() == nil {
			c.cfg.Logger.Warn("transaction coordinator: adopting", "tc", tc, "err", err)
		}
	}
}

func (c *Coordinator) adoptOne(ctx context.Context, tc uint64) error {
	p := c.k.recPrefix(tc)
	kvs, err := c.cfg.Meta.Range(ctx, p, p+"\xff", 1)
	if err != nil || len(kvs) == 0 {
		return err
	}
	if _, ok, err := c.cfg.Membership.Owner(ctx, txn.Unit(tc)); err != nil || ok {
		return err
	}
	_, err = c.serve(ctx, tc)
	return err
}

func (c *Coordinator) tick(st *tcState) {
	now := c.cfg.Now().UnixMilli()
	st.mu.Lock()
	ids := make([]uint64, 0, len(st.txns))
	for least := range st.txns {
		ids = append(ids, least)
	}
	st.mu.Unlock()
	slices.Sort(ids)
	for _, least := range ids {
		st.mu.Lock()
		e := st.txns[least]
		st.mu.Unlock()
		if e == nil || !e.mu.TryLock() {
			continue // a request is at it
		}
		id := txn.ID{Most: st.id, Least: least}
		ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
		var err error
		switch s := e.rec.State; {
		case s == txn.Open && now >= e.rec.TimeoutMs:
			c.cfg.Logger.Info("transaction timed out: aborting it", "txn", id)
			err = c.end(ctx, id, e, false, reasonTimedOut)
		case s == txn.Committing || s == txn.Aborting:
			err = c.finish(ctx, id, e)
		case s.Ended() && now >= e.rec.EndMs+c.cfg.EndedRetention.Milliseconds():
			var gone bool
			if gone, err = c.forget(ctx, id, e); gone {
				st.mu.Lock()
				delete(st.txns, least)
				st.mu.Unlock()
			}
		}
		cancel()
		e.mu.Unlock()
		if err != nil && c.ctx.Err() == nil {
			c.cfg.Logger.Warn("transaction coordinator: will retry", "txn", id, "err", err)
		}
	}
}

// forget deletes an ended transaction's record and its staging set's end
// once no subscription keeps pending acknowledgements of it (they are
// resolved against the record).
func (c *Coordinator) forget(ctx context.Context, id txn.ID, e *entry) (bool, error) {
	for _, s := range e.rec.Subscriptions {
		if _, found, err := c.cfg.Meta.Get(ctx, c.k.acks(s.Topic, s.Sub, id)); err != nil || found {
			return false, err
		}
	}
	if err := c.cfg.Staging.ForgetStaged(ctx, id.Set()); err != nil {
		return false, err
	}
	ok, _, err := c.cfg.Meta.Txn(ctx, []meta.Cmp{{Key: c.k.rec(id), ModRevision: e.rev}}, []meta.Op{meta.Delete(c.k.rec(id))})
	return ok, err
}

// List returns the transactions of coordinator tc as the store holds them
// (any node may ask: the admin REST's stats).
func (c *Coordinator) List(ctx context.Context, tc uint64) (map[txn.ID]txn.Record, error) {
	if tc >= uint64(c.cfg.Coordinators) {
		return nil, fmt.Errorf("%w: coordinator %d (there are %d)", txn.ErrNotCoordinator, tc, c.cfg.Coordinators)
	}
	kvs, err := c.cfg.Meta.Range(ctx, c.k.recPrefix(tc), c.k.recPrefix(tc)+"\xff", 0)
	if err != nil {
		return nil, err
	}
	out := make(map[txn.ID]txn.Record, len(kvs))
	for _, kv := range kvs {
		id, ok := c.k.idOfRec(kv.Key)
		rec, err := decodeRecord(kv.Value)
		if ok && err == nil {
			out[id] = rec
		}
	}
	return out, nil
}

// Serving lists the coordinators this node serves now.
func (c *Coordinator) Serving() []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []uint64
	for tc, st := range c.tcs {
		if st.own.Held() {
			out = append(out, tc)
		}
	}
	slices.Sort(out)
	return out
}

// Abort aborts a transaction from any node, whoever serves its
// coordinator (the admin's abortTransaction): every write compares the
// record's revision, so the serving node, whose next write then fails its
// compare, re-reads the outcome.
func (c *Coordinator) Abort(ctx context.Context, id txn.ID, reason string) error {
	kv, found, err := c.cfg.Meta.Get(ctx, c.k.rec(id))
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("%w: %v", txn.ErrNotFound, id)
	}
	rec, err := decodeRecord(kv.Value)
	if err != nil {
		return err
	}
	e := &entry{rec: rec, rev: kv.ModRevision}
	e.mu.Lock()
	defer e.mu.Unlock()
	return c.end(ctx, id, e, false, reason)
}

var _ txn.Coordinator = (*Coordinator)(nil)
