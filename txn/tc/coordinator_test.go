package tc

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lakegate/lakegate/internal/testmember"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
	"github.com/lakegate/lakegate/txn"
)

// fakeStaging records what the coordinator asked of the engine.
type fakeStaging struct {
	mu        sync.Mutex
	ended     map[string]string // set → "commit" / "abort"
	tooLarge  map[string]bool
	forgotten map[string]bool
}

func newFakeStaging() *fakeStaging {
	return &fakeStaging{ended: map[string]string{}, tooLarge: map[string]bool{}, forgotten: map[string]bool{}}
}

func (f *fakeStaging) CommitStaged(_ context.Context, set string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.tooLarge[set]:
		return lakestream.ErrStageTooLarge
	case f.ended[set] == "abort":
		return lakestream.ErrStageEnded
	}
	f.ended[set] = "commit"
	return nil
}

func (f *fakeStaging) DiscardStaged(_ context.Context, set string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ended[set] == "commit" {
		return lakestream.ErrStageEnded
	}
	f.ended[set] = "abort"
	return nil
}

func (f *fakeStaging) ForgetStaged(_ context.Context, set string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forgotten[set] = true
	return nil
}

func (f *fakeStaging) outcome(set string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ended[set]
}

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newTestCoordinator(t *testing.T, m meta.Store, st *fakeStaging, clk *clock, tweaks ...func(*Config)) *Coordinator {
	t.Helper()
	cfg := Config{Meta: m, Root: "/t/", Staging: st, Membership: testmember.New(lakestream.Member{ID: "n1"}),
		Coordinators: 4, Now: clk.now, TickInterval: 5 * time.Millisecond, AdoptInterval: 10 * time.Millisecond, EndedRetention: time.Minute,
		Superuser: func(r string) bool { return r == "admin" }}
	for _, tw := range tweaks {
		tw(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestCoordinatorCommitAbort(t *testing.T) {
	ctx := context.Background()
	m := meta.NewMem(meta.MemOptions{})
	st, clk := newFakeStaging(), &clock{t: time.UnixMilli(1_000_000)}
	c := newTestCoordinator(t, m, st, clk)

	a, err := c.Open(ctx, 1, time.Minute, "alice")
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Open(ctx, 1, time.Minute, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if a.Most != 1 || b.Most != 1 || a.Least == b.Least {
		t.Fatalf("ids %v %v", a, b)
	}
	if err := c.AddPartitions(ctx, a, []string{"persistent://p/n/t-partition-0", "persistent://p/n/t-partition-0"}, "alice"); err != nil {
		t.Fatal(err)
	}
	if err := c.AddSubscriptions(ctx, a, []txn.Sub{{Topic: "persistent://p/n/in", Sub: "s"}}, "alice"); err != nil {
		t.Fatal(err)
	}
	if err := c.AddPartitions(ctx, a, []string{"x"}, "mallory"); !errors.Is(err, txn.ErrNotOwner) {
		t.Fatalf("another role added to the transaction: %v", err)
	}
	if err := c.Usable(ctx, a, "alice"); err != nil {
		t.Fatal(err)
	}
	if err := c.End(ctx, a, true, "alice"); err != nil {
		t.Fatal(err)
	}
	if got := st.outcome(a.Set()); got != "commit" {
		t.Fatalf("staging set of a: %q", got)
	}
	if err := c.End(ctx, a, true, "alice"); err != nil {
		t.Fatalf("committing again: %v", err)
	}
	// Pulsar's answers to an ended transaction: TransactionNotFound.
	if err := c.End(ctx, a, false, "alice"); !errors.Is(err, txn.ErrNotFound) {
		t.Fatalf("aborting a committed transaction: %v", err)
	}
	if err := c.AddPartitions(ctx, a, []string{"y"}, "alice"); !errors.Is(err, txn.ErrNotFound) {
		t.Fatalf("adding to a committed transaction: %v", err)
	}
	if err := c.Usable(ctx, a, "alice"); !errors.Is(err, txn.ErrInvalidStatus) {
		t.Fatalf("a committed transaction is usable: %v", err)
	}
	if err := c.End(ctx, b, false, "admin"); err != nil {
		t.Fatal(err)
	}
	if got := st.outcome(b.Set()); got != "abort" {
		t.Fatalf("staging set of b: %q", got)
	}
	if err := c.End(ctx, b, true, "alice"); !errors.Is(err, txn.ErrNotFound) {
		t.Fatalf("committing an aborted transaction: %v", err)
	}
	rec, err := c.Status(ctx, a)
	if err != nil || rec.State != txn.Committed || len(rec.Partitions) != 1 || len(rec.Subscriptions) != 1 {
		t.Fatalf("record of a: %+v %v", rec, err)
	}
	if _, err := c.Open(ctx, 4, 0, ""); !errors.Is(err, txn.ErrNotCoordinator) {
		t.Fatalf("coordinator 4 of 4: %v", err)
	}
	if err := c.End(ctx, txn.ID{Most: 1, Least: 999999}, true, ""); !errors.Is(err, txn.ErrNotFound) {
		t.Fatalf("unknown transaction: %v", err)
	}
}

// A transaction past its timeout is aborted by the coordinator; its
// waiters learn it; an ended one is forgotten after the retention once
// no pending acknowledgements of it remain.
func TestCoordinatorTimeoutAndForget(t *testing.T) {
	ctx := context.Background()
	m := meta.NewMem(meta.MemOptions{})
	st, clk := newFakeStaging(), &clock{t: time.UnixMilli(1_000_000)}
	c := newTestCoordinator(t, m, st, clk)
	id, err := c.Open(ctx, 0, time.Second, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddSubscriptions(ctx, id, []txn.Sub{{Topic: "persistent://a/b/c", Sub: "s/1"}}, ""); err != nil {
		t.Fatal(err)
	}
	if err := c.SaveAcks(ctx, "persistent://a/b/c", "s/1", id, []byte("ranges")); err != nil {
		t.Fatal(err)
	}
	ended := make(chan bool, 1)
	if err := c.Await(ctx, id, func(committed bool) { ended <- committed }); err != nil {
		t.Fatal(err)
	}
	clk.add(2 * time.Second)
	if committed := <-ended; committed {
		t.Fatal("a timed-out transaction reported committed")
	}
	if err := c.End(ctx, id, true, ""); !errors.Is(err, txn.ErrNotFound) {
		t.Fatalf("committing a timed-out transaction: %v", err)
	}
	acks, err := c.LoadAcks(ctx, "persistent://a/b/c", "s/1")
	if err != nil || string(acks[id]) != "ranges" {
		t.Fatalf("pending acks: %v %v", acks, err)
	}
	if other, _ := c.LoadAcks(ctx, "persistent://a/b/c/s", "1"); len(other) != 0 {
		t.Fatalf("another subscription's prefix sees them: %v", other)
	}
	// Past the retention, but acks are pending: kept.
	clk.add(2 * time.Minute)
	waitFor(t, func() bool { return st.outcome(id.Set()) == "abort" })
	if _, err := c.Status(ctx, id); err != nil {
		t.Fatalf("forgotten while its acks were pending: %v", err)
	}
	if err := c.DeleteAcks(ctx, "persistent://a/b/c", "s/1", id); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { _, err := c.Status(ctx, id); return errors.Is(err, txn.ErrNotFound) })
	st.mu.Lock()
	forgotten := st.forgotten[id.Set()]
	st.mu.Unlock()
	if !forgotten {
		t.Fatal("the staging set's end was not forgotten")
	}
	// Awaiting a transaction that no longer exists: aborted at once.
	got := make(chan bool, 1)
	if err := c.Await(ctx, id, func(committed bool) { got <- committed }); err != nil {
		t.Fatal(err)
	}
	if <-got {
		t.Fatal("a forgotten transaction reported committed")
	}
}

// A set too large to commit aborts the transaction, and says so.
func TestCoordinatorTooLarge(t *testing.T) {
	ctx := context.Background()
	m := meta.NewMem(meta.MemOptions{})
	st, clk := newFakeStaging(), &clock{t: time.UnixMilli(1_000_000)}
	c := newTestCoordinator(t, m, st, clk)
	id, err := c.Open(ctx, 2, time.Minute, "")
	if err != nil {
		t.Fatal(err)
	}
	st.tooLarge[id.Set()] = true
	if err := c.End(ctx, id, true, ""); !errors.Is(err, txn.ErrTooMany) || !errors.Is(err, lakestream.ErrStageTooLarge) {
		t.Fatalf("commit of a set too large: %v", err)
	}
	if rec, _ := c.Status(ctx, id); rec.State != txn.Aborted || rec.Reason == "" {
		t.Fatalf("record: %+v", rec)
	}
}

// A second coordinator process (another node after a move) carries on
// with the records: it finishes a decision the first left unfinished and
// hands out sequences the first never used.
func TestCoordinatorTakeOver(t *testing.T) {
	ctx := context.Background()
	m := meta.NewMem(meta.MemOptions{})
	st, clk := newFakeStaging(), &clock{t: time.UnixMilli(1_000_000)}
	c1 := newTestCoordinator(t, m, st, clk)
	a, err := c1.Open(ctx, 3, time.Hour, "")
	if err != nil {
		t.Fatal(err)
	}
	// c1 decides to commit, then "crashes" before carrying it out.
	e, err := c1.entryOf(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	rec := e.rec
	rec.State = txn.Committing
	if ok, err := c1.write(ctx, a, e, rec); !ok || err != nil {
		t.Fatal(ok, err)
	}
	c1.Close()
	c2 := newTestCoordinator(t, m, st, clk)
	b, err := c2.Open(ctx, 3, time.Hour, "")
	if err != nil {
		t.Fatal(err)
	}
	if b.Least == a.Least {
		t.Fatalf("sequence %d handed out twice", b.Least)
	}
	waitFor(t, func() bool { return st.outcome(a.Set()) == "commit" })
	waitFor(t, func() bool { r, _ := c2.Status(ctx, a); return r.State == txn.Committed })
}

// A coordinator that holds transactions and that nobody serves (its node
// restarted, and no client asked for it since) is adopted: its timeouts
// run without a client.
func TestCoordinatorAdoptsOrphans(t *testing.T) {
	ctx := context.Background()
	m := meta.NewMem(meta.MemOptions{})
	st, clk := newFakeStaging(), &clock{t: time.UnixMilli(1_000_000)}
	c1 := newTestCoordinator(t, m, st, clk)
	a, err := c1.Open(ctx, 2, time.Second, "")
	if err != nil {
		t.Fatal(err)
	}
	c1.Close()
	c2 := newTestCoordinator(t, m, st, clk)
	clk.add(2 * time.Second)
	waitFor(t, func() bool { r, _ := c2.Status(ctx, a); return r.State == txn.Aborted })
	if got := st.outcome(a.Set()); got != "abort" {
		t.Fatalf("staged set %s: %q, want abort", a.Set(), got)
	}
	if got := c2.Serving(); !slices.Equal(got, []uint64{2}) {
		t.Fatalf("serving %v, want [2] (only the coordinator holding a transaction)", got)
	}
}

// A subscription's owner on another node records the subscription in the
// transaction through the store; the serving coordinator, holding an
// older revision, still commits it.
func TestCoordinatorTrackSubscriptionElsewhere(t *testing.T) {
	ctx := context.Background()
	m := meta.NewMem(meta.MemOptions{})
	st, clk := newFakeStaging(), &clock{t: time.UnixMilli(1_000_000)}
	c1 := newTestCoordinator(t, m, st, clk)
	a, err := c1.Open(ctx, 1, time.Minute, "alice")
	if err != nil {
		t.Fatal(err)
	}
	c2 := newTestCoordinator(t, m, st, clk) // serves nothing
	sub := txn.Sub{Topic: "persistent://t/n/x-partition-0", Sub: "s"}
	if err := c2.TrackSubscription(ctx, a, sub, "bob"); !errors.Is(err, txn.ErrNotOwner) {
		t.Fatalf("another role: %v, want ErrNotOwner", err)
	}
	for range 2 { // the second finds it listed
		if err := c2.TrackSubscription(ctx, a, sub, "alice"); err != nil {
			t.Fatal(err)
		}
	}
	if got := c2.Serving(); len(got) != 0 {
		t.Fatalf("tracking made the node serve %v", got)
	}
	if err := c1.End(ctx, a, true, "alice"); err != nil {
		t.Fatalf("commit after a change elsewhere: %v", err)
	}
	rec, err := c1.Status(ctx, a)
	if err != nil || rec.State != txn.Committed || !slices.Equal(rec.Subscriptions, []txn.Sub{sub}) {
		t.Fatalf("record %+v, %v", rec, err)
	}
	if err := c2.TrackSubscription(ctx, a, txn.Sub{Topic: sub.Topic, Sub: "other"}, "alice"); !errors.Is(err, txn.ErrInvalidStatus) {
		t.Fatalf("tracking in a committed transaction: %v, want ErrInvalidStatus", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10 s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestCoordinatorProducerRecord(t *testing.T) {
	ctx := context.Background()
	m := meta.NewMem(meta.MemOptions{})
	c := newTestCoordinator(t, m, newFakeStaging(), &clock{t: time.UnixMilli(1_000_000)})

	const tid = "app/one two" // escaped in the key
	v, rev, err := c.LoadProducer(ctx, tid)
	if err != nil || v != nil || rev != 0 {
		t.Fatalf("absent record: %q %d %v", v, rev, err)
	}
	ok, rev1, err := c.SaveProducer(ctx, tid, []byte("a"), 0)
	if err != nil || !ok {
		t.Fatalf("create: %v %v", ok, err)
	}
	if ok, _, err := c.SaveProducer(ctx, tid, []byte("b"), 0); err != nil || ok {
		t.Fatalf("create over an existing record: %v %v", ok, err)
	}
	ok, rev2, err := c.SaveProducer(ctx, tid, []byte("c"), rev1)
	if err != nil || !ok {
		t.Fatalf("update at its revision: %v %v", ok, err)
	}
	if ok, _, err := c.SaveProducer(ctx, tid, []byte("d"), rev1); err != nil || ok {
		t.Fatalf("update at an old revision: %v %v", ok, err)
	}
	v, rev, err = c.LoadProducer(ctx, tid)
	if err != nil || string(v) != "c" || rev != rev2 {
		t.Fatalf("read back: %q %d %v, want c %d", v, rev, err, rev2)
	}
	if v, _, _ := c.LoadProducer(ctx, "app"); v != nil {
		t.Fatalf("another id shares the record: %q", v)
	}
}

// ListProducers pages through the transactional.id records in key order
// (escaped ids); DeleteProducer deletes one only at the revision it was
// read at, so a save that came in between (the id used again) wins over
// the expiry that read it before.
func TestCoordinatorProducerPagesAndDelete(t *testing.T) {
	ctx := context.Background()
	m := meta.NewMem(meta.MemOptions{})
	c := newTestCoordinator(t, m, newFakeStaging(), &clock{t: time.UnixMilli(1_000_000)})

	ids := []string{"a", "a/b", "a b", "b", "c%d", "z"}
	revs := map[string]int64{}
	for _, tid := range ids {
		ok, rev, err := c.SaveProducer(ctx, tid, []byte("v-"+tid), 0)
		if err != nil || !ok {
			t.Fatalf("create %q: %v %v", tid, ok, err)
		}
		revs[tid] = rev
	}
	var got []string
	after := ""
	for pages := 0; ; pages++ {
		if pages > len(ids) {
			t.Fatalf("paging does not end: %v", got)
		}
		page, err := c.ListProducers(ctx, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range page {
			if string(p.Value) != "v-"+p.TransactionalID || p.Rev != revs[p.TransactionalID] {
				t.Fatalf("listed %q: %q at %d, want v-%s at %d", p.TransactionalID, p.Value, p.Rev, p.TransactionalID, revs[p.TransactionalID])
			}
			got = append(got, p.TransactionalID)
		}
		if len(page) < 2 {
			break
		}
		after = page[len(page)-1].TransactionalID
	}
	want := slices.Clone(ids)
	slices.Sort(want)
	gotSorted := slices.Clone(got)
	slices.Sort(gotSorted)
	if !slices.Equal(gotSorted, want) || len(got) != len(ids) {
		t.Fatalf("listed %v, want each of %v once", got, ids)
	}

	// A save after the read: the delete at the revision read loses.
	ok, rev2, err := c.SaveProducer(ctx, "b", []byte("used again"), revs["b"])
	if err != nil || !ok {
		t.Fatalf("save: %v %v", ok, err)
	}
	if ok, err := c.DeleteProducer(ctx, "b", revs["b"]); err != nil || ok {
		t.Fatalf("delete at the old revision: %v %v, want refused", ok, err)
	}
	if v, rev, _ := c.LoadProducer(ctx, "b"); string(v) != "used again" || rev != rev2 {
		t.Fatalf("after the refused delete: %q at %d", v, rev)
	}
	// At its revision it goes; the id can be created anew (revision 0).
	if ok, err := c.DeleteProducer(ctx, "b", rev2); err != nil || !ok {
		t.Fatalf("delete at its revision: %v %v", ok, err)
	}
	if v, rev, _ := c.LoadProducer(ctx, "b"); v != nil || rev != 0 {
		t.Fatalf("after the delete: %q at %d", v, rev)
	}
	if ok, err := c.DeleteProducer(ctx, "b", rev2); err != nil || ok {
		t.Fatalf("delete of a deleted record: %v %v", ok, err)
	}
	if _, err := c.DeleteProducer(ctx, "a", 0); !errors.Is(err, meta.ErrInvalid) {
		t.Fatalf("delete at revision 0: %v, want meta.ErrInvalid", err)
	}
	if ok, _, err := c.SaveProducer(ctx, "b", []byte("new"), 0); err != nil || !ok {
		t.Fatalf("create after the delete: %v %v", ok, err)
	}
}

// The open-transaction bounds: per coordinator (MaxOpen) and per role at
// a coordinator (MaxOpenPerRole). A role at its bound is refused
// ErrTooMany while another role still opens, and opens again once one of
// its transactions ends; the coordinator's bound holds for every role.
func TestCoordinatorOpenBounds(t *testing.T) {
	ctx := context.Background()
	m := meta.NewMem(meta.MemOptions{})
	st, clk := newFakeStaging(), &clock{t: time.UnixMilli(1_000_000)}
	c := newTestCoordinator(t, m, st, clk, func(cfg *Config) { cfg.MaxOpen, cfg.MaxOpenPerRole = 4, 2 })
	open := func(tc uint64, role string) (txn.ID, error) { return c.Open(ctx, tc, time.Minute, role) }
	var mallory []txn.ID
	for range 2 {
		id, err := open(1, "mallory")
		if err != nil {
			t.Fatal(err)
		}
		mallory = append(mallory, id)
	}
	if _, err := open(1, "mallory"); !errors.Is(err, txn.ErrTooMany) {
		t.Fatalf("a third transaction of a role at coordinator 1: %v, want ErrTooMany", err)
	}
	if _, err := open(2, "mallory"); err != nil {
		t.Fatalf("the role at another coordinator: %v", err)
	}
	for range 2 {
		if _, err := open(1, "alice"); err != nil {
			t.Fatalf("another role at coordinator 1: %v", err)
		}
	}
	if _, err := open(1, "bob"); !errors.Is(err, txn.ErrTooMany) {
		t.Fatalf("past the coordinator's bound: %v, want ErrTooMany", err)
	}
	if err := c.End(ctx, mallory[0], false, "mallory"); err != nil {
		t.Fatal(err)
	}
	if _, err := open(1, "mallory"); err != nil {
		t.Fatalf("after one of its transactions ended: %v", err)
	}
}
