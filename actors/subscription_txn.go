package actors

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
)

// This file is the transactional part of the subscription state machine
// (docs/transactions.md, "Transactional acknowledgements"): pure, like
// subscription.go, whose dispatch it hooks into.
//
// An acknowledgement in a transaction (AckTxn) does not touch the AckState:
// it records the records it names as pending for the transaction, as
// half-open record ranges. A pending record counts as acknowledged for
// dispatch — it is not delivered again, not redelivered when its consumer
// leaves or asks for redelivery, and a batch delivered again carries it in
// its ack_set as acknowledged — but the cursor does not move, so nothing
// of it survives this machine except what the driver persists (TxnAcks,
// RestoreTxnAcks). EndTxn settles a transaction: commit applies its ranges
// to the AckState exactly as Ack would; abort drops them and queues their
// entries for redelivery with their redelivery count incremented (as
// Pulsar's Shared dispatcher does on abort).
//
// Rules, as Pulsar's PendingAckHandleImpl applies them (ErrTxnConflict):
//   - a record pending in another transaction cannot be acknowledged in a
//     transaction; the same transaction acknowledging it again is a no-op
//     (Pulsar refuses that too, because its pending map is keyed by
//     position; here a client's resent ack succeeds);
//   - a record acknowledged in the cursor cannot be acknowledged in a
//     transaction (an entry acknowledged without ack_set conflicts only
//     when all of it is; a batch-index ack when any record it names is);
//   - one transaction at a time may hold a cumulative ack on a
//     subscription; the same transaction may move it up, not down; a
//     cumulative ack at or below the mark-delete position conflicts;
//   - a cumulative ack in a transaction on a Shared or Key_Shared
//     subscription is refused with lakestream.ErrInvalidArgument
//     (NotAllowedError: Pulsar's broker ignores cumulative acks on those
//     types and its clients refuse to send them; answering success would
//     make the client believe the messages are acknowledged at commit).
//
// A plain acknowledgement of a record pending in a transaction is applied,
// as Pulsar applies it (PersistentSubscription.acknowledgeMessage does
// not look at pending acks): the record is acknowledged at once, whatever
// the transaction's outcome; its commit acknowledges it again (a no-op)
// and its abort does not redeliver it.
//
// A cumulative ack in a transaction is held as the range from the
// mark-delete position + 1 to the acknowledged record: records in it that
// were acknowledged individually already are harmless (commit acknowledges
// them again) and keep the range whole.
//
// Pending ranges of different transactions never overlap (conflicts are
// refused, restores skip what another transaction holds), so one sorted
// list of spans, each tagged with its transaction (txnHeld), answers "is
// this record pending, and in which transaction?" in one binary search.

// TxnID is a Pulsar transaction id (txnid_most_bits, txnid_least_bits):
// Most is the coordinator, Least its sequence.
type TxnID struct{ Most, Least uint64 }

func (t TxnID) String() string { return fmt.Sprintf("(%d,%d)", t.Most, t.Least) }

// AckRange is a half-open range [From, To) of record offsets.
type AckRange struct{ From, To int64 }

// Errors of transactional acknowledgements. The gateway maps them to
// Pulsar ServerError codes.
var (
	// ErrTxnConflict: an acknowledgement in a transaction names a record
	// another transaction holds pending or the cursor has acknowledged, or
	// a cumulative ack conflicts with the one pending (see AckTxn). Nothing
	// of the acknowledgement is applied. TransactionConflict for the client.
	ErrTxnConflict = errors.New("actors: transaction conflict")
	// ErrTxnAckLimit: an acknowledgement in a transaction would make the
	// transaction hold more than SubscriptionConfig.TxnAckRangesMax ranges
	// on the subscription, or the subscription hold pending acks of more
	// than TxnPendingMax transactions. Nothing of it is applied; the
	// client's transaction should abort. NotAllowedError for the client.
	ErrTxnAckLimit = errors.New("actors: too many pending transactional acknowledgements")
)

// txnHiddenEntriesMax bounds the entries one transaction remembers it
// hid from dispatch (pendingTxn.hidden). Beyond it, an abort reads the log
// again from the first record it did not remember (pendingTxn.rewindFrom)
// instead of queueing exactly the entries it hid.
const txnHiddenEntriesMax = 1 << 16

