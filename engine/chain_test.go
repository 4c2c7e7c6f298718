package engine

// Append chains (chain.go, lakestream.AppendChain): the appends of a chain
// that commit are a prefix of the chain.
//
//	go test ./engine -run 'TestAppendChain' -v [-props.seed N]
//
// TestAppendChain builds the sequence that lost acknowledged messages of
// deduplicated topics (docs/dedup.md, "Order and failures") exactly: an
// append's WAL object fails — between PUT and commit, or because its
// commit transactions fail until CommitTimeout — while a later object
// holding later appends of the same log is PUT and waits for its commit.
// TestAppendChainProperties appends pipelined chains from two engines to
// shared logs under random store faults and checks the prefix property on
// what the logs hold.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
	"github.com/lakegate/lakegate/objstore"
)

func TestAppendChain(t *testing.T) {
	for _, fault := range []string{"put", "commit"} {
		t.Run(fault, func(t *testing.T) { testAppendChain(t, fault) })
	}
}

type chainResult struct {
	h   lakestream.EntryHeader
	err error
}

func testAppendChain(t *testing.T, fault string) {
	// fault "commit": every commit transaction naming the held object fails
	// (etcd unavailable), so its flush fails at CommitTimeout.
	var failObject atomic.Value
	ms := meta.NewMem(meta.MemOptions{Fault: func(c meta.Call) meta.Fault {
		obj, _ := failObject.Load().(string)
		if c.Method != meta.MethodTxn || obj == "" {
			return meta.FaultNone
		}
		for _, op := range c.Ops {
			if bytes.Contains(op.Value, []byte(obj)) {
				return meta.FaultUnavailable
			}
		}
		return meta.FaultNone
	}})
	st, err := objstore.Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close(); ms.Close() })

	// The first object's commit waits until release; then it "crashes"
	// (fault "put") or its commit transactions fail (fault "commit").
	held := make(chan string, 1)
	release := make(chan struct{})
	var first atomic.Bool
	const flushBytes = 1024
	opts := Options{Linger: time.Hour, FlushBytes: flushBytes, CommitTimeout: 500 * time.Millisecond, Logger: quietLogger}
	opts.hooks.afterPut = func(object string) error {
		if !first.CompareAndSwap(false, true) {
			return nil
		}
		held <- object
		<-release
		if fault == "put" {
			return errors.New("injected crash between PUT and commit")
		}
		failObject.Store(object)
		return nil
	}
	e, err := New(st, ms, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	ctx := ctxT(t)
	la, lb := e.logMust(t, 1), e.logMust(t, 2)
	async := func(l *logHandle, p []byte, opts ...lakestream.AppendOption) chan chainResult {
		ch := make(chan chainResult, 1)
		if err := l.AppendAsync(ctx, 1, p, func(h lakestream.EntryHeader, err error) { ch <- chainResult{h, err} }, opts...); err != nil {
			ch <- chainResult{err: fmt.Errorf("AppendAsync: %w", err)}
		}
		return ch
	}
	big := func(s string) []byte { return append([]byte(s), make([]byte, flushBytes)...) } // cuts its flush

	chain := la.NewAppendChain()
	r0 := async(la, big("a0"), lakestream.WithAppendChain(chain))
	<-held // a0's object is PUT; its commit waits
	// One object: a1 and a2 of the chain, u (same log, no chain), b (another log).
	r1 := async(la, []byte("a1"), lakestream.WithAppendChain(chain))
	r2 := async(la, []byte("a2"), lakestream.WithAppendChain(chain))
	ru := async(la, []byte("u"))
	rb := async(lb, big("b"))
	close(release)

	got0 := <-r0
	if got0.err == nil || errors.Is(got0.err, lakestream.ErrChainBroken) {
		t.Fatalf("a0 (its object failed): %v, want a failure of its own", got0.err)
	}
	for i, r := range []chan chainResult{r1, r2} {
		if got := <-r; !errors.Is(got.err, lakestream.ErrChainBroken) || !strings.Contains(got.err.Error(), got0.err.Error()) {
			t.Errorf("a%d (after a0 in the chain, in a later object): %v, want ErrChainBroken wrapping a0's failure", i+1, got.err)
		}
	}
	if got := <-ru; !errors.Is(got.err, lakestream.ErrUnavailable) || errors.Is(got.err, lakestream.ErrChainBroken) {
		t.Errorf("u (no chain, sharing the chunk of a broken chain): %v, want ErrUnavailable", got.err)
	}
	if got := <-rb; got.err != nil || got.h.Offset != 0 {
		t.Errorf("b (another log, same object): %+v, want committed at 0", got)
	}
	if err := chain.Err(); !errors.Is(err, lakestream.ErrChainBroken) {
		t.Errorf("chain.Err() = %v, want ErrChainBroken", err)
	}
	// Later appends of the broken chain are refused at once.
	err = la.AppendAsync(ctx, 1, []byte("a3"), func(lakestream.EntryHeader, error) { t.Error("done called for a refused append") },
		lakestream.WithAppendChain(chain))
	if !errors.Is(err, lakestream.ErrChainBroken) {
		t.Errorf("AppendAsync on a broken chain: %v", err)
	}
	if _, err := la.Append(ctx, 1, []byte("a3"), lakestream.WithAppendChain(chain)); !errors.Is(err, lakestream.ErrChainBroken) {
		t.Errorf("Append on a broken chain: %v", err)
	}

	// A new chain goes on; refusals of its own arguments do not break it.
	chain2 := la.NewAppendChain()
	if _, err := lb.Append(ctx, 1, []byte("x"), lakestream.WithAppendChain(chain2)); !errors.Is(err, lakestream.ErrInvalidArgument) {
		t.Errorf("a chain of log 1 used on log 2: %v", err)
	}
	if _, err := la.Append(ctx, 0, []byte("x"), lakestream.WithAppendChain(chain2)); !errors.Is(err, lakestream.ErrInvalidArgument) {
		t.Errorf("0 records: %v", err)
	}
	for i, p := range []string{"c0", "c1"} {
		if h, err := la.Append(ctx, 1, big(p), lakestream.WithAppendChain(chain2)); err != nil || h.Offset != int64(i) {
			t.Fatalf("%s on a new chain: %+v %v, want offset %d", p, h, err, i)
		}
	}
	es, err := la.ReadEntries(ctx, 0, 100, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var stored []string
	for _, en := range es {
		stored = append(stored, string(en.Payload[:2]))
	}
	if fmt.Sprint(stored) != "[c0 c1]" {
		t.Errorf("log 1 holds %q, want [c0 c1]", stored)
	}
	if n := e.Metrics().ChainRefusals; n != 3 {
		t.Errorf("ChainRefusals %d, want 3 (a1, a2, u)", n)
	}
}

// chainAppend is one append of TestAppendChainProperties.
type chainAppend struct {
	chain   string // engine, goroutine and chain number
	k       int    // place in the chain
	log     lakestream.LogID
	payload string
	err     error
	h       lakestream.EntryHeader
	done    bool
}

func TestAppendChainProperties(t *testing.T) {
	for _, seed := range []int64{*propsSeed, *propsSeed + 1} {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runChainProperties(t, seed) })
	}
}

