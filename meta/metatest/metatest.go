package metatest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakegate/lakegate/meta"
)

// Smallest limits the suite works with: it writes up to MinMaxTxnOps ops in
// one Txn and lets up to MinWatchBufferEvents events queue on a watch.
const (
	MinMaxTxnOps         = 16
	MinWatchBufferEvents = 16
)

// waitMax bounds every wait for an event in the suite. It is a failure
// deadline, not a sleep: a correct store answers in milliseconds.
const waitMax = 30 * time.Second

// Run runs the acceptance suite against the stores newStore returns (a new
// one per subtest).
func Run(t *testing.T, newStore func(t *testing.T) meta.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s meta.Store)
	}{
		{"GetPutDelete", testGetPutDelete},
		{"Values", testValues},
		{"Range", testRange},
		{"RangeReverse", testRangeReverse},
		{"TxnCompare", testTxnCompare},
		{"TxnAtomicity", testTxnAtomicity},
		{"TxnInvalid", testTxnInvalid},
		{"DeletePrefix", testDeletePrefix},
		{"Revisions", testRevisions},
		{"Watch", testWatch},
		{"ValuesOwned", testValuesOwned},
		{"WatchReplay", testWatchReplay},
		{"WatchCancel", testWatchCancel},
		{"TooManyOps", testTooManyOps},
		{"ConcurrentCAS", testConcurrentCAS},
		{"Deadline", testDeadline},
		{"Close", testClose},
		{"LeaseRevoke", testLeaseRevoke},
		{"LeaseExpiry", testLeaseExpiry},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			if n := s.MaxTxnOps(); n < MinMaxTxnOps {
				t.Fatalf("MaxTxnOps() = %d: the suite needs at least %d", n, MinMaxTxnOps)
			}
			tc.fn(t, s)
		})
	}
}

// ctx returns a context for one subtest, canceled at its end.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), waitMax)
	t.Cleanup(cancel)
	return c
}

// txn runs a Txn that must not fail and returns its result.
func txn(t *testing.T, s meta.Store, cmps []meta.Cmp, ops ...meta.Op) (bool, int64) {
	t.Helper()
	ok, rev, err := s.Txn(ctx(t), cmps, ops)
	if err != nil {
		t.Fatalf("Txn(%v, %v): %v", cmps, ops, err)
	}
	return ok, rev
}

// put puts key=value unconditionally and returns the revision.
func put(t *testing.T, s meta.Store, key, value string) int64 {
	t.Helper()
	ok, rev := txn(t, s, nil, meta.Put(key, []byte(value)))
	if !ok {
		t.Fatalf("unconditional put of %q failed its (absent) compares", key)
	}
	return rev
}

// revision returns the current revision (an empty Txn).
func revision(t *testing.T, s meta.Store) int64 {
	t.Helper()
	_, rev := txn(t, s, nil)
	return rev
}

