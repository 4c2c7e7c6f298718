package broker

// Transactional acknowledgements (docs/transactions.md, "Transactional
// acknowledgements"): an ACK in a transaction becomes a pending ack of the
// subscription actor (actors.Subscription.AckTxn), is made durable in the
// metadata store (txn.Coordinator.SaveAcks) before the client is answered,
// and is applied or dropped when the transaction ends — told by the
// coordinator's watch (Await), on whichever node ended it. A subscription
// started here loads the pending acks saved for it (its previous owner
// crashed or unloaded it) before any consumer attaches.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/txn"
)

// txnAckKey names the pending acks of one transaction on one running
// subscription actor (a restarted actor is another key: its acks are
// loaded again).
type txnAckKey struct {
	sub *actors.SubscriptionActor
	id  txn.ID
}

// txnAckState is what the topic keeps of one key.
type txnAckState struct {
	// mu serializes the saves and the end: a save never lands after the
	// end deleted the key.
	mu sync.Mutex
	// gen numbers the actor's replies (in the actor's order: a later
	// reply holds every range of an earlier one); saved is the last
	// saved.
	gen      atomic.Int64
	saved    int64
	awaiting bool
	ended    bool
}

// txnAckValue is the value of a txn-acks key.
type txnAckValue struct {
	Ranges     [][2]int64 `json:"ranges"`
	Cumulative bool       `json:"cumulative"`
}

func encodeTxnAcks(ranges []actors.AckRange, cumulative bool) []byte {
	v := txnAckValue{Ranges: make([][2]int64, len(ranges)), Cumulative: cumulative}
	for i, r := range ranges {
		v.Ranges[i] = [2]int64{r.From, r.To}
	}
	b, _ := json.Marshal(v) // plain fields: cannot fail
	return b
}

func decodeTxnAcks(b []byte) ([]actors.AckRange, bool, error) {
	var v txnAckValue
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, false, fmt.Errorf("corrupt pending acknowledgements: %w", err)
	}
	out := make([]actors.AckRange, len(v.Ranges))
	for i, r := range v.Ranges {
		if r[0] < 0 || r[1] <= r[0] || i > 0 && r[0] < out[i-1].To {
			return nil, false, fmt.Errorf("corrupt pending acknowledgements: range %v", r)
		}
		out[i] = actors.AckRange{From: r[0], To: r[1]}
	}
	return out, v.Cumulative, nil
}

// txnAckState returns the state of key, created if needed.
func (t *Topic[P, C]) txnAckState(k txnAckKey) *txnAckState {
	t.txnAcks.Lock()
	defer t.txnAcks.Unlock()
	if t.txnAcks.m == nil {
		t.txnAcks.m = map[txnAckKey]*txnAckState{}
	}
	st := t.txnAcks.m[k]
	if st == nil {
		st = &txnAckState{}
		t.txnAcks.m[k] = st
	}
	return st
}

func (t *Topic[P, C]) forgetTxnAckState(k txnAckKey) {
	t.txnAcks.Lock()
	delete(t.txnAcks.m, k)
	t.txnAcks.Unlock()
}

// AckTxn acknowledges ids for consumer on subscription sub (name) in
// transaction id, for role. It returns once the acknowledgement is pending
// on the subscription and saved in the metadata store (the client may be
// answered), or with the error that refused it: txn errors (not open, not
// the role's), actors.ErrTxnConflict, actors.ErrTxnAckLimit, ErrNotAllowed
// (transactions off, a non-durable subscription). It waits for the
// metadata store: call it off the connection's reader.
func (t *Topic[P, C]) AckTxn(ctx context.Context, sub *actors.SubscriptionActor, name string, durable bool, consumer uint64,
	id txn.ID, kind actors.AckKind, ids []actors.AckID, role string) error {
	tc := t.brk.cfg.Txn
	if tc == nil {
		return fmt.Errorf("%w: transactions are disabled on this cluster (transactions.enabled)", ErrNotAllowed)
	}
	if !durable {
		return fmt.Errorf("%w: an acknowledgement in a transaction needs a durable subscription", ErrNotAllowed)
	}
	topic := t.name.String()
	// The transaction lists the subscription (its record is not forgotten
	// while the subscription holds its acks), and is open and the role's.
	if err := tc.TrackSubscription(ctx, id, txn.Sub{Topic: topic, Sub: name}, role); err != nil {
		return err
	}
	k := txnAckKey{sub: sub, id: id}
	st := t.txnAckState(k)
	// Told of the end before the ack is applied: an end that comes first
	// finds nothing of it, and the ack, applied after, is dropped again
	// (settleTxnAck).
	st.mu.Lock()
	first := !st.awaiting
	st.awaiting = true
	st.mu.Unlock()
	if first {
		t.awaitTxnAcks(tc, k, st, name)
	}
	done := make(chan txnAckResult, 1)
	sub.AckTxn(consumer, actors.TxnID(id), kind, ids, func(ranges []actors.AckRange, cumulative bool, err error) {
		done <- txnAckResult{ranges, cumulative, st.gen.Add(1), err} // the actor's goroutine: takes no lock
	})
	select {
	case res := <-done:
		return t.settleTxnAck(ctx, tc, k, st, name, res)
	case <-ctx.Done():
		// The client is told it failed; the ack may still apply: settled
		// when it does, it is pending in memory (not saved) and the
		// transaction's end applies or drops it all the same.
		go func() {
			res := <-done
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			t.settleTxnAck(sctx, tc, k, st, name, res)
		}()
		return ctx.Err()
	}
}

