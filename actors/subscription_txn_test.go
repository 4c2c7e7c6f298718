package actors

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/lakegate/lakegate/lakestream"
)

// Acknowledgements in transactions (subscription_txn.go): pending acks
// hide their records from dispatch without moving the cursor; commit
// applies them, abort redelivers them; conflicts and bounds as Pulsar's.

var (
	txnA = TxnID{Most: 1, Least: 1}
	txnB = TxnID{Most: 1, Least: 2}
)

// txnLog is the log the entry lookups of ackTxn are answered from.
var txnLog []lakestream.Entry

// ackTxn acknowledges ids in txn for consumer id; the machine must answer
// at once, or after one lookup of entries (answered from txnLog). It
// returns the answer and the other actions.
func ackTxn(t *testing.T, s *Subscription, id uint64, txn TxnID, kind AckKind, ids []AckID) (error, []Action) {
	t.Helper()
	tokens++
	done, _, rest := ackResult(s.AckTxn(tokens, id, txn, kind, ids))
	if _, ok := done[tokens]; !ok && len(rest) == 1 {
		if r, isLookup := rest[0].(ResolveEntries); isLookup {
			done, _, rest = ackResult(s.OnResolved(r.Gen, answer(r, txnLog)))
		}
	}
	err, ok := done[tokens]
	if !ok {
		t.Fatalf("ack in %s of %v not answered: %v", txn, ids, rest)
	}
	return err, rest
}

// mustAckTxn is ackTxn that must succeed.
func mustAckTxn(t *testing.T, s *Subscription, id uint64, txn TxnID, kind AckKind, ids []AckID) []Action {
	t.Helper()
	err, rest := ackTxn(t, s, id, txn, kind, ids)
	if err != nil {
		t.Fatalf("ack in %s of %v: %v", txn, ids, err)
	}
	return rest
}

func entryIDs(offs ...int64) []AckID {
	out := make([]AckID, 0, len(offs))
	for _, o := range offs {
		out = append(out, AckID{EntryOffset: o})
	}
	return out
}

// deliverAll attaches consumer 1 with permits and delivers es to it.
func deliverAll(t *testing.T, s *Subscription, typ SubType, es []lakestream.Entry) []Deliver {
	t.Helper()
	txnLog = es
	must(t)(s.AddConsumer(1, typ))
	_, reads := split(must(t)(s.Flow(1, 1<<30)))
	d, _ := split(s.OnRead(reads[0].(ReadTail).Gen, true, es))
	if len(d) != len(es) {
		t.Fatalf("delivered %d of %d entries", len(d), len(es))
	}
	return d
}

// replayOf returns the ReadReplay among acts (nil when none).
func replayOf(acts []Action) *ReadReplay {
	for _, a := range acts {
		if r, ok := a.(ReadReplay); ok {
			return &r
		}
	}
	return nil
}

// A record pending in a transaction is not redelivered when its consumer
// leaves nor when it asks for redelivery, and no longer counts as
// unacknowledged; the cursor does not move.
func TestTxnAckHidesFromRedelivery(t *testing.T) {
	for _, how := range []string{"consumer leaves", "redeliver"} {
		t.Run(how, func(t *testing.T) {
			es := entries(1, 1, 1)
			acks := newFakeAcks()
			s := NewSubscription(SubscriptionConfig{Type: SubShared}, acks, 0)
			deliverAll(t, s, SubShared, es)
			mustAckTxn(t, s, 1, txnA, AckIndividual, entryIDs(1))
			if acks.MarkDeleteOffset() != -1 || acks.IsIndividuallyDeleted(1) {
				t.Fatal("an ack in a transaction moved the cursor")
			}
			if n := s.UnackedRecords(); n != 2 {
				t.Fatalf("%d unacknowledged records, want 2", n)
			}
			var acts []Action
			if how == "redeliver" {
				acts = must(t)(s.Redeliver(1, nil))
			} else {
				must(t)(s.AddConsumer(2, SubShared))
				must(t)(s.Flow(2, 100))
				acts = s.RemoveConsumer(1)
			}
			r := replayOf(acts)
			if r == nil || !slices.Equal(r.Offsets, []int64{0, 2}) {
				t.Fatalf("redelivery %v, want entries 0 and 2", acts)
			}
			d, _ := split(s.OnRead(r.Gen, false, []lakestream.Entry{es[0], es[2]}))
			if got := offsetsOf(d); !slices.Equal(got, []int64{0, 2}) {
				t.Fatalf("redelivered %v", got)
			}
			// Read again from the log (a rewind): still not delivered.
			_, reads := split(s.Rewind(0))
			d, _ = split(s.OnRead(reads[0].(ReadTail).Gen, true, es))
			if got := offsetsOf(d); !slices.Equal(got, []int64{0, 2}) {
				t.Fatalf("delivered %v after a rewind, want 0 and 2", got)
			}
		})
	}
}