func get(t *testing.T, s meta.Store, key string) (meta.KV, bool) {
	t.Helper()
	kv, found, err := s.Get(ctx(t), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return kv, found
}

func mustGet(t *testing.T, s meta.Store, key string) meta.KV {
	t.Helper()
	kv, found := get(t, s, key)
	if !found {
		t.Fatalf("Get(%q): not found", key)
	}
	return kv
}

func mustAbsent(t *testing.T, s meta.Store, key string) {
	t.Helper()
	if kv, found := get(t, s, key); found {
		t.Fatalf("Get(%q) = %+v, want absent", key, kv)
	}
}

func keysOf(kvs []meta.KV) []string {
	out := make([]string, len(kvs))
	for i, kv := range kvs {
		out[i] = kv.Key
	}
	return out
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func testGetPutDelete(t *testing.T, s meta.Store) {
	mustAbsent(t, s, "k")

	r1 := put(t, s, "k", "v1")
	kv := mustGet(t, s, "k")
	if kv.Key != "k" || string(kv.Value) != "v1" || kv.ModRevision != r1 || kv.CreateRevision != r1 {
		t.Fatalf("after put at %d: %+v", r1, kv)
	}

	r2 := put(t, s, "k", "v2")
	kv = mustGet(t, s, "k")
	if string(kv.Value) != "v2" || kv.ModRevision != r2 || kv.CreateRevision != r1 {
		t.Fatalf("after update at %d (created %d): %+v", r2, r1, kv)
	}

	ok, r3 := txn(t, s, nil, meta.Delete("k"))
	if !ok || r3 <= r2 {
		t.Fatalf("delete: ok=%v rev=%d (previous %d)", ok, r3, r2)
	}
	mustAbsent(t, s, "k")

	// Deleting an absent key is no change: the revision stays.
	if ok, r := txn(t, s, nil, meta.Delete("k")); !ok || r != r3 {
		t.Fatalf("delete of absent key: ok=%v rev=%d, want true %d", ok, r, r3)
	}

	r4 := put(t, s, "k", "v3")
	if kv := mustGet(t, s, "k"); kv.CreateRevision != r4 || kv.ModRevision != r4 {
		t.Fatalf("re-created at %d: %+v", r4, kv)
	}

	if _, _, err := s.Get(ctx(t), ""); !errors.Is(err, meta.ErrInvalid) {
		t.Fatalf("Get(\"\"): %v, want ErrInvalid", err)
	}
}

func testValues(t *testing.T, s meta.Store) {
	// Binary values, the empty value, and ownership of slices.
	bin := []byte{0, 1, 2, 0xff, 0xfe, 0}
	in := bytes.Clone(bin)
	txn(t, s, nil, meta.Put("bin", in), meta.Put("empty", nil))
	in[0] = 42 // the store must not have kept the caller's slice
	kv := mustGet(t, s, "bin")
	if !bytes.Equal(kv.Value, bin) {
		t.Fatalf("binary value: %x, want %x", kv.Value, bin)
	}
	kv.Value[1] = 42 // nor hand out its own
	if kv := mustGet(t, s, "bin"); !bytes.Equal(kv.Value, bin) {
		t.Fatalf("value changed through a returned slice: %x", kv.Value)
	}
	if kv := mustGet(t, s, "empty"); len(kv.Value) != 0 {
		t.Fatalf("empty value: %x", kv.Value)
	}
	big := bytes.Repeat([]byte("x"), 256<<10)
	txn(t, s, nil, meta.Put("big", big))
	if kv := mustGet(t, s, "big"); !bytes.Equal(kv.Value, big) {
		t.Fatalf("256 KiB value: got %d bytes", len(kv.Value))
	}
}

// rangeKeys are written by the range tests: byte order, not UTF-8 or
// numeric order, with a key using the top byte.
var rangeKeys = []string{"a", "a/1", "a/2", "b", "b\x00", "c", "d", "z\xff", "z\xff\xff"}

func putRangeKeys(t *testing.T, s meta.Store) {
	t.Helper()
	ops := make([]meta.Op, len(rangeKeys))
	for i, k := range rangeKeys {
		// Reverse op order: the store orders keys, not writes.
		k = rangeKeys[len(rangeKeys)-1-i]
		ops[i] = meta.Put(k, []byte("v:"+k))
	}
	txn(t, s, nil, ops...)
}

func testRange(t *testing.T, s meta.Store) {
	putRangeKeys(t, s)
	cases := []struct {
		start, end string
		limit      int
		want       []string
	}{
		{"", "", 0, rangeKeys},
		{"", "", -1, rangeKeys},
		{"", "", 2, []string{"a", "a/1"}},
		{"a/", "a0", 0, []string{"a/1", "a/2"}},
		{"b", "c", 0, []string{"b", "b\x00"}},
		{"b\x00", "", 0, []string{"b\x00", "c", "d", "z\xff", "z\xff\xff"}},
		{"c", "", 1, []string{"c"}},
		{"0", "a", 0, []string{}},
		{"e", "z", 0, []string{}},
		{"z\xff", "", 0, []string{"z\xff", "z\xff\xff"}},
		{"c", "c", 0, []string{}},
		{"d", "c", 0, []string{}},
		{"", "b", 0, []string{"a", "a/1", "a/2"}},
	}
	for _, c := range cases {
		kvs, err := s.Range(ctx(t), c.start, c.end, c.limit)
		if err != nil {
			t.Fatalf("Range(%q, %q, %d): %v", c.start, c.end, c.limit, err)
		}
		if got := keysOf(kvs); !equalStrings(got, c.want) {
			t.Errorf("Range(%q, %q, %d) = %q, want %q", c.start, c.end, c.limit, got, c.want)
		}
		for _, kv := range kvs {
			if string(kv.Value) != "v:"+kv.Key || kv.ModRevision <= 0 || kv.CreateRevision <= 0 {
				t.Errorf("Range(%q, %q): bad kv %+v", c.start, c.end, kv)
			}
		}
	}
}

func testRangeReverse(t *testing.T, s meta.Store) {
	putRangeKeys(t, s)
	rev := func(keys ...string) []string {
		out := make([]string, len(keys))
		for i, k := range keys {
			out[len(keys)-1-i] = k
		}
		return out
	}
	cases := []struct {
		start, end string
		limit      int
		want       []string
	}{
		{"", "", 0, rev(rangeKeys...)},
		{"", "", 2, []string{"z\xff\xff", "z\xff"}},
		{"a", "c", 0, []string{"b\x00", "b", "a/2", "a/1", "a"}},
		{"a", "c", 1, []string{"b\x00"}},        // floor lookup: the greatest key < "c"
		{"", "a/2", 1, []string{"a/1"}},         // the greatest key < "a/2"
		{"a/", "a0", 5, []string{"a/2", "a/1"}}, // prefix, limit beyond its size
		{"e", "z", 0, []string{}},
		{"d", "c", 0, []string{}},
	}
	for _, c := range cases {
		kvs, err := s.RangeReverse(ctx(t), c.start, c.end, c.limit)
		if err != nil {
			t.Fatalf("RangeReverse(%q, %q, %d): %v", c.start, c.end, c.limit, err)
		}
		if got := keysOf(kvs); !equalStrings(got, c.want) {
			t.Errorf("RangeReverse(%q, %q, %d) = %q, want %q", c.start, c.end, c.limit, got, c.want)
		}
	}
}

func testTxnCompare(t *testing.T, s meta.Store) {
	// An absent key has ModRevision 0.
	ok, r1 := txn(t, s, []meta.Cmp{{Key: "x", ModRevision: 0}}, meta.Put("x", []byte("1")))
	if !ok {
		t.Fatal("compare absent=0 failed")
	}
	// Create-if-absent loses the second time.
	ok, r := txn(t, s, []meta.Cmp{{Key: "x", ModRevision: 0}}, meta.Put("x", []byte("2")))
	if ok || r != r1 {
		t.Fatalf("second create-if-absent: ok=%v rev=%d, want false %d", ok, r, r1)
	}
	// A compare against a wrong revision fails and applies nothing.
	ok, r = txn(t, s, []meta.Cmp{{Key: "x", ModRevision: r1 + 100}}, meta.Put("x", []byte("3")), meta.Put("y", []byte("3")))
	if ok || r != r1 {
		t.Fatalf("stale compare: ok=%v rev=%d, want false %d", ok, r, r1)
	}
	// An absent key never matches a non-zero revision.
	if ok, _ := txn(t, s, []meta.Cmp{{Key: "nope", ModRevision: r1}}, meta.Put("y", []byte("4"))); ok {
		t.Fatal("compare absent key = non-zero revision held")
	}
	mustAbsent(t, s, "y")
	if kv := mustGet(t, s, "x"); string(kv.Value) != "1" {
		t.Fatalf("x = %q after failed txns, want 1", kv.Value)
	}
	// The right revision wins.
	ok, r2 := txn(t, s, []meta.Cmp{{Key: "x", ModRevision: r1}}, meta.Put("x", []byte("5")))
	if !ok || r2 <= r1 {
		t.Fatalf("compare current revision: ok=%v rev=%d", ok, r2)
	}
	// Several compares: all must hold.
	ok, _ = txn(t, s, []meta.Cmp{{Key: "x", ModRevision: r2}, {Key: "y", ModRevision: 1}}, meta.Put("z", nil))
	if ok {
		t.Fatal("txn with one failing compare of two applied")
	}
	mustAbsent(t, s, "z")
	ok, _ = txn(t, s, []meta.Cmp{{Key: "x", ModRevision: r2}, {Key: "y", ModRevision: 0}}, meta.Put("z", nil))
	if !ok {
		t.Fatal("txn with two holding compares failed")
	}
	// Compares only, no ops: reports the outcome, changes nothing.
	before := revision(t, s)
	if ok, r := txn(t, s, []meta.Cmp{{Key: "x", ModRevision: r2}}); !ok || r != before {
		t.Fatalf("compare-only txn: ok=%v rev=%d, want true %d", ok, r, before)
	}
}

func testTxnAtomicity(t *testing.T, s meta.Store) {
	txn(t, s, nil, meta.Put("old", []byte("o")))
	ok, rev := txn(t, s, []meta.Cmp{{Key: "k1", ModRevision: 0}},
		meta.Put("k1", []byte("1")), meta.Put("k2", []byte("2")), meta.Put("k3", []byte("3")), meta.Delete("old"))
	if !ok {
		t.Fatal("txn failed")
	}
	for _, k := range []string{"k1", "k2", "k3"} {
		if kv := mustGet(t, s, k); kv.ModRevision != rev || kv.CreateRevision != rev {
			t.Fatalf("%s: %+v, want every change at revision %d", k, kv, rev)
		}
	}
	mustAbsent(t, s, "old")
	// A failed compare applies none of the ops.
	ok, _ = txn(t, s, []meta.Cmp{{Key: "k1", ModRevision: 0}},
		meta.Put("n4", nil), meta.Delete("k2"), meta.DeletePrefix("k3"))
	if ok {
		t.Fatal("txn with failing compare succeeded")
	}
	mustAbsent(t, s, "n4")
	mustGet(t, s, "k2")
	mustGet(t, s, "k3")
}

func testTxnInvalid(t *testing.T, s meta.Store) {
	txn(t, s, nil, meta.Put("p/a", nil))
	before := revision(t, s)
	cases := []struct {
		name string
		cmps []meta.Cmp
		ops  []meta.Op
	}{
		{"empty put key", nil, []meta.Op{meta.Put("", nil)}},
		{"empty delete key", nil, []meta.Op{meta.Delete("")}},
		{"empty prefix", nil, []meta.Op{meta.DeletePrefix("")}},
		{"empty compare key", []meta.Cmp{{Key: ""}}, []meta.Op{meta.Put("k", nil)}},
		{"put twice", nil, []meta.Op{meta.Put("k", nil), meta.Put("k", nil)}},
		{"put and delete", nil, []meta.Op{meta.Put("k", nil), meta.Delete("k")}},
		{"delete and put", nil, []meta.Op{meta.Delete("k"), meta.Put("k", nil)}},
		{"put under deleted prefix", nil, []meta.Op{meta.DeletePrefix("p/"), meta.Put("p/b", nil)}},
	}
	for _, c := range cases {
		if _, _, err := s.Txn(ctx(t), c.cmps, c.ops); !errors.Is(err, meta.ErrInvalid) {
			t.Errorf("%s: Txn error %v, want ErrInvalid", c.name, err)
		}
	}
	mustGet(t, s, "p/a")
	mustAbsent(t, s, "k")
	if r := revision(t, s); r != before {
		t.Fatalf("invalid txns moved the revision from %d to %d", before, r)
	}
	// Overlapping deletes are fine.
	if ok, _ := txn(t, s, nil, meta.DeletePrefix("p/"), meta.Delete("p/a"), meta.DeletePrefix("p")); !ok {
		t.Fatal("overlapping deletes failed")
	}
	mustAbsent(t, s, "p/a")
}

func testDeletePrefix(t *testing.T, s meta.Store) {
	txn(t, s, nil,
		meta.Put("p/a", nil), meta.Put("p/b", nil), meta.Put("p/c/d", nil),
		meta.Put("p", nil), meta.Put("pa", nil), meta.Put("q", nil), meta.Put("o", nil))
	before := revision(t, s)
	ok, rev := txn(t, s, nil, meta.DeletePrefix("p/"))
	if !ok || rev <= before {
		t.Fatalf("DeletePrefix: ok=%v rev=%d (before %d)", ok, rev, before)
	}
	kvs, err := s.Range(ctx(t), "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := keysOf(kvs), []string{"o", "p", "pa", "q"}; !equalStrings(got, want) {
		t.Fatalf("after DeletePrefix(p/): %q, want %q", got, want)
	}
	// Nothing under the prefix: no change, no new revision.
	if ok, r := txn(t, s, nil, meta.DeletePrefix("p/")); !ok || r != rev {
		t.Fatalf("empty DeletePrefix: ok=%v rev=%d, want true %d", ok, r, rev)
	}
}

func testRevisions(t *testing.T, s meta.Store) {
	r0 := revision(t, s)
	if r0 <= 0 {
		t.Fatalf("current revision %d, want > 0", r0)
	}
	prev := r0
	for i := range 5 {
		r := put(t, s, "r"+strconv.Itoa(i%2), strconv.Itoa(i))
		if r <= prev {
			t.Fatalf("write %d: revision %d, not above %d", i, r, prev)
		}
		if kv := mustGet(t, s, "r"+strconv.Itoa(i%2)); kv.ModRevision != r {
			t.Fatalf("ModRevision %d, txn revision %d", kv.ModRevision, r)
		}
		if got := revision(t, s); got != r {
			t.Fatalf("empty txn after write at %d reports %d", r, got)
		}
		prev = r
	}
	// A txn of several writes advances the revision once.
	_, r := txn(t, s, nil, meta.Put("r0", nil), meta.Put("r1", nil), meta.Put("r2", nil))
	if a, b := mustGet(t, s, "r0"), mustGet(t, s, "r2"); a.ModRevision != r || b.ModRevision != r {
		t.Fatalf("multi-put at %d: ModRevisions %d, %d", r, a.ModRevision, b.ModRevision)
	}
}

// recv returns the next event, failing the test if the channel closes or
// nothing arrives within waitMax.
func recv(t *testing.T, ch <-chan meta.Event) meta.Event {
	t.Helper()
	timer := time.NewTimer(waitMax)
	defer timer.Stop()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("watch channel closed, want an event")
		}
		return ev
	case <-timer.C:
		t.Fatalf("no watch event within %v", waitMax)
	}
	return meta.Event{}
}

