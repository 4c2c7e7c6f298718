package kafka

import (
	"strconv"
	"testing"
)

// The cache of transactional.id records holds at most maxTxnProducers
// entries: a hit keeps its entry; a new id past the bound starts the
// cache over, and the entries it makes are unloaded (txnState reads the
// record from the store). The e2e side, a hostile client past the bound
// while a producer commits: e2e/kafka_txn_bounds_test.go.
func TestTxnProducersBound(t *testing.T) {
	var tp txnProducers
	first := tp.entry("id-0")
	first.loaded = true
	for i := 1; i < maxTxnProducers; i++ {
		tp.entry("id-" + strconv.Itoa(i)).loaded = true
	}
	if n := len(tp.mu.m); n != maxTxnProducers {
		t.Fatalf("%d entries, want %d", n, maxTxnProducers)
	}
	if tp.entry("id-0") != first {
		t.Fatal("a cached id got a new entry")
	}
	e := tp.entry("one-too-many")
	if n := len(tp.mu.m); n != 1 {
		t.Fatalf("%d entries after the bound, want 1 (the cache starts over)", n)
	}
	if e.loaded {
		t.Fatal("a new entry is loaded")
	}
	again := tp.entry("id-0")
	if again == first || again.loaded {
		t.Fatalf("an id dropped by the cache: same entry %v, loaded %v; want a new, unloaded one", again == first, again.loaded)
	}
}