// Commit applies the pending acks as acknowledgements (mark-delete moves);
// a cumulative ack in a transaction on Exclusive commits as a cumulative
// ack would.
func TestTxnCommitApplies(t *testing.T) {
	es := entries(2, 1, 1)
	acks := newFakeAcks()
	s := NewSubscription(SubscriptionConfig{Type: SubShared}, acks, 0)
	deliverAll(t, s, SubShared, es)
	mustAckTxn(t, s, 1, txnA, AckIndividual, entryIDs(0, 2))
	if rs, cum := s.TxnAcks(txnA); !slices.Equal(rs, []AckRange{{0, 3}}) || cum {
		t.Fatalf("pending %v %v", rs, cum)
	}
	if !slices.Equal(s.PendingTxns(), []TxnID{txnA}) || s.PendingAckRecords() != 3 {
		t.Fatalf("pending txns %v, records %d", s.PendingTxns(), s.PendingAckRecords())
	}
	if _, err := s.EndTxn(txnA, true); err != nil {
		t.Fatal(err)
	}
	if md := acks.MarkDeleteOffset(); md != 2 {
		t.Fatalf("mark-delete %d after commit, want 2", md)
	}
	if len(s.PendingTxns()) != 0 || len(s.txnHeld) != 0 || s.PendingEntries() != 1 || len(s.redelivered) != 0 {
		t.Fatalf("left behind: txns %v, held %v, %d pending", s.PendingTxns(), s.txnHeld, s.PendingEntries())
	}
	if acts, err := s.EndTxn(txnA, true); err != nil || len(acts) != 0 {
		t.Fatalf("unknown transaction: %v %v", acts, err)
	}

	acks = newFakeAcks()
	s = NewSubscription(SubscriptionConfig{Type: SubExclusive}, acks, 0)
	deliverAll(t, s, SubExclusive, es)
	mustAckTxn(t, s, 1, txnA, AckCumulative, entryIDs(2))
	if acks.MarkDeleteOffset() != -1 || s.PendingEntries() != 1 {
		t.Fatalf("mark-delete %d, %d pending", acks.MarkDeleteOffset(), s.PendingEntries())
	}
	if rs, cum := s.TxnAcks(txnA); !slices.Equal(rs, []AckRange{{0, 3}}) || !cum {
		t.Fatalf("pending %v %v", rs, cum)
	}
	if _, err := s.EndTxn(txnA, true); err != nil {
		t.Fatal(err)
	}
	if md := acks.MarkDeleteOffset(); md != 2 {
		t.Fatalf("mark-delete %d after commit, want 2", md)
	}
}