// waitClosed drains ch until it closes, failing after waitMax.
func waitClosed(t *testing.T, ch <-chan meta.Event) {
	t.Helper()
	timer := time.NewTimer(waitMax)
	defer timer.Stop()
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-timer.C:
			t.Fatalf("watch channel not closed within %v", waitMax)
		}
	}
}

type wantEvent struct {
	kind  meta.EventKind
	key   string
	value string
	rev   int64
}

func expectEvents(t *testing.T, ch <-chan meta.Event, want []wantEvent) {
	t.Helper()
	for i, w := range want {
		ev := recv(t, ch)
		ok := ev.Kind == w.kind && ev.KV.Key == w.key && ev.KV.ModRevision == w.rev
		if w.kind == meta.EventPut {
			ok = ok && string(ev.KV.Value) == w.value
		}
		if !ok {
			t.Fatalf("event %d: %v %q=%q @%d, want %v %q=%q @%d", i,
				ev.Kind, ev.KV.Key, ev.KV.Value, ev.KV.ModRevision, w.kind, w.key, w.value, w.rev)
		}
	}
}

// expectNoEvent checks that nothing is queued on ch now. It proves nothing
// about events still in flight; the suite always follows it with a write
// whose event must come first.
func expectNoEvent(t *testing.T, ch <-chan meta.Event) {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if ok {
			t.Fatalf("unexpected event %v %q @%d", ev.Kind, ev.KV.Key, ev.KV.ModRevision)
		}
		t.Fatal("watch channel closed unexpectedly")
	default:
	}
}