// pendingTxn is what one transaction holds pending on the subscription.
type pendingTxn struct {
	ranges []AckRange // ascending, disjoint, adjacent ones merged
	// cumulative: it acknowledged cumulatively; cumEnd is the end
	// (exclusive) of the last record it acknowledged so.
	cumulative bool
	cumEnd     int64
	// hidden are the entries taken out of dispatch (delivered, queued,
	// read or due) because every record of theirs was acknowledged or
	// pending, some in this transaction: an abort queues them again. At
	// most txnHiddenEntriesMax; rewindFrom (valid when overflow) is the
	// lowest entry not remembered.
	hidden     map[int64]hiddenEntry
	overflow   bool
	rewindFrom int64
}

type hiddenEntry struct {
	records int32
	hash    int32 // Key_Shared key hash
}

// AckTxn applies an acknowledgement in transaction txn from consumer id,
// answered by AckDone{Token: token} like Ack, after the same lookups of
// entries the machine does not know and in the same order as the plain
// acknowledgements around it. Instead of updating the AckState it makes
// the records pending for txn (see the file comment), all of them or —
// on ErrTxnConflict, ErrTxnAckLimit or an invalid id — none.
func (s *Subscription) AckTxn(token, id uint64, txn TxnID, kind AckKind, ids []AckID) []Action {
	if kind == AckCumulative && (s.cfg.Type == SubShared || s.cfg.Type == SubKeyShared) && !s.closed {
		return []Action{AckDone{Token: token, Err: fmt.Errorf("%w: cumulative acknowledgement in a transaction on a %s subscription",
			lakestream.ErrInvalidArgument, s.cfg.Type)}}
	}
	return s.ack(waitingAck{token: token, kind: kind, ids: ids, txn: txn, inTxn: true}, id)
}

// EndTxn settles transaction txn: commit applies its pending ranges to the
// AckState (as Ack would: mark-delete advances over them), abort drops
// them and queues the entries they covered for redelivery, redelivery
// count incremented. Acknowledgements in txn still waiting for entry
// lookups are answered with ErrTxnConflict: the transaction ended before
// they applied. Unknown txn: a no-op. When the AckState refuses a commit
// (lakestream.ErrCursorStateTooLarge) the error is returned and txn stays
// pending, so that EndTxn may be called again.
func (s *Subscription) EndTxn(txn TxnID, commit bool) ([]Action, error) {
	if s.closed {
		return nil, ErrSubscriptionClosed
	}
	out := s.dropWaitingTxnAcks(txn)
	t, ok := s.txns[txn]
	if !ok {
		return out, nil
	}
	if commit {
		// Records at or below mark-delete (a cumulative ack or Expire
		// passed them meanwhile) are acknowledged already.
		md := s.acks.MarkDeleteOffset()
		var errs []error
		for _, r := range t.ranges {
			if from := max(r.From, md+1); from < r.To {
				errs = append(errs, s.acks.IndividualDelete(from, r.To-from))
			}
		}
		if err := errors.Join(errs...); err != nil {
			return out, fmt.Errorf("committing the acknowledgements of transaction %s: %w", txn, err)
		}
	}
	s.forgetTxn(txn, t)
	if commit {
		for off, p := range s.pending {
			if rangesOverlap(t.ranges, off, off+int64(p.records)) {
				s.forgetIfAcked(off, p.records)
			}
		}
		for off, h := range t.hidden {
			if s.fullyAcked(off, h.records) && !s.txnHoldsAny(off, h.records) {
				delete(s.redelivered, off)
			}
		}
		return append(out, s.afterAcks()...), nil
	}
	// Abort: what the transaction held goes out again.
	s.requeue(func(p pendingEntry, off int64) bool { return rangesOverlap(t.ranges, off, off+int64(p.records)) }, true)
	for off, h := range t.hidden {
		_, queued := s.records[off]
		if _, delivered := s.pending[off]; delivered || queued || s.delayed.has(off) {
			continue
		}
		if s.fullySettled(off, h.records) {
			s.forget(off, h.records, h.hash, true)
			continue
		}
		s.redelivered[off]++
		s.addReplay(off, h.records, h.hash)
	}
	if t.overflow && t.rewindFrom < s.readPos {
		s.readPos = t.rewindFrom
		if s.reading && s.readingTail {
			s.reading = false
			s.readGen = s.nextGen()
			out = append(out, CancelRead{})
		}
	}
	out = append(out, s.interruptTail()...)
	return append(out, s.dispatch(nil)...), nil
}