// Abort redelivers what the transaction held, redelivery count
// incremented (kept from before the transaction).
func TestTxnAbortRedelivers(t *testing.T) {
	es := entries(1, 1, 1)
	acks := newFakeAcks()
	s := NewSubscription(SubscriptionConfig{Type: SubShared}, acks, 0)
	deliverAll(t, s, SubShared, es)
	r := replayOf(must(t)(s.Redeliver(1, []int64{1})))
	d, _ := split(s.OnRead(r.Gen, false, es[1:2]))
	if len(d) != 1 || d[0].RedeliveryCount != 1 {
		t.Fatalf("redelivered %+v", d)
	}
	mustAckTxn(t, s, 1, txnA, AckIndividual, entryIDs(1))
	if s.PendingEntries() != 2 {
		t.Fatalf("%d pending entries, want 2", s.PendingEntries())
	}
	acts, err := s.EndTxn(txnA, false)
	if err != nil {
		t.Fatal(err)
	}
	if r = replayOf(acts); r == nil || !slices.Equal(r.Offsets, []int64{1}) {
		t.Fatalf("after abort: %v", acts)
	}
	d, _ = split(s.OnRead(r.Gen, false, es[1:2]))
	if len(d) != 1 || d[0].Entry.Offset != 1 || d[0].RedeliveryCount != 2 {
		t.Fatalf("redelivered %+v, want entry 1 with count 2", d)
	}
	if acks.IsIndividuallyDeleted(1) || len(s.PendingTxns()) != 0 {
		t.Fatal("abort acknowledged or kept the transaction")
	}

	// A cumulative ack aborted on Exclusive: every entry it covered.
	s = NewSubscription(SubscriptionConfig{Type: SubExclusive}, newFakeAcks(), 0)
	deliverAll(t, s, SubExclusive, es)
	mustAckTxn(t, s, 1, txnA, AckCumulative, entryIDs(1))
	acts, _ = s.EndTxn(txnA, false)
	if r = replayOf(acts); r == nil || !slices.Equal(r.Offsets, []int64{0, 1}) {
		t.Fatalf("after abort: %v", acts)
	}
}

func TestTxnConflicts(t *testing.T) {
	es := entries(1, 1, 1, 1)
	acks := newFakeAcks()
	s := NewSubscription(SubscriptionConfig{Type: SubShared}, acks, 0)
	deliverAll(t, s, SubShared, es)

	// Two transactions, one message.
	mustAckTxn(t, s, 1, txnA, AckIndividual, entryIDs(0))
	if err, _ := ackTxn(t, s, 1, txnB, AckIndividual, entryIDs(3, 0)); !errors.Is(err, ErrTxnConflict) {
		t.Fatalf("second transaction: %v, want ErrTxnConflict", err)
	}
	if rs, _ := s.TxnAcks(txnB); rs != nil || s.PendingEntries() != 3 {
		t.Fatalf("a refused ack left %v pending, %d entries out", rs, s.PendingEntries())
	}
	mustAckTxn(t, s, 1, txnA, AckIndividual, entryIDs(0)) // the same transaction again: a no-op

	// A message acknowledged already.
	ackNow(t, s, 1, AckIndividual, entryIDs(1))
	if err, _ := ackTxn(t, s, 1, txnB, AckIndividual, entryIDs(1)); !errors.Is(err, ErrTxnConflict) {
		t.Fatalf("ack in a transaction of an acknowledged message: %v", err)
	}

	// A plain ack of a pending message is applied (as Pulsar does); the
	// transaction's abort does not redeliver it.
	mustAckTxn(t, s, 1, txnB, AckIndividual, entryIDs(2))
	ackNow(t, s, 1, AckIndividual, entryIDs(2))
	if !acks.IsIndividuallyDeleted(2) {
		t.Fatal("plain ack of a pending message not applied")
	}
	acts, _ := s.EndTxn(txnB, false)
	if r := replayOf(acts); r != nil {
		t.Fatalf("abort redelivers an acknowledged message: %v", r.Offsets)
	}

	// Cumulative in a transaction on Shared and Key_Shared: refused.
	for _, typ := range []SubType{SubShared, SubKeyShared} {
		s := NewSubscription(SubscriptionConfig{Type: typ}, newFakeAcks(), 0)
		must(t)(s.addConsumer(1, typ, KeySharedPolicy{}, ConsumerMeta{Name: "c"}))
		err, _ := ackTxn(t, s, 1, txnA, AckCumulative, entryIDs(0))
		if !errors.Is(err, lakestream.ErrInvalidArgument) || errors.Is(err, ErrTxnConflict) {
			t.Fatalf("%s: %v, want ErrInvalidArgument", typ, err)
		}
	}

	// Exclusive: one cumulative ack pending at a time; the same
	// transaction moves it up, not down.
	acks = newFakeAcks()
	s = NewSubscription(SubscriptionConfig{Type: SubExclusive}, acks, 0)
	deliverAll(t, s, SubExclusive, es)
	mustAckTxn(t, s, 1, txnA, AckCumulative, entryIDs(1))
	if err, _ := ackTxn(t, s, 1, txnB, AckCumulative, entryIDs(3)); !errors.Is(err, ErrTxnConflict) {
		t.Fatalf("second cumulative transaction: %v", err)
	}
	if err, _ := ackTxn(t, s, 1, txnA, AckCumulative, entryIDs(0)); !errors.Is(err, ErrTxnConflict) {
		t.Fatalf("cumulative below the pending one: %v", err)
	}
	mustAckTxn(t, s, 1, txnA, AckCumulative, entryIDs(2))
	if rs, cum := s.TxnAcks(txnA); !slices.Equal(rs, []AckRange{{0, 3}}) || !cum {
		t.Fatalf("extended to %v %v", rs, cum)
	}
	// Another transaction's individual ack inside it conflicts too.
	if err, _ := ackTxn(t, s, 1, txnB, AckIndividual, entryIDs(1)); !errors.Is(err, ErrTxnConflict) {
		t.Fatalf("individual ack inside a pending cumulative one: %v", err)
	}
	if _, err := s.EndTxn(txnA, true); err != nil {
		t.Fatal(err)
	}
	// At or below mark-delete.
	if err, _ := ackTxn(t, s, 1, txnB, AckCumulative, entryIDs(2)); !errors.Is(err, ErrTxnConflict) {
		t.Fatalf("cumulative at mark-delete: %v", err)
	}
	mustAckTxn(t, s, 1, txnB, AckCumulative, entryIDs(3))
}