func testWatch(t *testing.T, s meta.Store) {
	c := ctx(t)
	txn(t, s, nil, meta.Put("w/before", []byte("b")))
	r0 := revision(t, s)
	ch := s.Watch(c, "w/", r0)
	r1 := put(t, s, "w/a", "1")
	put(t, s, "other/x", "x") // outside the prefix
	put(t, s, "w", "no")      // the prefix itself is not under "w/"
	_, r3 := txn(t, s, nil, meta.Put("w/c", []byte("3")), meta.Put("w/b", []byte("2")))
	_, r4 := txn(t, s, nil, meta.Delete("w/a"))
	_, r5 := txn(t, s, nil, meta.DeletePrefix("w/"))
	r6 := put(t, s, "w/a", "again")
	expectEvents(t, ch, []wantEvent{
		{meta.EventPut, "w/a", "1", r1},
		{meta.EventPut, "w/c", "3", r3}, // op order within a txn
		{meta.EventPut, "w/b", "2", r3},
		{meta.EventDelete, "w/a", "", r4},
		{meta.EventDelete, "w/b", "", r5}, // key order within a DeletePrefix
		{meta.EventDelete, "w/before", "", r5},
		{meta.EventDelete, "w/c", "", r5},
		{meta.EventPut, "w/a", "again", r6},
	})
	expectNoEvent(t, ch)

	// CreateRevision in put events; a watch on every key ("").
	all := s.Watch(c, "", r6)
	r7 := put(t, s, "w/a", "upd")
	r8 := put(t, s, "zz", "z")
	ev := recv(t, all)
	if ev.Kind != meta.EventPut || ev.KV.Key != "w/a" || ev.KV.ModRevision != r7 || ev.KV.CreateRevision != r6 {
		t.Fatalf("update event %+v, want ModRevision %d CreateRevision %d", ev, r7, r6)
	}
	ev = recv(t, all)
	if ev.KV.Key != "zz" || ev.KV.ModRevision != r8 || ev.KV.CreateRevision != r8 {
		t.Fatalf("create event %+v at %d", ev, r8)
	}
	ev = recv(t, ch)
	if ev.KV.Key != "w/a" || ev.KV.ModRevision != r7 {
		t.Fatalf("first watch: %+v, want w/a @%d", ev, r7)
	}
}

