package actors

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/lakegate/lakegate/lakestream"
)

// Acknowledgements of entries the machine does not hold in memory: after a
// restart (or on the node a consumer moved to) a client sends the acks it
// queued while disconnected before the entries are delivered again. An ack
// without ack_set must cover every record of the entry, whose record count
// only the log knows (issue #16).

// ackResult splits the actions of an Ack or OnResolved into the AckDone
// answers (by token) and the rest.
func ackResult(acts []Action) (done map[uint64]error, order []uint64, rest []Action) {
	done = map[uint64]error{}
	for _, a := range acts {
		if d, ok := a.(AckDone); ok {
			done[d.Token] = d.Err
			order = append(order, d.Token)
			continue
		}
		rest = append(rest, a)
	}
	return done, order, rest
}

func resolveOf(t *testing.T, acts []Action) ResolveEntries {
	t.Helper()
	var rs []ResolveEntries
	for _, a := range acts {
		if r, ok := a.(ResolveEntries); ok {
			rs = append(rs, r)
		}
	}
	if len(rs) != 1 {
		t.Fatalf("want one ResolveEntries, got %v", acts)
	}
	return rs[0]
}

// answer builds the driver's answers for r from a log made of entries.
func answer(r ResolveEntries, es []lakestream.Entry) []Resolved {
	var out []Resolved
	for _, off := range r.Offsets {
		res := Resolved{Offset: off, Err: lakestream.ErrOffsetOutOfRange}
		for _, e := range es {
			if e.Contains(off) {
				res = Resolved{Offset: off, Header: e.EntryHeader}
			}
		}
		out = append(out, res)
	}
	return out
}

func ackedRecords(a *fakeAcks, upTo int64) []int64 {
	var out []int64
	for o := int64(0); o < upTo; o++ {
		if a.IsIndividuallyDeleted(o) {
			out = append(out, o)
		}
	}
	return out
}

func TestAckOfEntryNotInMemoryAcksEveryRecord(t *testing.T) {
	es := entries(4, 3, 2) // offsets 0..3, 4..6, 7..8
	for _, tc := range []struct {
		name string
		kind AckKind
		id   AckID
		want []int64 // acknowledged records
	}{
		{"individual", AckIndividual, AckID{EntryOffset: 4}, []int64{4, 5, 6}},
		{"cumulative", AckCumulative, AckID{EntryOffset: 4}, []int64{0, 1, 2, 3, 4, 5, 6}},
		// The Go client acks "the entry before" an incomplete batch as
		// entryId-1: a record inside the previous entry.
		{"cumulative entryId-1", AckCumulative, AckID{EntryOffset: 6}, []int64{0, 1, 2, 3, 4, 5, 6}},
		// Batch-index ack: records 0 and 2 of the entry at 0 acknowledged
		// (bits 1 and 3 stay set); nothing beyond the entry, whatever the
		// zero bits past its last record say.
		{"ack set", AckIndividual, AckID{EntryOffset: 0, AckSet: []int64{0b1010}}, []int64{0, 2}},
		{"cumulative ack set", AckCumulative, AckID{EntryOffset: 4, AckSet: []int64{0b110}}, []int64{0, 1, 2, 3, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			acks := newFakeAcks()
			// A machine that just started (nothing delivered yet).
			s := NewSubscription(SubscriptionConfig{Type: SubShared}, acks, 0)
			must(t)(s.AddConsumer(1, SubShared))
			done, _, rest := ackResult(s.Ack(7, 1, tc.kind, []AckID{tc.id}))
			if len(done) != 0 {
				t.Fatalf("ack of an unknown entry answered before the lookup: %v", done)
			}
			if got := ackedRecords(acks, 9); len(got) != 0 {
				t.Fatalf("acknowledged %v before the lookup", got)
			}
			r := resolveOf(t, rest)
			if !slices.Equal(r.Offsets, []int64{tc.id.EntryOffset}) {
				t.Fatalf("lookup of %v", r.Offsets)
			}
			done, _, _ = ackResult(s.OnResolved(r.Gen, answer(r, es)))
			if err, ok := done[7]; !ok || err != nil {
				t.Fatalf("after the lookup: %v", done)
			}
			if got := ackedRecords(acks, 9); !slices.Equal(got, tc.want) {
				t.Fatalf("acknowledged %v, want %v", got, tc.want)
			}
			if s.AcksWaiting() != 0 || len(s.headers) != 0 {
				t.Fatalf("state left behind: %d waiting, %d headers", s.AcksWaiting(), len(s.headers))
			}
		})
	}
}