// RestoreTxnAcks makes ranges pending for txn again, as TxnAcks exported
// them (cumulative: they came from a cumulative acknowledgement): a new
// owner of the subscription loads the persisted pending acks with it,
// before it dispatches. Records another transaction holds already are
// skipped. The bounds of AckTxn are not applied: what was persisted was
// within them when acknowledged, and an acknowledgement of a committed
// transaction must not be lost.
func (s *Subscription) RestoreTxnAcks(txn TxnID, ranges []AckRange, cumulative bool) ([]Action, error) {
	if s.closed {
		return nil, ErrSubscriptionClosed
	}
	var add []AckRange
	for _, r := range ranges {
		if r.From < 0 || r.From >= r.To {
			return nil, fmt.Errorf("%w: pending acknowledgement range [%d, %d) of transaction %s", lakestream.ErrInvalidArgument, r.From, r.To, txn)
		}
		add = rangesAdd(add, r)
	}
	var free []AckRange // not held by any transaction yet
	for _, r := range add {
		free = append(free, spansMinus(r, s.txnHeld)...)
	}
	t := s.txn(txn)
	for _, r := range free {
		t.ranges = rangesAdd(t.ranges, r)
		s.txnHeld = spansAdd(s.txnHeld, txn, r)
	}
	if cumulative && len(add) > 0 {
		t.cumulative = true
		t.cumEnd = max(t.cumEnd, add[len(add)-1].To)
	}
	if len(t.ranges) == 0 && !t.cumulative {
		delete(s.txns, txn)
		return nil, nil
	}
	s.settlePending(t.ranges)
	return append(s.afterAcks(), s.dispatch(nil)...), nil
}

// PendingTxns lists the transactions holding pending acknowledgements on
// the subscription, ascending.
func (s *Subscription) PendingTxns() []TxnID {
	out := slices.Collect(maps.Keys(s.txns))
	slices.SortFunc(out, func(a, b TxnID) int {
		return cmp.Or(cmp.Compare(a.Most, b.Most), cmp.Compare(a.Least, b.Least))
	})
	return out
}

// TxnAcks returns the records txn holds pending, as ascending disjoint
// half-open ranges (a copy; nil when it holds none), and whether they
// came from a cumulative acknowledgement: what the driver persists for
// RestoreTxnAcks.
func (s *Subscription) TxnAcks(txn TxnID) (ranges []AckRange, cumulative bool) {
	t, ok := s.txns[txn]
	if !ok {
		return nil, false
	}
	return slices.Clone(t.ranges), t.cumulative
}

// PendingAckRecords is the number of records in the pending ranges of
// every transaction (records acknowledged in the cursor meanwhile
// included).
func (s *Subscription) PendingAckRecords() int64 {
	var n int64
	for _, sp := range s.txnHeld {
		n += sp.To - sp.From
	}
	return n
}

// ---- internals ----

// txn returns txn's pending state, created empty if need be.
func (s *Subscription) txn(txn TxnID) *pendingTxn {
	t, ok := s.txns[txn]
	if !ok {
		t = &pendingTxn{}
		s.txns[txn] = t
	}
	return t
}

// forgetTxn drops txn's pending state (EndTxn).
func (s *Subscription) forgetTxn(txn TxnID, t *pendingTxn) {
	for _, r := range t.ranges {
		s.txnHeld = spansRemove(s.txnHeld, r)
	}
	delete(s.txns, txn)
}