// testValuesOwned: values handed out (Get, Range, watch events) are the
// caller's to change, and values passed to a Txn are not kept: an
// in-process store must copy what it shares (one event goes to every
// watch of its key).
func testValuesOwned(t *testing.T, s meta.Store) {
	c := ctx(t)
	r0 := revision(t, s)
	w1 := s.Watch(c, "own/", r0)
	w2 := s.Watch(c, "own/", r0)
	v := []byte("value")
	txn(t, s, nil, meta.Put("own/k", v))
	copy(v, "XXXXX") // the caller's buffer, reused after the Txn returned
	e1, e2 := recv(t, w1), recv(t, w2)
	copy(e1.KV.Value, "11111")
	if string(e2.KV.Value) != "value" {
		t.Fatalf("second watch's event value %q after the first watch's was changed, want %q", e2.KV.Value, "value")
	}
	kv := mustGet(t, s, "own/k")
	if string(kv.Value) != "value" {
		t.Fatalf("Get after the events were changed: %q, want %q", kv.Value, "value")
	}
	copy(kv.Value, "22222")
	kvs, err := s.Range(c, "own/", "own0", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(kvs) != 1 || string(kvs[0].Value) != "value" {
		t.Fatalf("Range after a Get result was changed: %+v, want own/k=value", kvs)
	}
}

func testWatchReplay(t *testing.T, s meta.Store) {
	c := ctx(t)
	r0 := revision(t, s)
	r1 := put(t, s, "h/a", "1")
	r2 := put(t, s, "h/b", "2")
	_, r3 := txn(t, s, nil, meta.Delete("h/a"))
	// From before all three: full replay, then live events.
	ch := s.Watch(c, "h/", r0)
	expectEvents(t, ch, []wantEvent{
		{meta.EventPut, "h/a", "1", r1},
		{meta.EventPut, "h/b", "2", r2},
		{meta.EventDelete, "h/a", "", r3},
	})
	// From the middle: only what came after r1.
	mid := s.Watch(c, "h/", r1)
	expectEvents(t, mid, []wantEvent{
		{meta.EventPut, "h/b", "2", r2},
		{meta.EventDelete, "h/a", "", r3},
	})
	r4 := put(t, s, "h/c", "4")
	expectEvents(t, ch, []wantEvent{{meta.EventPut, "h/c", "4", r4}})
	expectEvents(t, mid, []wantEvent{{meta.EventPut, "h/c", "4", r4}})
	// From the current revision: nothing old.
	now := s.Watch(c, "h/", r4)
	r5 := put(t, s, "h/d", "5")
	expectEvents(t, now, []wantEvent{{meta.EventPut, "h/d", "5", r5}})
}

func testWatchCancel(t *testing.T, s meta.Store) {
	wctx, cancel := context.WithCancel(ctx(t))
	ch := s.Watch(wctx, "c/", revision(t, s))
	r := put(t, s, "c/a", "1")
	expectEvents(t, ch, []wantEvent{{meta.EventPut, "c/a", "1", r}})
	cancel()
	waitClosed(t, ch)
	// A watch on an already-ended context is closed at once.
	waitClosed(t, s.Watch(wctx, "c/", 0))
}

func testTooManyOps(t *testing.T, s meta.Store) {
	n := s.MaxTxnOps()
	if n < 1 {
		t.Fatalf("MaxTxnOps() = %d", n)
	}
	ops := make([]meta.Op, n+1)
	cmps := make([]meta.Cmp, n+1)
	for i := range ops {
		k := fmt.Sprintf("m/%05d", i)
		ops[i] = meta.Put(k, []byte("v"))
		cmps[i] = meta.Cmp{Key: k}
	}
	if _, _, err := s.Txn(ctx(t), nil, ops); !errors.Is(err, meta.ErrTooManyOps) {
		t.Fatalf("%d ops: %v, want ErrTooManyOps", n+1, err)
	}
	if _, _, err := s.Txn(ctx(t), cmps, ops[:1]); !errors.Is(err, meta.ErrTooManyOps) {
		t.Fatalf("%d compares: %v, want ErrTooManyOps", n+1, err)
	}
	// No store takes a 16 MiB request (etcd's limit is 1.5 MiB by default,
	// 8 MiB on lakegate's embedded member): the caller must split it too.
	huge := make([]byte, 16<<20)
	if _, _, err := s.Txn(ctx(t), nil, []meta.Op{meta.Put("m/00000", huge)}); !errors.Is(err, meta.ErrTooManyOps) {
		t.Fatalf("16 MiB txn: %v, want ErrTooManyOps", err)
	}
	mustAbsent(t, s, "m/00000")
	// Exactly MaxTxnOps compares and ops is fine.
	if ok, _ := txn(t, s, cmps[:n], ops[:n]...); !ok {
		t.Fatalf("txn of %d compares and ops failed", n)
	}
	kvs, err := s.Range(ctx(t), "m/", "m0", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(kvs) != n {
		t.Fatalf("%d keys after a txn of %d puts", len(kvs), n)
	}
}

// testConcurrentCAS is a linearizability smoke test: increments by
// read-compare-swap from several goroutines lose no update.
func testConcurrentCAS(t *testing.T, s meta.Store) {
	const (
		workers       = 8
		incrementsPer = 25
	)
	c := ctx(t)
	var (
		wg       sync.WaitGroup
		conflict atomic.Int64
		errOnce  sync.Once
		firstErr error
	)
	fail := func(err error) { errOnce.Do(func() { firstErr = err }) }
	for range workers {
		wg.Go(func() {
			for range incrementsPer {
				for {
					kv, found, err := s.Get(c, "counter")
					if err != nil {
						fail(err)
						return
					}
					n := 0
					if found {
						if n, err = strconv.Atoi(string(kv.Value)); err != nil {
							fail(err)
							return
						}
					}
					ok, _, err := s.Txn(c, []meta.Cmp{{Key: "counter", ModRevision: kv.ModRevision}},
						[]meta.Op{meta.Put("counter", []byte(strconv.Itoa(n+1)))})
					if err != nil {
						fail(err)
						return
					}
					if ok {
						break
					}
					conflict.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	kv := mustGet(t, s, "counter")
	if got, want := string(kv.Value), strconv.Itoa(workers*incrementsPer); got != want {
		t.Fatalf("counter = %s after %d increments (%d conflicts retried)", got, workers*incrementsPer, conflict.Load())
	}
	t.Logf("%d increments, %d compare failures retried", workers*incrementsPer, conflict.Load())
}

func testDeadline(t *testing.T, s meta.Store) {
	past, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	if _, _, err := s.Get(past, "k"); !errors.Is(err, meta.ErrUnavailable) {
		t.Errorf("Get with a passed deadline: %v, want ErrUnavailable", err)
	}
	if _, err := s.Range(past, "", "", 0); !errors.Is(err, meta.ErrUnavailable) {
		t.Errorf("Range with a passed deadline: %v, want ErrUnavailable", err)
	}
	if _, _, err := s.Txn(past, nil, []meta.Op{meta.Put("k", nil)}); !errors.Is(err, meta.ErrUnavailable) {
		t.Errorf("Txn with a passed deadline: %v, want ErrUnavailable", err)
	}
	canceled, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if _, _, err := s.Get(canceled, "k"); !errors.Is(err, context.Canceled) {
		t.Errorf("Get with a canceled context: %v, want context.Canceled", err)
	}
}

func testClose(t *testing.T, s meta.Store) {
	c := ctx(t)
	put(t, s, "k", "v")
	ch := s.Watch(c, "", revision(t, s))
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	waitClosed(t, ch)
	if _, _, err := s.Get(c, "k"); !errors.Is(err, meta.ErrClosed) {
		t.Errorf("Get after Close: %v, want ErrClosed", err)
	}
	if _, err := s.Range(c, "", "", 0); !errors.Is(err, meta.ErrClosed) {
		t.Errorf("Range after Close: %v, want ErrClosed", err)
	}
	if _, _, err := s.Txn(c, nil, []meta.Op{meta.Put("k", nil)}); !errors.Is(err, meta.ErrClosed) {
		t.Errorf("Txn after Close: %v, want ErrClosed", err)
	}
	waitClosed(t, s.Watch(c, "", 0))
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// testLeaseRevoke: keys put with a lease go when it is revoked, all at one
// revision, and nothing else does; a revoked lease can neither be kept
// alive nor used.
func testLeaseRevoke(t *testing.T, s meta.Store) {
	c := ctx(t)
	id, err := s.Grant(c, 10*time.Second)
	if err != nil {
		t.Fatalf("Grant: %v", err)
	}
	r0 := revision(t, s)
	w := s.Watch(c, "l/", r0)
	txn(t, s, nil, meta.PutWithLease("l/a", []byte("a"), id), meta.PutWithLease("l/b", []byte("b"), id), meta.Put("l/c", []byte("c")))
	// A put without a lease detaches a key.
	txn(t, s, nil, meta.PutWithLease("l/d", []byte("d"), id))
	txn(t, s, nil, meta.Put("l/d", []byte("d2")))
	if ttl, err := s.KeepAlive(c, id); err != nil || ttl <= 0 {
		t.Fatalf("KeepAlive: %v %v", ttl, err)
	}
	if err := s.Revoke(c, id); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	rev := r0 + 4
	expectEvents(t, w, []wantEvent{
		{meta.EventPut, "l/a", "a", r0 + 1}, {meta.EventPut, "l/b", "b", r0 + 1}, {meta.EventPut, "l/c", "c", r0 + 1},
		{meta.EventPut, "l/d", "d", r0 + 2}, {meta.EventPut, "l/d", "d2", r0 + 3},
		{meta.EventDelete, "l/a", "", rev}, {meta.EventDelete, "l/b", "", rev},
	})
	mustAbsent(t, s, "l/a")
	mustGet(t, s, "l/c")
	mustGet(t, s, "l/d")
	if _, err := s.KeepAlive(c, id); !errors.Is(err, meta.ErrLeaseExpired) {
		t.Fatalf("KeepAlive of a revoked lease: %v, want ErrLeaseExpired", err)
	}
	if err := s.Revoke(c, id); err != nil {
		t.Fatalf("second Revoke: %v", err)
	}
	_, _, err = s.Txn(c, nil, []meta.Op{meta.Put("l/e", []byte("e")), meta.PutWithLease("l/f", []byte("f"), id)})
	if !errors.Is(err, meta.ErrLeaseExpired) {
		t.Fatalf("put with a revoked lease: %v, want ErrLeaseExpired", err)
	}
	mustAbsent(t, s, "l/e")
}

// testLeaseExpiry: a lease nobody keeps alive expires on its own (within
// its TTL plus the store's granularity) and takes its keys with it.
func testLeaseExpiry(t *testing.T, s meta.Store) {
	c := ctx(t)
	id, err := s.Grant(c, time.Second)
	if err != nil {
		t.Fatalf("Grant: %v", err)
	}
	r0 := revision(t, s)
	w := s.Watch(c, "x/", r0)
	txn(t, s, nil, meta.PutWithLease("x/k", []byte("v"), id))
	ev := recv(t, w)
	if ev.Kind != meta.EventPut {
		t.Fatalf("first event %v, want the put", ev.Kind)
	}
	ev = recv(t, w) // waits (up to waitMax) for the expiry
	if ev.Kind != meta.EventDelete || ev.KV.Key != "x/k" {
		t.Fatalf("event %v %q, want the expiry's delete of x/k", ev.Kind, ev.KV.Key)
	}
	if _, err := s.KeepAlive(c, id); !errors.Is(err, meta.ErrLeaseExpired) {
		t.Fatalf("KeepAlive of an expired lease: %v, want ErrLeaseExpired", err)
	}
}