// An entry acknowledged before its redelivery is not redelivered; one
// acknowledged while the lookup is in flight is forgotten once it applies.
func TestAckBeforeRedeliverySkipsTheEntry(t *testing.T) {
	es := entries(3, 3, 3)
	acks := newFakeAcks()
	s := NewSubscription(SubscriptionConfig{Type: SubExclusive}, acks, 0)
	must(t)(s.AddConsumer(1, SubExclusive))
	_, _, rest := ackResult(s.Ack(1, 1, AckIndividual, []AckID{{EntryOffset: 0}, {EntryOffset: 3}}))
	r := resolveOf(t, rest)
	// The read of the tail races the lookup and wins: entries 0 and 3 are
	// delivered again (duplicates, allowed) and pend.
	_, reads := split(must(t)(s.Flow(1, 100)))
	d, _ := split(s.OnRead(reads[0].(ReadTail).Gen, true, es))
	if len(d) != 3 || d[0].AckSet != nil {
		t.Fatalf("delivered %+v", d)
	}
	done, _, _ := ackResult(s.OnResolved(r.Gen, answer(r, es)))
	if done[1] != nil || s.PendingEntries() != 1 {
		t.Fatalf("done %v, pending %d (want only the entry at 6)", done, s.PendingEntries())
	}
	if acks.MarkDeleteOffset() != 5 {
		t.Fatalf("mark-delete %d, want 5", acks.MarkDeleteOffset())
	}
	// After a restart the same acks come first: nothing of those entries
	// goes out again, and the remaining one goes whole.
	acks2 := newFakeAcks()
	s2 := NewSubscription(SubscriptionConfig{Type: SubExclusive}, acks2, 0)
	must(t)(s2.AddConsumer(1, SubExclusive))
	_, _, rest = ackResult(s2.Ack(1, 1, AckIndividual, []AckID{{EntryOffset: 0}, {EntryOffset: 3}}))
	r = resolveOf(t, rest)
	ackResult(s2.OnResolved(r.Gen, answer(r, es)))
	_, reads = split(must(t)(s2.Flow(1, 100)))
	d, _ = split(s2.OnRead(reads[0].(ReadTail).Gen, true, es))
	if len(d) != 1 || d[0].Entry.Offset != 6 || d[0].AckSet != nil {
		t.Fatalf("delivered %+v, want the entry at 6 alone, whole", d)
	}
}

// Acknowledgements apply in arrival order: one for an entry the machine
// knows waits behind one that needs a lookup; answers come in order.
func TestAcksQueueBehindALookup(t *testing.T) {
	es := entries(2, 2, 2)
	acks := newFakeAcks()
	s := NewSubscription(SubscriptionConfig{Type: SubShared}, acks, 0)
	must(t)(s.AddConsumer(1, SubShared))
	must(t)(s.AddConsumer(2, SubShared))
	_, reads := split(must(t)(s.Flow(1, 100)))
	d, _ := split(s.OnRead(reads[0].(ReadTail).Gen, true, es[2:])) // the entry at 4 is known (pending)
	if len(d) != 1 {
		t.Fatalf("delivered %v", d)
	}
	_, _, rest := ackResult(s.Ack(1, 2, AckIndividual, []AckID{{EntryOffset: 0}}))
	r := resolveOf(t, rest)
	done, _, rest := ackResult(s.Ack(2, 1, AckIndividual, []AckID{{EntryOffset: 4}}))
	if len(done) != 0 || len(rest) != 0 {
		t.Fatalf("ack behind a lookup: answered %v, actions %v", done, rest)
	}
	if acks.IsIndividuallyDeleted(4) {
		t.Fatal("applied before the ack that came first")
	}
	// A stale answer changes nothing.
	if acts := s.OnResolved(r.Gen+100, answer(r, es)); acts != nil {
		t.Fatalf("stale answer: %v", acts)
	}
	done, order, _ := ackResult(s.OnResolved(r.Gen, answer(r, es)))
	if !slices.Equal(order, []uint64{1, 2}) || done[1] != nil || done[2] != nil {
		t.Fatalf("answers %v (%v)", order, done)
	}
	if got := ackedRecords(acks, 6); !slices.Equal(got, []int64{0, 1, 4, 5}) {
		t.Fatalf("acknowledged %v", got)
	}
	if s.PendingEntries() != 0 {
		t.Fatalf("pending %d", s.PendingEntries())
	}
}