// applyTxnAck applies an acknowledgement in a transaction whose entries
// are all known: all of it, or nothing and an error.
func (s *Subscription) applyTxnAck(w waitingAck) error {
	add, cumEnd, err := s.txnAckRecords(w)
	if err != nil {
		return err
	}
	t, known := s.txns[w.txn]
	if !known && len(s.txns) >= s.cfg.TxnPendingMax {
		return fmt.Errorf("%w: %d transactions hold pending acknowledgements on the subscription", ErrTxnAckLimit, len(s.txns))
	}
	if w.kind == AckCumulative {
		for other, o := range s.txns {
			if other != w.txn && o.cumulative {
				return fmt.Errorf("%w: transaction %s holds a cumulative acknowledgement pending", ErrTxnConflict, other)
			}
		}
		if known && t.cumulative && cumEnd < t.cumEnd {
			return fmt.Errorf("%w: cumulative acknowledgement below the one transaction %s holds pending (%d)", ErrTxnConflict, w.txn, t.cumEnd-1)
		}
	}
	for _, r := range add {
		for _, sp := range spansWithin(s.txnHeld, r) {
			if sp.txn != w.txn {
				return fmt.Errorf("%w: records [%d, %d) are pending in transaction %s", ErrTxnConflict, sp.From, sp.To, sp.txn)
			}
		}
	}
	var merged []AckRange
	if known {
		merged = slices.Clone(t.ranges)
	}
	for _, r := range add {
		merged = rangesAdd(merged, r)
	}
	if len(merged) > s.cfg.TxnAckRangesMax {
		return fmt.Errorf("%w: transaction %s would hold %d ranges (max %d)", ErrTxnAckLimit, w.txn, len(merged), s.cfg.TxnAckRangesMax)
	}
	t = s.txn(w.txn)
	t.ranges = merged
	for _, r := range add {
		s.txnHeld = spansAdd(s.txnHeld, w.txn, r)
	}
	if w.kind == AckCumulative {
		t.cumulative = true
		t.cumEnd = max(t.cumEnd, cumEnd)
		s.settlePending(add)
		return nil
	}
	// Only the entries named changed. (All known: looked up before any
	// of them leaves dispatch, after which the machine may not know it.)
	named := make([]ackedEntry, 0, len(w.ids))
	for _, a := range w.ids {
		e, _ := s.entryOf(a, w.kind)
		named = append(named, e)
	}
	for _, e := range named {
		s.forgetIfAcked(e.off, int32(e.records))
		s.recount(e.off)
	}
	return nil
}

// txnAckRecords returns the record ranges an acknowledgement in a
// transaction names (ascending, merged) and, for a cumulative one, the end
// of its last record; ErrTxnConflict when it names records the cursor
// acknowledged (see the file comment), or the error of an invalid id.
func (s *Subscription) txnAckRecords(w waitingAck) (add []AckRange, cumEnd int64, err error) {
	for _, a := range w.ids {
		e, _ := s.entryOf(a, w.kind)
		if e.invalid != nil {
			return nil, 0, e.invalid
		}
		var bits []AckRange // the records of e the ack_set acknowledges
		if a.AckSet != nil {
			bits = ackSetRanges(e.off, e.records, a.AckSet)
		}
		switch {
		case w.kind == AckCumulative:
			md := s.acks.MarkDeleteOffset()
			upTo := e.end()
			if a.AckSet != nil {
				upTo = e.off
			}
			end := upTo
			if n := len(bits); n > 0 {
				end = bits[n-1].To
			}
			if upTo <= md+1 && s.allAcked(bits) {
				return nil, 0, fmt.Errorf("%w: cumulative acknowledgement of %d, at or below the mark-delete position %d", ErrTxnConflict, end-1, md)
			}
			if upTo > md+1 {
				add = rangesAdd(add, AckRange{md + 1, upTo})
			}
			for _, r := range bits {
				add = rangesAdd(add, r)
			}
			cumEnd = max(cumEnd, end)
		case a.AckSet != nil:
			for _, r := range bits {
				for o := r.From; o < r.To; o++ {
					if s.acks.IsIndividuallyDeleted(o) {
						return nil, 0, fmt.Errorf("%w: record %d is acknowledged already", ErrTxnConflict, o)
					}
				}
				add = rangesAdd(add, r)
			}
		default:
			if s.fullyAcked(e.off, int32(e.records)) {
				return nil, 0, fmt.Errorf("%w: entry %d is acknowledged already", ErrTxnConflict, e.off)
			}
			add = rangesAdd(add, AckRange{e.off, e.end()})
		}
	}
	return add, cumEnd, nil
}

// allAcked reports whether the cursor acknowledged every record of rs.
func (s *Subscription) allAcked(rs []AckRange) bool {
	for _, r := range rs {
		for o := r.From; o < r.To; o++ {
			if !s.acks.IsIndividuallyDeleted(o) {
				return false
			}
		}
	}
	return true
}