// Batch-index acks in transactions work per record: two transactions may
// hold different records of one batch, not the same; the batch goes out
// again with only its free records.
func TestTxnBatchIndexAcks(t *testing.T) {
	es := entries(4)
	acks := newFakeAcks()
	s := NewSubscription(SubscriptionConfig{Type: SubShared}, acks, 0)
	deliverAll(t, s, SubShared, es)
	// bit i set = record i unacknowledged.
	mustAckTxn(t, s, 1, txnA, AckIndividual, []AckID{{EntryOffset: 0, AckSet: []int64{0b1100}}}) // records 0, 1
	if err, _ := ackTxn(t, s, 1, txnB, AckIndividual, []AckID{{EntryOffset: 0, AckSet: []int64{0b1101}}}); !errors.Is(err, ErrTxnConflict) {
		t.Fatalf("record 1 in two transactions: %v", err)
	}
	mustAckTxn(t, s, 1, txnB, AckIndividual, []AckID{{EntryOffset: 0, AckSet: []int64{0b1011}}}) // record 2
	if n := s.UnackedRecords(); n != 1 {
		t.Fatalf("%d unacknowledged records, want 1", n)
	}
	r := replayOf(must(t)(s.Redeliver(1, nil)))
	d, _ := split(s.OnRead(r.Gen, false, es))
	if len(d) != 1 || !slices.Equal(d[0].AckSet, []int64{0b1000}) {
		t.Fatalf("redelivered %+v, want record 3 alone", d)
	}
	if _, err := s.EndTxn(txnA, true); err != nil {
		t.Fatal(err)
	}
	if got := ackedRecords(acks, 4); !slices.Equal(got, []int64{0, 1}) {
		t.Fatalf("acknowledged %v after commit", got)
	}
	// A batch-index ack in a transaction of an acknowledged record.
	if err, _ := ackTxn(t, s, 1, txnA, AckIndividual, []AckID{{EntryOffset: 0, AckSet: []int64{0b1110}}}); !errors.Is(err, ErrTxnConflict) {
		t.Fatalf("acknowledged record: %v", err)
	}
	acts, _ := s.EndTxn(txnB, false)
	r = replayOf(acts)
	if r == nil {
		t.Fatalf("abort: %v", acts)
	}
	d, _ = split(s.OnRead(r.Gen, false, es))
	if len(d) != 1 || !slices.Equal(d[0].AckSet, []int64{0b1100}) || d[0].RedeliveryCount != 2 {
		t.Fatalf("after abort %+v, want records 2 and 3, count 2", d)
	}
}