// txnAckResult is the subscription actor's answer to an AckTxn.
type txnAckResult struct {
	ranges     []actors.AckRange
	cumulative bool
	gen        int64
	err        error
}

// settleTxnAck saves what the subscription holds pending for k's
// transaction after an ack applied, or drops the ack when the transaction
// ended meanwhile.
func (t *Topic[P, C]) settleTxnAck(ctx context.Context, tc txn.Coordinator, k txnAckKey, st *txnAckState, name string, res txnAckResult) error {
	if res.err != nil {
		return res.err
	}
	topic := t.name.String()
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.ended {
		// The transaction ended between the check and the ack: the ack is
		// not part of it. Drop it again (an abort of what is left pending).
		if err := k.sub.EndTxn(actors.TxnID(k.id), false); err != nil && !errors.Is(err, actors.ErrSubscriptionClosed) {
			t.brk.cfg.Logger.Warn("dropping a late acknowledgement in an ended transaction", "topic", topic, "subscription", name, "txn", k.id, "err", err)
		}
		return fmt.Errorf("%w: transaction %v ended while acknowledging", txn.ErrInvalidStatus, k.id)
	}
	if res.gen > st.saved {
		if err := tc.SaveAcks(ctx, topic, name, k.id, encodeTxnAcks(res.ranges, res.cumulative)); err != nil {
			return err
		}
		st.saved = res.gen
	}
	return nil
}

// awaitTxnAcks has the coordinator report the end of k's transaction, and
// then applies (commit) or drops (abort) its pending acks on the
// subscription and deletes their key.
func (t *Topic[P, C]) awaitTxnAcks(tc txn.Coordinator, k txnAckKey, st *txnAckState, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := tc.Await(ctx, k.id, func(committed bool) {
		go t.endTxnAcks(tc, k, st, name, committed) // Await's callbacks must not block
	})
	if err != nil {
		// Still registered: the coordinator's watch reports the end.
		t.brk.cfg.Logger.Warn("reading a transaction's state", "topic", t.name.String(), "txn", k.id, "err", err)
	}
}

// endTxnAcks carries out the end of k's transaction on the subscription.
// It retries until the subscription applied it or stopped (its next
// actor loads the saved acks and does it).
func (t *Topic[P, C]) endTxnAcks(tc txn.Coordinator, k txnAckKey, st *txnAckState, name string, committed bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.ended {
		return
	}
	st.ended = true
	topic := t.name.String()
	for backoff := 50 * time.Millisecond; ; backoff = min(2*backoff, 5*time.Second) {
		err := k.sub.EndTxn(actors.TxnID(k.id), committed)
		if errors.Is(err, actors.ErrSubscriptionClosed) {
			t.forgetTxnAckState(k)
			return
		}
		if err == nil {
			break
		}
		t.brk.cfg.Logger.Warn("applying a transaction's end to a subscription", "topic", topic, "subscription", name, "txn", k.id, "commit", committed, "err", err)
		select {
		case <-k.sub.Done():
			t.forgetTxnAckState(k)
			return
		case <-time.After(backoff):
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tc.DeleteAcks(ctx, topic, name, k.id); err != nil {
		// The key outlives its acks: the next load resolves it again (a
		// commit applied twice is one ack; an abort drops nothing more).
		t.brk.cfg.Logger.Warn("deleting a transaction's applied acknowledgements", "topic", topic, "subscription", name, "txn", k.id, "err", err)
	}
	t.forgetTxnAckState(k)
}

// restoreTxnAcks loads the pending acks saved for subscription name into
// its new actor sub and awaits their transactions. Called before any
// consumer attaches (Subscription, t.mu held).
func (t *Topic[P, C]) restoreTxnAcks(ctx context.Context, sub *actors.SubscriptionActor, name string) error {
	tc := t.brk.cfg.Txn
	if tc == nil {
		return nil
	}
	saved, err := tc.LoadAcks(ctx, t.name.String(), name)
	if err != nil {
		return fmt.Errorf("loading the subscription's pending acknowledgements: %w", err)
	}
	for id, v := range saved {
		ranges, cumulative, err := decodeTxnAcks(v)
		if err != nil {
			return fmt.Errorf("subscription %s, transaction %v: %w", name, id, err)
		}
		if err := sub.RestoreTxnAcks(actors.TxnID(id), ranges, cumulative); err != nil {
			return err
		}
		k := txnAckKey{sub: sub, id: id}
		st := t.txnAckState(k)
		st.mu.Lock()
		st.awaiting = true
		st.mu.Unlock()
		t.awaitTxnAcks(tc, k, st, name)
	}
	return nil
}