// ackSetRanges returns the records of the entry [off, off+n) whose bit in
// set is 0 (acknowledged), as ranges.
func ackSetRanges(off, n int64, set []int64) []AckRange {
	var out []AckRange
	for i := int64(0); i < n; {
		if protocol.AckSetIsUnacked(set, int(i)) {
			i++
			continue
		}
		j := i
		for j < n && !protocol.AckSetIsUnacked(set, int(j)) {
			j++
		}
		out = append(out, AckRange{off + i, off + j})
		i = j
	}
	return out
}

// settlePending takes the pending entries that records newly pending
// (rs) settled out of dispatch, and counts the others again.
func (s *Subscription) settlePending(rs []AckRange) {
	for off, p := range s.pending {
		if !rangesOverlap(rs, off, off+int64(p.records)) {
			continue
		}
		s.forgetIfAcked(off, p.records)
		s.recount(off)
	}
}

// dropWaitingTxnAcks answers the acknowledgements in txn waiting for
// entry lookups with ErrTxnConflict and takes them out of the queue, then
// applies those at its head that need no more lookups.
func (s *Subscription) dropWaitingTxnAcks(txn TxnID) []Action {
	var out []Action
	kept := s.acksWaiting[:0]
	for _, w := range s.acksWaiting {
		if w.inTxn && w.txn == txn {
			out = append(out, AckDone{Token: w.token, Err: fmt.Errorf("%w: transaction %s ended before the acknowledgement applied", ErrTxnConflict, txn)})
			s.acksWaitingIDs -= len(w.ids)
			continue
		}
		kept = append(kept, w)
	}
	if len(out) == 0 {
		return nil
	}
	clear(s.acksWaiting[len(kept):])
	s.acksWaiting = kept
	return append(out, s.applyKnownAcks()...)
}

// settled reports whether record off is acknowledged or pending in a
// transaction: either way it is not dispatched.
func (s *Subscription) settled(off int64) bool {
	return s.acks.IsIndividuallyDeleted(off) || (len(s.txnHeld) > 0 && spansOverlap(s.txnHeld, off, off+1))
}

// fullySettled is fullyAcked counting records pending in transactions.
func (s *Subscription) fullySettled(off int64, n int32) bool {
	if len(s.txnHeld) == 0 || off+int64(n)-1 <= s.acks.MarkDeleteOffset() {
		return s.fullyAcked(off, n)
	}
	for i := int64(0); i < int64(n); i++ {
		if !s.settled(off + i) {
			return false
		}
	}
	return true
}

// txnHoldsAny reports whether a record of [off, off+n) is pending in a
// transaction.
func (s *Subscription) txnHoldsAny(off int64, n int32) bool {
	return len(s.txnHeld) > 0 && spansOverlap(s.txnHeld, off, off+int64(n))
}

// forget drops a settled entry from dispatch for good: its redelivery
// count goes, unless a transaction holds some of its records — then each
// such transaction remembers the entry (and its count stays), so that an
// abort redelivers it with its count incremented. Only entries below the
// read position are remembered: the tail read meets the others again
// (and hides them again, or delivers them after an abort), and so does a
// Key_Shared entry whose key hash the caller does not know (hashKnown
// false: one neither delivered nor queued, which the delay index holds,
// or another transaction remembers already).
func (s *Subscription) forget(off int64, n int32, hash int32, hashKnown bool) {
	if !s.txnHoldsAny(off, n) {
		delete(s.redelivered, off)
		return
	}
	if !hashKnown || off >= s.readPos {
		return
	}
	for _, sp := range spansWithin(s.txnHeld, AckRange{off, off + int64(n)}) {
		t := s.txns[sp.txn]
		if _, ok := t.hidden[off]; ok {
			continue
		}
		if len(t.hidden) >= txnHiddenEntriesMax {
			if !t.overflow || off < t.rewindFrom {
				t.rewindFrom = off
			}
			t.overflow = true
			continue
		}
		if t.hidden == nil {
			t.hidden = map[int64]hiddenEntry{}
		}
		t.hidden[off] = hiddenEntry{records: n, hash: hash}
	}
}