// A new owner restores the pending acks before it dispatches: they stay
// hidden, and commit or abort them there.
func TestTxnRestoreAfterOwnerMove(t *testing.T) {
	es := entries(1, 2, 1)
	acks := newFakeAcks()
	old := NewSubscription(SubscriptionConfig{Type: SubShared}, acks, 0)
	deliverAll(t, old, SubShared, es)
	mustAckTxn(t, old, 1, txnA, AckIndividual, entryIDs(1))
	saved, cum := old.TxnAcks(txnA)

	for _, commit := range []bool{true, false} {
		s := NewSubscription(SubscriptionConfig{Type: SubShared}, acks, 0)
		if _, err := s.RestoreTxnAcks(txnA, saved, cum); err != nil {
			t.Fatal(err)
		}
		d := func() []Deliver {
			must(t)(s.AddConsumer(1, SubShared))
			_, reads := split(must(t)(s.Flow(1, 1000)))
			d, _ := split(s.OnRead(reads[0].(ReadTail).Gen, true, es))
			return d
		}()
		if got := offsetsOf(d); !slices.Equal(got, []int64{0, 3}) {
			t.Fatalf("new owner delivered %v, want 0 and 3", got)
		}
		acts, err := s.EndTxn(txnA, commit)
		if err != nil {
			t.Fatal(err)
		}
		if commit {
			if got := ackedRecords(acks, 4); !slices.Equal(got, []int64{1, 2}) {
				t.Fatalf("acknowledged %v after commit", got)
			}
			continue
		}
		// (acks is shared: the commit above acknowledged the entry.)
		acks = newFakeAcks()
		s = NewSubscription(SubscriptionConfig{Type: SubShared}, acks, 0)
		s.RestoreTxnAcks(txnA, saved, cum)
		must(t)(s.AddConsumer(1, SubShared))
		_, reads := split(must(t)(s.Flow(1, 1000)))
		s.OnRead(reads[0].(ReadTail).Gen, true, es)
		acts, _ = s.EndTxn(txnA, false)
		r := replayOf(acts)
		if r == nil || !slices.Equal(r.Offsets, []int64{1}) {
			t.Fatalf("abort on the new owner: %v", acts)
		}
		if d, _ := split(s.OnRead(r.Gen, false, es[1:2])); len(d) != 1 || d[0].RedeliveryCount != 1 {
			t.Fatalf("redelivered %+v", d)
		}
	}
	// Records another transaction holds are not restored into this one.
	s := NewSubscription(SubscriptionConfig{Type: SubShared}, newFakeAcks(), 0)
	s.RestoreTxnAcks(txnA, []AckRange{{1, 3}}, false)
	s.RestoreTxnAcks(txnB, []AckRange{{0, 4}}, false)
	if rs, _ := s.TxnAcks(txnB); !slices.Equal(rs, []AckRange{{0, 1}, {3, 4}}) {
		t.Fatalf("restored %v", rs)
	}
	if _, err := s.RestoreTxnAcks(txnB, []AckRange{{3, 3}}, false); !errors.Is(err, lakestream.ErrInvalidArgument) {
		t.Fatalf("empty range: %v", err)
	}
}

func TestTxnAckLimits(t *testing.T) {
	s := NewSubscription(SubscriptionConfig{Type: SubShared, TxnAckRangesMax: 2, TxnPendingMax: 1}, newFakeAcks(), 0)
	deliverAll(t, s, SubShared, entries(1, 1, 1, 1, 1, 1, 1))
	mustAckTxn(t, s, 1, txnA, AckIndividual, entryIDs(0, 2))
	if err, _ := ackTxn(t, s, 1, txnA, AckIndividual, entryIDs(4)); !errors.Is(err, ErrTxnAckLimit) {
		t.Fatalf("third range: %v", err)
	}
	mustAckTxn(t, s, 1, txnA, AckIndividual, entryIDs(1)) // [0, 3): one range
	mustAckTxn(t, s, 1, txnA, AckIndividual, entryIDs(4))
	if err, _ := ackTxn(t, s, 1, txnB, AckIndividual, entryIDs(6)); !errors.Is(err, ErrTxnAckLimit) {
		t.Fatalf("second transaction: %v", err)
	}
	if _, err := s.EndTxn(txnA, false); err != nil {
		t.Fatal(err)
	}
	mustAckTxn(t, s, 1, txnB, AckIndividual, entryIDs(6))
}