// A failed lookup is asked again on Poke; a trimmed entry acks the named
// record; an offset beyond the log is refused (NotAllowed for the client).
func TestAckLookupFailuresAndBadIDs(t *testing.T) {
	acks := newFakeAcks()
	s := NewSubscription(SubscriptionConfig{Type: SubShared}, acks, 0)
	must(t)(s.AddConsumer(1, SubShared))
	_, _, rest := ackResult(s.Ack(1, 1, AckIndividual, []AckID{{EntryOffset: 2}, {EntryOffset: 50}}))
	r := resolveOf(t, rest)
	s.OnResolveFailed(r.Gen)
	r2 := resolveOf(t, s.Poke())
	if r2.Gen == r.Gen || !slices.Equal(r2.Offsets, []int64{2, 50}) {
		t.Fatalf("retry %+v after %+v", r2, r)
	}
	done, _, _ := ackResult(s.OnResolved(r2.Gen, []Resolved{
		{Offset: 2, Err: fmt.Errorf("gone: %w", lakestream.ErrOffsetTrimmed)},
		{Offset: 50, Err: lakestream.ErrOffsetOutOfRange},
	}))
	if err := done[1]; !errors.Is(err, lakestream.ErrInvalidArgument) || !errors.Is(err, lakestream.ErrOffsetOutOfRange) {
		t.Fatalf("answer %v", err)
	}
	if got := ackedRecords(acks, 60); !slices.Equal(got, []int64{2}) {
		t.Fatalf("acknowledged %v", got)
	}
}

// The queue of acknowledgements waiting for lookups is bounded; Close
// answers those still waiting.
func TestAckQueueBoundAndClose(t *testing.T) {
	s := NewSubscription(SubscriptionConfig{Type: SubShared, AckQueueMaxIDs: 3}, newFakeAcks(), 0)
	must(t)(s.AddConsumer(1, SubShared))
	ackResult(s.Ack(1, 1, AckIndividual, []AckID{{EntryOffset: 0}, {EntryOffset: 1}}))
	if done, _, _ := ackResult(s.Ack(2, 1, AckIndividual, []AckID{{EntryOffset: 2}})); len(done) != 0 {
		t.Fatalf("within the bound: %v", done)
	}
	done, _, _ := ackResult(s.Ack(3, 1, AckIndividual, []AckID{{EntryOffset: 3}}))
	if !errors.Is(done[3], ErrAckQueueFull) {
		t.Fatalf("beyond the bound: %v", done)
	}
	if done, _, _ := ackResult(s.Ack(4, 9, AckIndividual, nil)); !errors.Is(done[4], ErrUnknownConsumer) {
		t.Fatalf("unknown consumer: %v", done)
	}
	done, order, _ := ackResult(s.Close())
	if !slices.Equal(order, []uint64{1, 2}) || !errors.Is(done[1], ErrSubscriptionClosed) {
		t.Fatalf("close answered %v %v", order, done)
	}
	if done, _, _ := ackResult(s.Ack(5, 1, AckIndividual, nil)); !errors.Is(done[5], ErrSubscriptionClosed) {
		t.Fatalf("after close: %v", done)
	}
}