// runChainProperties: producers append pipelined (up to 8 in flight) on a
// chain of a random log, as a partition actor does; after a failure they
// wait for the chain's appends in flight, then start a new chain. Logs are
// shared, so chunks mix chains and unchained appends. Faults: PUTs fail or
// lose their replies, transactions fail or lose theirs, writers "crash"
// between PUT and commit. Checked: per chain, the appends the logs hold are
// a prefix of the chain; an acknowledged append is held once, at its
// offset; a failed one (not ErrIndeterminate) is not held.
func runChainProperties(t *testing.T, seed int64) {
	const (
		nLogs      = 3
		producers  = 3 // per engine
		window     = 8
		perProduce = 300
	)
	rnd := &lockedRand{r: rand.New(rand.NewSource(seed))}
	var chaos atomic.Bool // on once the engines are open
	ms := meta.NewMem(meta.MemOptions{Fault: func(c meta.Call) meta.Fault {
		if !chaos.Load() || c.Method != meta.MethodTxn {
			return meta.FaultNone
		}
		switch p := rnd.float(); {
		case p < 0.02:
			return meta.FaultUnavailable
		case p < 0.04:
			return meta.FaultLostReply
		}
		return meta.FaultNone
	}})
	bucket, err := objstore.Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bucket.Close(); ms.Close() })
	var faulty []*objstore.Faulty
	newEngine := func(name string, s int64) *Engine {
		f := objstore.NewFaulty(bucket, s)
		faulty = append(faulty, f)
		f.FailRandomly(objstore.OpPutIfAbsent, 0.03)
		f.LoseReplyRandomly(objstore.OpPutIfAbsent, 0.03)
		opts := Options{NodeID: name, Linger: time.Millisecond, MaxInflightFlushes: 3, FlushBytes: 512, Logger: quietLogger}
		opts.hooks.afterPut = func(string) error {
			if chaos.Load() && rnd.float() < 0.04 {
				return errors.New("injected crash between PUT and commit")
			}
			return nil
		}
		e, err := New(f, ms, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	}
	engines := []*Engine{newEngine("a", seed*10+1), newEngine("b", seed*10+2)}
	ctx := ctxT(t)
	chaos.Store(true)

	var (
		mu  sync.Mutex
		all []*chainAppend
	)
	var wg sync.WaitGroup
	for ei, e := range engines {
		for g := range producers {
			wg.Go(func() {
				var inflight sync.WaitGroup
				slots := make(chan struct{}, window)
				for c, i := 0, 0; i < perProduce; c++ {
					l := e.logMust(t, lakestream.LogID(rnd.intn(nLogs)))
					chain := l.NewAppendChain()
					var broken atomic.Bool
					for k := 0; i < perProduce && !broken.Load(); k, i = k+1, i+1 {
						slots <- struct{}{}
						a := &chainAppend{chain: fmt.Sprintf("e%d-g%d-c%d", ei, g, c), k: k, log: l.id}
						a.payload = fmt.Sprintf("%s-%d-%s", a.chain, k, make([]byte, rnd.intn(100)))
						mu.Lock()
						all = append(all, a)
						mu.Unlock()
						inflight.Add(1)
						finish := func(h lakestream.EntryHeader, err error) {
							a.h, a.err, a.done = h, err, true
							if err != nil {
								broken.Store(true)
							}
							<-slots
							inflight.Done()
						}
						if err := l.AppendAsync(ctx, 1, []byte(a.payload), finish, lakestream.WithAppendChain(chain)); err != nil {
							finish(lakestream.EntryHeader{}, err)
						}
					}
					inflight.Wait() // the old chain's appends have ended: start a new one
				}
			})
		}
	}
	wg.Wait()
	chaos.Store(false)
	for _, f := range faulty {
		f.Reset()
	}

	// What the logs hold.
	held := map[string][]lakestream.EntryHeader{}
	for id := lakestream.LogID(0); id < nLogs; id++ {
		l := engines[0].logMust(t, id)
		h, err := l.refresh(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ents, err := l.readEntries(ctx, h, h.First, 1<<30, 1<<40)
		if err != nil {
			t.Fatal(err)
		}
		for _, en := range ents {
			held[string(en.Payload)] = append(held[string(en.Payload)], en.EntryHeader)
		}
	}
	var acks, failures, unknowns, refusals int
	byChain := map[string][]*chainAppend{}
	for _, a := range all {
		if !a.done {
			t.Fatalf("append %s-%d never answered", a.chain, a.k)
		}
		byChain[a.chain] = append(byChain[a.chain], a)
		n := len(held[a.payload])
		switch {
		case a.err == nil:
			acks++
			if n != 1 || held[a.payload][0].Offset != a.h.Offset {
				t.Errorf("acknowledged %s-%d (log %d offset %d) held %v", a.chain, a.k, a.log, a.h.Offset, held[a.payload])
			}
		case errors.Is(a.err, lakestream.ErrIndeterminate):
			unknowns++
			if n > 1 {
				t.Errorf("%s-%d (outcome unknown) held %d times", a.chain, a.k, n)
			}
		default:
			failures++
			if errors.Is(a.err, lakestream.ErrChainBroken) {
				refusals++
			}
			if n > 0 {
				t.Errorf("%s-%d failed (%v) but is held", a.chain, a.k, a.err)
			}
		}
	}
	for name, as := range byChain {
		gap := -1
		for _, a := range as {
			switch n := len(held[a.payload]); {
			case n == 0 && gap < 0:
				gap = a.k
			case n > 0 && gap >= 0:
				t.Errorf("chain %s: append %d is held after append %d is not (%v)", name, a.k, gap, as[gap].err)
			}
		}
	}
	t.Logf("%d chains: %d appends acknowledged, %d failed (%d refused by a broken chain), %d unknown; metrics %+v",
		len(byChain), acks, failures, refusals, unknowns, engines[0].Metrics())
	// Refusals depend on timing (an append queued behind one that
	// failed); failures and restarted chains are what the faults must cause.
	if failures == 0 || len(byChain) <= len(engines)*producers {
		t.Errorf("the run did not break chains")
	}
}
