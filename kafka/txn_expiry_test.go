package kafka

// Expiry of transactional.ids (txn_expiry.go): the decision on one record
// (judgeExpiry), and sweeps over an in-memory coordinator (fakeProducers):
// what goes, what stays, legacy records stamped, the ids of coordinators
// served elsewhere left alone, pages, and a compare-and-delete losing to a
// save that came in between. Run: go test -run 'Expiry|SweepTxnIDs' ./kafka/

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lakegate/lakegate/txn"
)

func TestJudgeExpiry(t *testing.T) {
	const now, exp = 1_000_000, 1000
	open := &txn.ID{Most: 1, Least: 2}
	for _, c := range []struct {
		name string
		rec  producerRecord
		want expiryAction
	}{
		{"written before usedMs existed", producerRecord{PID: 1}, expiryStamp},
		{"legacy with a transaction", producerRecord{PID: 1, Txn: open}, expiryStamp},
		{"used just now", producerRecord{UsedMs: now}, expiryKeep},
		{"used one ms short of the expiration", producerRecord{UsedMs: now - exp + 1}, expiryKeep},
		{"used the expiration ago", producerRecord{UsedMs: now - exp}, expiryDelete},
		{"long unused", producerRecord{UsedMs: 1}, expiryDelete},
		{"long unused, a transaction named", producerRecord{UsedMs: 1, Txn: open}, expiryIfEnded},
		{"used in the future (a clock behind)", producerRecord{UsedMs: now + exp}, expiryKeep},
	} {
		if got := judgeExpiry(c.rec, now, exp); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestTxnExpiryInterval(t *testing.T) {
	for exp, want := range map[time.Duration]time.Duration{
		168 * time.Hour:           time.Hour,
		2 * time.Second:           200 * time.Millisecond,
		time.Millisecond:          txnExpiryIntervalMin,
		5 * time.Hour:             30 * time.Minute,
		10 * 365 * 24 * time.Hour: time.Hour,
	} {
		if got := txnExpiryInterval(exp); got != want {
			t.Errorf("expiration %v: every %v, want %v", exp, got, want)
		}
	}
}

// The usedMs field: written by every save, absent when 0 (records written
// before it read back as 0).
func TestProducerRecordUsedMs(t *testing.T) {
	b := encodeProducer(producerRecord{PID: 1, UsedMs: 1234})
	if want := `{"pid":1,"epoch":0,"timeoutMs":0,"usedMs":1234}`; string(b) != want {
		t.Fatalf("encoded %s, want %s", b, want)
	}
	old, err := decodeProducer([]byte(`{"pid":1,"epoch":2,"timeoutMs":60000}`))
	if err != nil || old.UsedMs != 0 || old.PID != 1 {
		t.Fatalf("a record without usedMs: %+v %v", old, err)
	}
	f := newFakeProducers(1, 0)
	var e txnProducer
	before := time.Now().UnixMilli()
	if err := e.save(context.Background(), f, "x", producerRecord{PID: 1}); err != nil {
		t.Fatal(err)
	}
	if got := f.record(t, "x").UsedMs; got < before || got > time.Now().UnixMilli() {
		t.Fatalf("usedMs %d after a save at %d", got, before)
	}
}

// fakeProducers is a txn.Coordinator keeping transactional.id records in
// memory with revisions: coordinators coordinators, this node serving
// those in serving; status gives the transactions' states (absent:
// txn.ErrNotFound). beforeDelete, when set, runs before a delete's
// compare (a save that comes in between).
type fakeProducers struct {
	txn.Coordinator
	coordinators int
	serving      []uint64
	mu           sync.Mutex
	recs         map[string]txn.Producer
	rev          int64
	status       map[txn.ID]txn.State
	beforeDelete func(tid string)
	serveCalls   []uint64
}

func newFakeProducers(coordinators int, serving ...uint64) *fakeProducers {
	return &fakeProducers{coordinators: coordinators, serving: serving, recs: map[string]txn.Producer{}, status: map[txn.ID]txn.State{}}
}

func (f *fakeProducers) Coordinators() int { return f.coordinators }
func (f *fakeProducers) Serving() []uint64 { return f.serving }

func (f *fakeProducers) Serve(_ context.Context, tc uint64) error {
	f.serveCalls = append(f.serveCalls, tc)
	if slices.Contains(f.serving, tc) {
		return nil
	}
	return fmt.Errorf("%w: %d is another member's", txn.ErrNotCoordinator, tc)
}

func (f *fakeProducers) Status(_ context.Context, id txn.ID) (txn.Record, error) {
	st, ok := f.status[id]
	if !ok {
		return txn.Record{}, txn.ErrNotFound
	}
	return txn.Record{State: st}, nil
}

func (f *fakeProducers) LoadProducer(_ context.Context, tid string) ([]byte, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.recs[tid]
	return p.Value, p.Rev, nil
}

func (f *fakeProducers) SaveProducer(_ context.Context, tid string, value []byte, rev int64) (bool, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.recs[tid].Rev != rev {
		return false, 0, nil
	}
	f.rev++
	f.recs[tid] = txn.Producer{TransactionalID: tid, Value: value, Rev: f.rev}
	return true, f.rev, nil
}

func (f *fakeProducers) ListProducers(_ context.Context, after string, limit int) ([]txn.Producer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for tid := range f.recs {
		if tid > after {
			ids = append(ids, tid)
		}
	}
	slices.Sort(ids)
	var out []txn.Producer
	for _, tid := range ids[:min(limit, len(ids))] {
		out = append(out, f.recs[tid])
	}
	return out, nil
}

func (f *fakeProducers) DeleteProducer(_ context.Context, tid string, rev int64) (bool, error) {
	if f.beforeDelete != nil {
		f.beforeDelete(tid)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.recs[tid]
	if !ok || p.Rev != rev {
		return false, nil
	}
	delete(f.recs, tid)
	return true, nil
}

func (f *fakeProducers) put(t *testing.T, tid string, rec producerRecord) {
	t.Helper()
	_, rev, _ := f.LoadProducer(context.Background(), tid)
	if ok, _, _ := f.SaveProducer(context.Background(), tid, encodeProducer(rec), rev); !ok {
		t.Fatalf("put %s", tid)
	}
}

func (f *fakeProducers) record(t *testing.T, tid string) producerRecord {
	t.Helper()
	v, rev, _ := f.LoadProducer(context.Background(), tid)
	if rev == 0 {
		t.Fatalf("%s: no record", tid)
	}
	rec, err := decodeProducer(v)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func (f *fakeProducers) has(tid string) bool {
	_, rev, _ := f.LoadProducer(context.Background(), tid)
	return rev != 0
}

// idAt returns a transactional.id named after prefix whose coordinator
// is tc (of n).
func idAt(prefix string, tc uint64, n int) string {
	for i := 0; ; i++ {
		if id := fmt.Sprintf("%s-%d", prefix, i); txnCoordinatorOf(id, n) == tc {
			return id
		}
	}
}

func TestSweepTxnIDs(t *testing.T) {
	ctx := context.Background()
	const now, exp = 10_000_000, 1000
	f := newFakeProducers(2, 0) // coordinator 0 here, 1 elsewhere
	openID, abortedID := txn.ID{Most: 0, Least: 1}, txn.ID{Most: 0, Least: 2}
	f.status[openID], f.status[abortedID] = txn.Open, txn.Aborted
	var (
		old       = idAt("old", 0, 2)
		fresh     = idAt("fresh", 0, 2)
		legacy    = idAt("legacy", 0, 2)
		open      = idAt("open", 0, 2)
		aborted   = idAt("aborted", 0, 2)
		forgotten = idAt("forgotten", 0, 2)
		elsewhere = idAt("elsewhere", 1, 2)
	)
	f.put(t, old, producerRecord{PID: 1, UsedMs: now - exp})
	f.put(t, fresh, producerRecord{PID: 2, UsedMs: now - exp + 1})
	f.put(t, legacy, producerRecord{PID: 3})
	f.put(t, open, producerRecord{PID: 4, UsedMs: 1, Txn: &openID})
	f.put(t, aborted, producerRecord{PID: 5, UsedMs: 1, Txn: &abortedID})
	f.put(t, forgotten, producerRecord{PID: 6, UsedMs: 1, Txn: &txn.ID{Most: 0, Least: 3}})
	f.put(t, elsewhere, producerRecord{PID: 7, UsedMs: 1})
	var cache txnProducers
	cached := cache.entry(old)
	cached.loaded = true

	n, err := sweepTxnIDs(ctx, f, &cache, now, exp, slog.Default())
	if err != nil || n != 3 {
		t.Fatalf("sweep: %d expired, %v; want 3", n, err)
	}
	for tid, want := range map[string]bool{old: false, fresh: true, legacy: true, open: true, aborted: false, forgotten: false, elsewhere: true} {
		if f.has(tid) != want {
			t.Errorf("%s: kept %v, want %v", tid, f.has(tid), want)
		}
	}
	if got := f.record(t, legacy); got.UsedMs != now || got.PID != 3 {
		t.Errorf("legacy record after the sweep: %+v, want usedMs %d", got, now)
	}
	if cache.entry(old) == cached {
		t.Error("the expired id's cached entry is still cached")
	}
	if cached.loaded {
		t.Error("the expired id's entry is still loaded")
	}
	if !slices.Equal(f.serveCalls, []uint64{1}) {
		t.Errorf("Serve called for %v, want once for coordinator 1 (another member's)", f.serveCalls)
	}

	// The stamped legacy record goes an expiration later; the open
	// transaction's id once its transaction ended.
	f.status[openID] = txn.Committed
	if n, err := sweepTxnIDs(ctx, f, &cache, now+exp, exp, slog.Default()); err != nil || n != 3 {
		t.Fatalf("second sweep: %d expired, %v; want 3 (fresh, legacy, open)", n, err)
	}
	if f.has(legacy) || f.has(open) || f.has(fresh) || !f.has(elsewhere) {
		t.Fatalf("after the second sweep: legacy %v open %v fresh %v elsewhere %v", f.has(legacy), f.has(open), f.has(fresh), f.has(elsewhere))
	}
}

// A save between the sweep's read and its delete (the id used again)
// wins: the compare-and-delete fails, the record stays with the save's
// value, and nothing is counted.
func TestSweepTxnIDsLosesToASave(t *testing.T) {
	ctx := context.Background()
	const now, exp = 10_000_000, 1000
	f := newFakeProducers(1, 0)
	f.put(t, "raced", producerRecord{PID: 1, UsedMs: 1})
	f.beforeDelete = func(tid string) { f.put(t, tid, producerRecord{PID: 1, Epoch: 1, UsedMs: now}) }
	var cache txnProducers
	if n, err := sweepTxnIDs(ctx, f, &cache, now, exp, slog.Default()); err != nil || n != 0 {
		t.Fatalf("sweep: %d expired, %v; want 0", n, err)
	}
	if got := f.record(t, "raced"); got.Epoch != 1 {
		t.Fatalf("record after the race: %+v, want the save's (epoch 1)", got)
	}
}

// A sweep reads every page: more records than a page, all expired.
func TestSweepTxnIDsPages(t *testing.T) {
	f := newFakeProducers(1, 0)
	total := 2*txnExpiryPage + 7
	for i := range total {
		f.put(t, fmt.Sprintf("id-%05d", i), producerRecord{PID: int64(i), UsedMs: 1})
	}
	var cache txnProducers
	n, err := sweepTxnIDs(context.Background(), f, &cache, 10_000, 1000, slog.Default())
	if err != nil || n != total || len(f.recs) != 0 {
		t.Fatalf("sweep: %d expired of %d (%d left), %v", n, total, len(f.recs), err)
	}
}