// ResolveNow supersedes the lookup in flight and covers every waiting ack.
func TestResolveNow(t *testing.T) {
	es := entries(2, 2, 2)
	acks := newFakeAcks()
	s := NewSubscription(SubscriptionConfig{Type: SubShared, ResolveMaxOffsets: 1}, acks, 0)
	must(t)(s.AddConsumer(1, SubShared))
	_, _, rest := ackResult(s.Ack(1, 1, AckIndividual, []AckID{{EntryOffset: 0}, {EntryOffset: 2}}))
	inFlight := resolveOf(t, rest)
	if len(inFlight.Offsets) != 1 {
		t.Fatalf("lookup bound: %v", inFlight.Offsets)
	}
	now, ok := s.ResolveNow()
	if !ok || !slices.Equal(now.Offsets, []int64{0, 2}) {
		t.Fatalf("ResolveNow %+v %v", now, ok)
	}
	if acts := s.OnResolved(inFlight.Gen, answer(inFlight, es)); acts != nil {
		t.Fatalf("superseded lookup answered: %v", acts)
	}
	done, _, _ := ackResult(s.OnResolved(now.Gen, answer(now, es)))
	if err, ok := done[1]; !ok || err != nil {
		t.Fatalf("done %v", done)
	}
	if _, ok := s.ResolveNow(); ok {
		t.Fatal("nothing should wait")
	}
	if got := ackedRecords(acks, 6); !slices.Equal(got, []int64{0, 1, 2, 3}) {
		t.Fatalf("acknowledged %v", got)
	}
}

// Key_Shared after a restart: an entry acknowledged (by the client's queued
// acks) before it is delivered again must not hold its key. Before the fix
// its first record alone was acknowledged, the entry went out with an
// ack_set, the Go client never acknowledged the rest, and when the key
// moved to another consumer it waited for that ack forever.
func TestKeySharedAckedEntryDoesNotHoldItsKey(t *testing.T) {
	keys := []string{"a", "a", "a"}
	es := keyedEntries(t, keys...)
	for i := range es { // batches of 3 records: offsets 0, 3, 6
		es[i].Offset, es[i].Records = int64(3*i), 3
	}
	acks := newFakeAcks()
	s := NewSubscription(SubscriptionConfig{Type: SubKeyShared}, acks, 0)
	must(t)(s.AddKeySharedConsumer(1, KeySharedPolicy{}, ConsumerMeta{Name: "c1"}))
	// The client acknowledges the first entry before it is redelivered.
	_, _, rest := ackResult(s.Ack(1, 1, AckIndividual, []AckID{{EntryOffset: 0}}))
	r := resolveOf(t, rest)
	ackResult(s.OnResolved(r.Gen, answer(r, es)))
	_, reads := split(must(t)(s.Flow(1, 1000)))
	d, _ := split(s.OnRead(reads[0].(ReadTail).Gen, true, es))
	if len(d) != 2 || d[0].Entry.Offset != 3 || d[0].AckSet != nil {
		t.Fatalf("delivered %+v, want the entries at 3 and 6 whole", d)
	}
	// Consumer 1 acknowledges what it got: the key is free again.
	ackNow(t, s, 1, AckIndividual, []AckID{{EntryOffset: 3}, {EntryOffset: 6}})
	if len(s.held) != 0 {
		t.Fatalf("keys held after every entry was acknowledged: %v", s.held)
	}
}

// TestKeySharedLeaveReleasesKeys: entries held by a consumer that leaves go
// to the key's new owner, in order, at once.
func TestKeySharedLeaveReleasesKeys(t *testing.T) {
	es := keyedEntries(t, "a", "b", "a", "b")
	s := NewSubscription(SubscriptionConfig{Type: SubKeyShared}, newFakeAcks(), 0)
	must(t)(s.AddKeySharedConsumer(1, KeySharedPolicy{}, ConsumerMeta{Name: "c1"}))
	_, reads := split(must(t)(s.Flow(1, 100)))
	d, _ := split(s.OnRead(reads[0].(ReadTail).Gen, true, es))
	if len(d) != 4 {
		t.Fatalf("delivered %v", d)
	}
	must(t)(s.AddKeySharedConsumer(2, KeySharedPolicy{}, ConsumerMeta{Name: "c2"}))
	must(t)(s.Flow(2, 100))
	acts := s.RemoveConsumer(1)
	var rr *ReadReplay
	for _, a := range acts {
		if r, ok := a.(ReadReplay); ok {
			rr = &r
		}
	}
	if rr == nil || !slices.Equal(rr.Offsets, []int64{0, 1, 2, 3}) {
		t.Fatalf("replay after the leave: %v", acts)
	}
	d, _ = split(s.OnRead(rr.Gen, false, es))
	if len(d) != 4 {
		t.Fatalf("redelivered %v", d)
	}
	for i, x := range d {
		if x.ConsumerID != 2 || x.Entry.Offset != int64(i) {
			t.Fatalf("redelivery %d: %+v", i, x)
		}
	}
}