// An ack in a transaction waiting for an entry lookup when the
// transaction ends is answered (ErrTxnConflict), not applied later; the
// acks queued behind it apply.
func TestTxnEndAnswersWaitingAcks(t *testing.T) {
	es := entries(2, 2)
	acks := newFakeAcks()
	s := NewSubscription(SubscriptionConfig{Type: SubShared}, acks, 0)
	must(t)(s.AddConsumer(1, SubShared))
	_, _, rest := ackResult(s.AckTxn(1, 1, txnA, AckIndividual, entryIDs(0)))
	r := resolveOf(t, rest)
	ackResult(s.Ack(2, 1, AckIndividual, entryIDs(2)))
	ackResult(s.AckTxn(3, 1, txnB, AckIndividual, entryIDs(2)))
	acts, err := s.EndTxn(txnA, true)
	if err != nil {
		t.Fatal(err)
	}
	done, order, _ := ackResult(acts)
	if !slices.Equal(order, []uint64{1}) || !errors.Is(done[1], ErrTxnConflict) {
		t.Fatalf("EndTxn answered %v %v", order, done)
	}
	done, order, rest = ackResult(s.OnResolved(r.Gen, answer(r, es)))
	if len(order) != 0 {
		t.Fatalf("answered %v before their entry was looked up", order)
	}
	r = resolveOf(t, rest)
	done, order, _ = ackResult(s.OnResolved(r.Gen, answer(r, es)))
	if !slices.Equal(order, []uint64{2, 3}) || done[2] != nil || !errors.Is(done[3], ErrTxnConflict) {
		t.Fatalf("after the lookup %v %v", order, done)
	}
	if got := ackedRecords(acks, 4); !slices.Equal(got, []int64{2, 3}) || len(s.PendingTxns()) != 0 {
		t.Fatalf("acknowledged %v, pending %v", got, s.PendingTxns())
	}
}

func TestAckRanges(t *testing.T) {
	var rs []AckRange
	for _, r := range []AckRange{{10, 12}, {0, 2}, {5, 6}, {2, 3}, {12, 14}, {6, 6}} {
		rs = rangesAdd(rs, r)
	}
	if !slices.Equal(rs, []AckRange{{0, 3}, {5, 6}, {10, 14}}) {
		t.Fatalf("add: %v", rs)
	}
	if !rangesOverlap(rs, 4, 6) || rangesOverlap(rs, 3, 5) || !rangesOverlap(rs, 13, 20) || rangesOverlap(rs, 14, 20) {
		t.Fatal("overlap")
	}
	if rs = rangesAdd(rs, AckRange{0, 20}); !slices.Equal(rs, []AckRange{{0, 20}}) {
		t.Fatalf("add over all: %v", rs)
	}

	// Spans: A [0,3) [5,6), B [3,5) [6,8); A's touching spans merge, B's
	// stay apart.
	var ss []txnSpan
	for _, x := range []struct {
		txn TxnID
		r   AckRange
	}{{txnA, AckRange{0, 2}}, {txnB, AckRange{3, 5}}, {txnA, AckRange{5, 6}}, {txnB, AckRange{6, 8}}, {txnA, AckRange{1, 3}}} {
		ss = spansAdd(ss, x.txn, x.r)
	}
	want := []txnSpan{{AckRange{0, 3}, txnA}, {AckRange{3, 5}, txnB}, {AckRange{5, 6}, txnA}, {AckRange{6, 8}, txnB}}
	if !slices.Equal(ss, want) {
		t.Fatalf("spans %v", ss)
	}
	if got := spansWithin(ss, AckRange{4, 7}); !slices.Equal(got, []txnSpan{{AckRange{4, 5}, txnB}, {AckRange{5, 6}, txnA}, {AckRange{6, 7}, txnB}}) {
		t.Fatalf("within: %v", got)
	}
	if got := spansMinus(AckRange{-2, 10}, ss); !slices.Equal(got, []AckRange{{-2, 0}, {8, 10}}) {
		t.Fatalf("minus: %v", got)
	}
	ss = spansAdd(ss, txnB, AckRange{8, 9})
	ss = spansRemove(ss, AckRange{5, 6})
	if !slices.Equal(ss, []txnSpan{{AckRange{0, 3}, txnA}, {AckRange{3, 5}, txnB}, {AckRange{6, 9}, txnB}}) {
		t.Fatalf("after remove: %v", ss)
	}
	if spansOverlap(ss, 5, 6) || !spansOverlap(ss, 5, 7) {
		t.Fatal("overlap")
	}
}

