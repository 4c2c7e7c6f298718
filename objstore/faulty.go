package objstore

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"strings"
	"sync"
)

// ErrInjected is the error of every fault a Faulty store injects. Tests
// compare with errors.Is; the engine must treat it like any backend failure.
var ErrInjected = errors.New("objstore: injected fault")

// Op is a set of Store operations, for choosing which ones a Faulty store
// disturbs. Combine with |.
type Op uint8

// Operations.
const (
	OpPutIfAbsent Op = 1 << iota
	OpPut
	OpGet
	OpGetRange
	OpDelete
	OpList

	OpWrites = OpPutIfAbsent | OpPut | OpDelete
	OpReads  = OpGet | OpGetRange | OpList
	OpAll    = OpWrites | OpReads
)

var opNames = [...]string{"put-if-absent", "put", "get", "get-range", "delete", "list"}

func (o Op) String() string {
	var names []string
	for i, n := range opNames {
		if o&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, "|")
}

// Hook is called by a Faulty store at the start of every operation, before
// any fault is decided, with the single operation and its key (the prefix for
// List). It may block, e.g. on a channel the test controls, to hold an
// operation in flight; it should then also watch ctx. A non-nil error it
// returns becomes the operation's error and the operation is not performed.
type Hook func(ctx context.Context, op Op, key string) error

// Faulty is a Store for tests that wraps another and injects faults:
//
//   - FailNext: the next n operations of a kind fail before reaching the
//     inner store (nothing happened);
//   - LoseReplyNext: the next n operations reach the inner store and take
//     effect, then report ErrInjected (the outcome is ambiguous to the caller,
//     like a PUT whose response was lost);
//   - FailRandomly / LoseReplyRandomly: each operation of a kind does so with
//     a probability, drawn from a generator seeded by NewFaulty's seed, so a
//     run with the same seed and the same sequence of operations injects the
//     same faults;
//   - SetHook: a function called before every operation (latency, ordering).
//
// Counted rules (…Next) are consulted in the order they were added and take
// precedence over the probabilities. Safe for concurrent use.
type Faulty struct {
	inner Store
	// mu guards the fields of the struct; it is never held while calling
	// the inner store or the hook.
	mu struct {
		sync.Mutex
		rng      *rand.Rand
		rules    []faultRule
		fail     [len(opNames)]float64 // probability of failing before, per op
		lose     [len(opNames)]float64 // probability of losing the reply, per op
		hook     Hook
		injected int
	}
}

type faultRule struct {
	ops   Op
	left  int
	after bool
}

// NewFaulty wraps inner; seed fixes the random decisions.
func NewFaulty(inner Store, seed int64) *Faulty {
	f := &Faulty{inner: inner}
	f.mu.rng = rand.New(rand.NewPCG(uint64(seed), 0x6c616b6567617465))
	return f
}

// FailNext makes the next n operations in ops fail with ErrInjected without
// reaching the inner store.
func (f *Faulty) FailNext(ops Op, n int) { f.addRule(ops, n, false) }

// LoseReplyNext makes the next n operations in ops reach the inner store,
// then return ErrInjected whatever their outcome.
func (f *Faulty) LoseReplyNext(ops Op, n int) { f.addRule(ops, n, true) }

func (f *Faulty) addRule(ops Op, n int, after bool) {
	if n <= 0 || ops&OpAll == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.rules = append(f.mu.rules, faultRule{ops: ops & OpAll, left: n, after: after})
}

// FailRandomly makes each operation in ops fail before reaching the inner
// store with probability p (0 turns it off). It replaces the previous
// probability of those operations.
func (f *Faulty) FailRandomly(ops Op, p float64) { f.setProb(ops, p, false) }

// LoseReplyRandomly makes each operation in ops take effect and then report
// ErrInjected with probability p (0 turns it off).
func (f *Faulty) LoseReplyRandomly(ops Op, p float64) { f.setProb(ops, p, true) }

func (f *Faulty) setProb(ops Op, p float64, after bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range opNames {
		if ops&(1<<i) == 0 {
			continue
		}
		if after {
			f.mu.lose[i] = p
		} else {
			f.mu.fail[i] = p
		}
	}
}

// SetHook sets the function called before every operation (nil removes it).
func (f *Faulty) SetHook(h Hook) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.hook = h
}