// TestKeySharedHashesFollowConsumerNames: AUTO_SPLIT hashes depend on the
// consumers' names, not on the ids the gateway numbers them with, so the
// same consumers get the same keys back after a restart; namesakes still
// share the space.
func TestKeySharedHashesFollowConsumerNames(t *testing.T) {
	var a, b keySelector
	for i, name := range []string{"x", "y", "z"} {
		if err := a.add(uint64(i+1), name, KeySharedPolicy{}); err != nil {
			t.Fatal(err)
		}
		if err := b.add(uint64(i+100), name, KeySharedPolicy{}); err != nil {
			t.Fatal(err)
		}
	}
	for h := int32(0); h < KeyHashRange; h += 7 {
		oa, _ := a.owner(h)
		ob, _ := b.owner(h)
		if ob != oa+99 {
			t.Fatalf("hash %d: owner %d, then %d after renumbering", h, oa, ob)
		}
	}
	var same keySelector
	for id := uint64(1); id <= 2; id++ {
		if err := same.add(id, "w", KeySharedPolicy{}); err != nil {
			t.Fatal(err)
		}
	}
	counts := map[uint64]int{}
	for h := int32(0); h < KeyHashRange; h++ {
		o, _ := same.owner(h)
		counts[o]++
	}
	if counts[1] == 0 || counts[2] == 0 {
		t.Fatalf("namesakes: %v", counts)
	}
}

// Answers of lookups are kept only while a waiting ack names them.
func TestLookupAnswersAreDropped(t *testing.T) {
	es := entries(2, 2, 2)
	s := NewSubscription(SubscriptionConfig{Type: SubShared, ResolveMaxOffsets: 1}, newFakeAcks(), 0)
	must(t)(s.AddConsumer(1, SubShared))
	_, _, rest := ackResult(s.Ack(1, 1, AckIndividual, []AckID{{EntryOffset: 0}}))
	r := resolveOf(t, rest)
	ackResult(s.Ack(2, 1, AckIndividual, []AckID{{EntryOffset: 4}}))
	done, _, rest := ackResult(s.OnResolved(r.Gen, answer(r, es)))
	if len(done) != 1 || len(s.headers) != 0 {
		t.Fatalf("answered %v; %d answers kept, want none (the waiting ack names another entry)", done, len(s.headers))
	}
	r = resolveOf(t, rest)
	if !slices.Equal(r.Offsets, []int64{4}) {
		t.Fatalf("next lookup %v", r.Offsets)
	}
	if done, _, _ := ackResult(s.OnResolved(r.Gen, answer(r, es))); len(done) != 1 || done[2] != nil || s.AcksWaiting() != 0 {
		t.Fatalf("answered %v, %d waiting", done, s.AcksWaiting())
	}
}

func TestUnackedRecords(t *testing.T) {
	i := SubscriptionInfo{MarkDeleteOffset: 4, AckedRanges: [][2]int64{{7, 9}, {12, 20}}}
	for _, c := range []struct{ first, next, want int64 }{
		{0, 15, 5},  // [5,15) less [7,9) and [12,15)
		{8, 15, 3},  // trimmed below 8: [8,15) less [8,9) and [12,15)
		{0, 25, 10}, // [5,25) less 2 and 8
		{0, 5, 0},   // nothing above mark-delete
		{30, 40, 10},
	} {
		if got := i.UnackedRecords(c.first, c.next); got != c.want {
			t.Errorf("UnackedRecords(%d, %d) = %d, want %d", c.first, c.next, got, c.want)
		}
	}
}