// entryLog is a faultLog whose entries can also be read one by one
// (redeliveries).
type entryLog struct{ *faultLog }

func (l entryLog) ReadEntry(_ context.Context, off int64) (lakestream.Entry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if off >= l.next {
		return lakestream.Entry{}, lakestream.ErrOffsetOutOfRange
	}
	return lakestream.Entry{EntryHeader: lakestream.EntryHeader{Offset: off, Records: 1}}, nil
}

// durableMemCursor is a memCursor that counts its persists.
type durableMemCursor struct {
	memCursor
	persists atomic.Int32
}

func (c *durableMemCursor) Durable() bool { return true }
func (c *durableMemCursor) PersistState(context.Context) error {
	c.persists.Add(1)
	return nil
}

type txnReply struct {
	ranges     []AckRange
	cumulative bool
	err        error
}

// TestSubscriptionActorTxnAcks: through the actor, an ack in a transaction
// answers with the ranges to persist, hides its message from the
// redelivery that follows a consumer's leave, conflicts with another
// transaction; abort redelivers it; commit moves the cursor and is
// persisted before EndTxn returns.
func TestSubscriptionActorTxnAcks(t *testing.T) {
	rt := NewRuntime(nil)
	defer rt.Shutdown()
	lg := entryLog{newFaultLog()}
	cur := &durableMemCursor{memCursor: memCursor{a: newFakeAcks()}}
	sub := StartSubscription(rt, SubscriptionOptions{Name: "s", Type: SubShared, Log: lg, Cursor: cur})
	defer sub.Close()
	sink1, sink2 := chanSink{got: make(chan Deliver, 16)}, chanSink{got: make(chan Deliver, 16)}
	if err := sub.AddConsumer(1, SubShared, sink1); err != nil {
		t.Fatal(err)
	}
	sub.Flow(1, 100)
	lg.append(3)
	for off := range int64(3) {
		sink1.expect(t, off)
	}
	replies := make(chan txnReply, 4)
	reply := func(rs []AckRange, cum bool, err error) { replies <- txnReply{rs, cum, err} }

	sub.AckTxn(1, txnA, AckIndividual, entryIDs(1), reply)
	if r := waitFor(t, replies, "the ack's answer"); r.err != nil || !slices.Equal(r.ranges, []AckRange{{1, 2}}) || r.cumulative {
		t.Fatalf("answer %+v, want [1, 2) to persist", r)
	}
	sub.AckTxn(1, txnB, AckIndividual, entryIDs(1), reply)
	if r := waitFor(t, replies, "the conflict"); !errors.Is(r.err, ErrTxnConflict) || r.ranges != nil {
		t.Fatalf("second transaction: %+v", r)
	}
	info, err := sub.Info()
	if err != nil || info.PendingAckTxns != 1 || info.PendingAckRecords != 1 || info.MarkDeleteOffset != -1 {
		t.Fatalf("info %+v %v", info, err)
	}

	// Consumer 1 leaves: consumer 2 gets 0 and 2, not the pending 1.
	if err := sub.AddConsumer(2, SubShared, sink2); err != nil {
		t.Fatal(err)
	}
	sub.Flow(2, 100)
	if err := sub.RemoveConsumer(1); err != nil {
		t.Fatal(err)
	}
	sink2.expect(t, 0)
	sink2.expect(t, 2)

	// Abort: 1 is redelivered.
	if err := sub.EndTxn(txnA, false); err != nil {
		t.Fatal(err)
	}
	if d := waitFor(t, sink2.got, "the redelivery after abort"); d.Entry.Offset != 1 || d.RedeliveryCount != 1 {
		t.Fatalf("after abort %+v", d)
	}

	// Commit: the cursor moves, and is persisted before EndTxn returns.
	sub.AckTxn(2, txnB, AckIndividual, entryIDs(0, 1, 2), reply)
	if r := waitFor(t, replies, "the ack's answer"); r.err != nil || !slices.Equal(r.ranges, []AckRange{{0, 3}}) {
		t.Fatalf("answer %+v", r)
	}
	persisted := cur.persists.Load()
	if err := sub.EndTxn(txnB, true); err != nil {
		t.Fatal(err)
	}
	if cur.persists.Load() == persisted {
		t.Fatal("EndTxn returned before the cursor was persisted")
	}
	info, err = sub.Info()
	if err != nil || info.MarkDeleteOffset != 2 || info.PendingAckTxns != 0 || info.Unacked != 0 {
		t.Fatalf("after commit: %+v %v", info, err)
	}
	if err := sub.EndTxn(txnB, true); err != nil {
		t.Fatalf("ending an ended transaction: %v", err)
	}
}