// Reset removes every rule, probability and the hook. The random generator
// keeps its position.
func (f *Faulty) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.rules = nil
	f.mu.fail = [len(opNames)]float64{}
	f.mu.lose = [len(opNames)]float64{}
	f.mu.hook = nil
}

// Injected returns how many faults have been injected so far (hook errors
// not included).
func (f *Faulty) Injected() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.injected
}

// Unwrap returns the wrapped store.
func (f *Faulty) Unwrap() Store { return f.inner }

type faultKind int

const (
	faultNone faultKind = iota
	faultBefore
	faultAfter
)

// begin runs the hook and decides the fault for one operation.
func (f *Faulty) begin(ctx context.Context, op Op, key string) (faultKind, error) {
	f.mu.Lock()
	hook := f.mu.hook
	f.mu.Unlock()
	if hook != nil {
		if err := hook(ctx, op, key); err != nil {
			return faultNone, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	kind := f.decideLocked(op)
	if kind != faultNone {
		f.mu.injected++
	}
	return kind, nil
}

func (f *Faulty) decideLocked(op Op) faultKind {
	for i := range f.mu.rules {
		r := &f.mu.rules[i]
		if r.ops&op == 0 || r.left == 0 {
			continue
		}
		after := r.after
		r.left--
		if r.left == 0 {
			f.mu.rules = append(f.mu.rules[:i], f.mu.rules[i+1:]...)
		}
		if after {
			return faultAfter
		}
		return faultBefore
	}
	i := bits.TrailingZeros8(uint8(op))
	if p := f.mu.fail[i]; p > 0 && f.mu.rng.Float64() < p {
		return faultBefore
	}
	if p := f.mu.lose[i]; p > 0 && f.mu.rng.Float64() < p {
		return faultAfter
	}
	return faultNone
}

func injected(op Op, key string, k faultKind) error {
	if k == faultAfter {
		return fmt.Errorf("%w: %s %q: reply lost after the operation", ErrInjected, op, key)
	}
	return fmt.Errorf("%w: %s %q", ErrInjected, op, key)
}

func (f *Faulty) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	k, err := f.begin(ctx, OpPutIfAbsent, key)
	if err != nil {
		return err
	}
	if k == faultBefore {
		return injected(OpPutIfAbsent, key, k)
	}
	err = f.inner.PutIfAbsent(ctx, key, data)
	if k == faultAfter {
		return injected(OpPutIfAbsent, key, k)
	}
	return err
}

func (f *Faulty) Put(ctx context.Context, key string, data []byte) error {
	k, err := f.begin(ctx, OpPut, key)
	if err != nil {
		return err
	}
	if k == faultBefore {
		return injected(OpPut, key, k)
	}
	err = f.inner.Put(ctx, key, data)
	if k == faultAfter {
		return injected(OpPut, key, k)
	}
	return err
}

func (f *Faulty) Get(ctx context.Context, key string) ([]byte, error) {
	k, err := f.begin(ctx, OpGet, key)
	if err != nil {
		return nil, err
	}
	if k == faultBefore {
		return nil, injected(OpGet, key, k)
	}
	b, err := f.inner.Get(ctx, key)
	if k == faultAfter {
		return nil, injected(OpGet, key, k)
	}
	return b, err
}

func (f *Faulty) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	k, err := f.begin(ctx, OpGetRange, key)
	if err != nil {
		return nil, err
	}
	if k == faultBefore {
		return nil, injected(OpGetRange, key, k)
	}
	b, err := f.inner.GetRange(ctx, key, offset, length)
	if k == faultAfter {
		return nil, injected(OpGetRange, key, k)
	}
	return b, err
}

func (f *Faulty) Delete(ctx context.Context, key string) error {
	k, err := f.begin(ctx, OpDelete, key)
	if err != nil {
		return err
	}
	if k == faultBefore {
		return injected(OpDelete, key, k)
	}
	err = f.inner.Delete(ctx, key)
	if k == faultAfter {
		return injected(OpDelete, key, k)
	}
	return err
}

// List with a lost reply calls fn for every object, then returns ErrInjected.
func (f *Faulty) List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	k, err := f.begin(ctx, OpList, prefix)
	if err != nil {
		return err
	}
	if k == faultBefore {
		return injected(OpList, prefix, k)
	}
	err = f.inner.List(ctx, prefix, fn)
	if k == faultAfter {
		return injected(OpList, prefix, k)
	}
	return err
}

func (f *Faulty) Close() error { return f.inner.Close() }