// hiddenEntry returns the entry at off if a transaction took it out of
// dispatch (its record count, for acknowledgements naming it).
func (s *Subscription) hiddenEntry(off int64) (hiddenEntry, bool) {
	if len(s.txnHeld) == 0 {
		return hiddenEntry{}, false
	}
	for _, sp := range spansWithin(s.txnHeld, AckRange{off, off + 1}) {
		if h, ok := s.txns[sp.txn].hidden[off]; ok {
			return h, true
		}
	}
	return hiddenEntry{}, false
}

// ---- record ranges: ascending, disjoint, adjacent ones merged ----

// rangesOverlap reports whether rs holds a record of [from, to).
func rangesOverlap(rs []AckRange, from, to int64) bool {
	i, _ := slices.BinarySearchFunc(rs, from+1, func(r AckRange, o int64) int { return cmp.Compare(r.To, o) })
	return i < len(rs) && rs[i].From < to
}

// rangesAdd returns rs with r added (rs is modified in place).
func rangesAdd(rs []AckRange, r AckRange) []AckRange {
	if r.From >= r.To {
		return rs
	}
	// Ranges touching r (adjacent included) merge with it.
	i, _ := slices.BinarySearchFunc(rs, r.From, func(x AckRange, o int64) int { return cmp.Compare(x.To, o) })
	j := i
	for j < len(rs) && rs[j].From <= r.To {
		r.From, r.To = min(r.From, rs[j].From), max(r.To, rs[j].To)
		j++
	}
	return slices.Replace(rs, i, j, r)
}

// ---- the pending records of every transaction ----

// txnSpan is a range of records pending in transaction txn. A list of
// spans is ascending and disjoint; adjacent spans of one transaction are
// merged, so the spans of a transaction are exactly its ranges.
type txnSpan struct {
	AckRange
	txn TxnID
}

// spanAfter is the index of the first span of ss with To > off.
func spanAfter(ss []txnSpan, off int64) int {
	i, _ := slices.BinarySearchFunc(ss, off+1, func(x txnSpan, o int64) int { return cmp.Compare(x.To, o) })
	return i
}

// spansOverlap reports whether ss holds a record of [from, to).
func spansOverlap(ss []txnSpan, from, to int64) bool {
	i := spanAfter(ss, from)
	return i < len(ss) && ss[i].From < to
}

// spansWithin returns the spans of ss holding records of r, clipped to r.
func spansWithin(ss []txnSpan, r AckRange) []txnSpan {
	var out []txnSpan
	for i := spanAfter(ss, r.From); i < len(ss) && ss[i].From < r.To; i++ {
		sp := ss[i]
		sp.From, sp.To = max(sp.From, r.From), min(sp.To, r.To)
		out = append(out, sp)
	}
	return out
}

// spansMinus returns the parts of r no span of ss holds.
func spansMinus(r AckRange, ss []txnSpan) []AckRange {
	var out []AckRange
	at := r.From
	for _, sp := range spansWithin(ss, r) {
		if sp.From > at {
			out = append(out, AckRange{at, sp.From})
		}
		at = sp.To
	}
	if at < r.To {
		out = append(out, AckRange{at, r.To})
	}
	return out
}

// spansAdd returns ss with r added for txn (ss is modified in place). No
// span of another transaction may hold a record of r; one may touch it.
func spansAdd(ss []txnSpan, txn TxnID, r AckRange) []txnSpan {
	if r.From >= r.To {
		return ss
	}
	i, _ := slices.BinarySearchFunc(ss, r.From, func(x txnSpan, o int64) int { return cmp.Compare(x.To, o) })
	j := i
	var before, after []txnSpan // other transactions' spans touching r
	for ; j < len(ss) && ss[j].From <= r.To; j++ {
		switch {
		case ss[j].txn == txn:
			r.From, r.To = min(r.From, ss[j].From), max(r.To, ss[j].To)
		case ss[j].To <= r.From:
			before = append(before, ss[j])
		default:
			after = append(after, ss[j])
		}
	}
	repl := append(append(before, txnSpan{r, txn}), after...)
	return slices.Replace(ss, i, j, repl...)
}

// spansRemove returns ss without the spans inside r, which must all be of
// one transaction (one of its ranges; ss is modified in place).
func spansRemove(ss []txnSpan, r AckRange) []txnSpan {
	i := spanAfter(ss, r.From)
	j := i
	for j < len(ss) && ss[j].From < r.To {
		j++
	}
	return slices.Delete(ss, i, j)
}