// Key_Shared: an entry hidden while queued for redelivery keeps its key
// hash, so its abort queues it under its key (and its key's order).
func TestTxnKeySharedAbortKeepsKeyHash(t *testing.T) {
	es := keyedEntries(t, "a", "b", "a")
	txnLog = es
	s := NewSubscription(SubscriptionConfig{Type: SubKeyShared}, newFakeAcks(), 0)
	must(t)(s.AddKeySharedConsumer(1, KeySharedPolicy{}, ConsumerMeta{Name: "c1"}))
	_, reads := split(must(t)(s.Flow(1, 100)))
	if d, _ := split(s.OnRead(reads[0].(ReadTail).Gen, true, es)); len(d) != 3 {
		t.Fatalf("delivered %v", d)
	}
	must(t)(s.AddKeySharedConsumer(2, KeySharedPolicy{}, ConsumerMeta{Name: "c2"}))
	s.RemoveConsumer(1) // everything waits for redelivery (2 has no permits)
	mustAckTxn(t, s, 2, txnA, AckIndividual, entryIDs(0))
	r := replayOf(must(t)(s.Flow(2, 100)))
	if d, _ := split(s.OnRead(r.Gen, false, es)); !slices.Equal(offsetsOf(d), []int64{1, 2}) {
		t.Fatalf("redelivered %v, want 1 and 2", offsetsOf(d))
	}
	acts, _ := s.EndTxn(txnA, false)
	if r = replayOf(acts); r == nil || !slices.Equal(r.Offsets, []int64{0}) {
		t.Fatalf("after abort: %v", acts)
	}
	if h := s.replayHash[0]; h != EntryKeyHash(es[0].Payload) {
		t.Fatalf("queued under hash %d, want the key's %d", h, EntryKeyHash(es[0].Payload))
	}
	d, _ := split(s.OnRead(r.Gen, false, es[:1]))
	if len(d) != 1 || d[0].ConsumerID != 2 || d[0].RedeliveryCount != 1 {
		t.Fatalf("after abort %+v", d)
	}
}

// A transaction that hid more entries than it remembers reads the log
// again on abort from the first it did not remember: nothing is lost.
func TestTxnAbortBeyondRememberedEntries(t *testing.T) {
	n := txnHiddenEntriesMax + 100
	sizes := make([]int32, n)
	for i := range sizes {
		sizes[i] = 1
	}
	es := entries(sizes...)
	s := NewSubscription(SubscriptionConfig{Type: SubExclusive, ReadMaxRecords: n}, newFakeAcks(), 0)
	deliverAll(t, s, SubExclusive, es)
	mustAckTxn(t, s, 1, txnA, AckCumulative, entryIDs(int64(n-1)))
	if s.PendingEntries() != 0 {
		t.Fatalf("%d entries still pending", s.PendingEntries())
	}
	acts, err := s.EndTxn(txnA, false)
	if err != nil {
		t.Fatal(err)
	}
	r := replayOf(acts)
	if r == nil {
		t.Fatalf("abort: %v", acts)
	}
	// Every entry is queued again or at or above the read position.
	queued := len(s.replay)
	from := s.ReadPosition()
	missing := 0
	for off := int64(0); off < from; off++ {
		if _, ok := s.records[off]; !ok {
			missing++
		}
	}
	if queued != txnHiddenEntriesMax || from >= int64(n) || missing != 0 {
		t.Fatalf("queued %d, read position %d, %d entries below it lost", queued, from, missing)
	}
}
