package actors

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/lakegate/lakegate/lakestream"
)

// partHarness drives a Partition like the actor does and records what it
// asks for.
type partHarness struct {
	t    *testing.T
	p    *Partition
	next int64 // the log's next offset
	acts []Action
}

func newPartHarness(t *testing.T, cfg PartitionConfig, st PartitionState) *partHarness {
	return &partHarness{t: t, p: NewPartition(cfg, st)}
}

func (h *partHarness) do(acts []Action) []Action {
	h.acts = append(h.acts, acts...)
	return acts
}

// take returns and forgets the recorded actions.
func (h *partHarness) take() []Action {
	a := h.acts
	h.acts = nil
	return a
}

func (h *partHarness) add(id uint64, name string, mode AccessMode, epoch *uint64) ProducerAnswer {
	h.t.Helper()
	for _, a := range h.do(h.p.AddProducer(ProducerSpec{ID: id, Name: name, Mode: mode, Epoch: epoch})) {
		if pa, ok := a.(ProducerAnswer); ok && pa.Producer == id {
			return pa
		}
	}
	return ProducerAnswer{Producer: id, Err: errNoAnswer}
}

var errNoAnswer = errors.New("no answer yet")

func (h *partHarness) send(id, seq uint64) {
	h.do(h.p.Send(id, SendRequest{Seq: seq, Highest: seq, Records: 1, Payload: []byte(fmt.Sprint(seq))}))
}

// appends returns the AppendEntry actions recorded (and keeps the rest).
func (h *partHarness) appends() []AppendEntry {
	var out []AppendEntry
	var rest []Action
	for _, a := range h.acts {
		if ae, ok := a.(AppendEntry); ok {
			out = append(out, ae)
		} else {
			rest = append(rest, a)
		}
	}
	h.acts = rest
	return out
}

// commit completes appends in the order given, at consecutive offsets.
func (h *partHarness) commit(aes ...AppendEntry) {
	for _, ae := range aes {
		hd := lakestream.EntryHeader{Offset: h.next, Records: ae.Records}
		h.next += int64(ae.Records)
		h.do(h.p.AppendDone(ae.Token, hd, nil))
	}
}

// fail completes an append with err.
func (h *partHarness) fail(ae AppendEntry, err error) {
	h.do(h.p.AppendDone(ae.Token, lakestream.EntryHeader{}, err))
}

func (h *partHarness) receipts() []string {
	var out []string
	var rest []Action
	for _, a := range h.acts {
		switch a := a.(type) {
		case SendReceipt:
			if a.Dup {
				out = append(out, fmt.Sprintf("p%d:%d dup", a.Producer, a.Seq))
			} else {
				out = append(out, fmt.Sprintf("p%d:%d@%d", a.Producer, a.Seq, a.Header.Offset))
			}
		case SendFailed:
			out = append(out, fmt.Sprintf("p%d:%d failed", a.Producer, a.Seq))
		default:
			rest = append(rest, a)
		}
	}
	h.acts = rest
	return out
}

func wantStrings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !reflect.DeepEqual(got, want) && (len(got) > 0 || len(want) > 0) {
		t.Fatalf("%s: got %q, want %q", what, got, want)
	}
}

func wantAnswer(t *testing.T, a ProducerAnswer, wantErr error, ready bool) {
	t.Helper()
	if wantErr != nil {
		if !errors.Is(a.Err, wantErr) {
			t.Fatalf("producer %d: answer %v, want %v", a.Producer, a.Err, wantErr)
		}
		return
	}
	if a.Err != nil || a.Ready != ready {
		t.Fatalf("producer %d: answer err=%v ready=%v, want ready=%v", a.Producer, a.Err, a.Ready, ready)
	}
}

// persistEpoch completes the PersistEpoch recorded, if any, and returns the
// actions it produced.
func (h *partHarness) persistEpoch(err error) []Action {
	h.t.Helper()
	for i, a := range h.acts {
		if pe, ok := a.(PersistEpoch); ok {
			h.acts = append(h.acts[:i:i], h.acts[i+1:]...)
			return h.do(h.p.EpochPersisted(pe.Epoch, err))
		}
	}
	h.t.Fatal("no PersistEpoch asked for")
	return nil
}

// The access-mode rules: refusals, queueing, fencing, promotion and the
// topic epoch, with each new epoch made durable before the producer is
// answered.
func TestPartitionAccessModes(t *testing.T) {
	h := newPartHarness(t, PartitionConfig{}, PartitionState{})
	wantAnswer(t, h.add(1, "s", AccessShared, nil), nil, true)
	wantAnswer(t, h.add(2, "s", AccessShared, nil), ErrProducerBusy, false)
	wantAnswer(t, h.add(3, "x", AccessExclusive, nil), ErrProducerFenced, false)
	wantAnswer(t, h.add(4, "w", AccessWaitForExclusive, nil), nil, false)
	wantAnswer(t, h.add(5, "s2", AccessShared, nil), ErrProducerBusy, false)
	h.take()

	// ExclusiveWithFencing fences the attached and the waiting producer,
	// and is answered once epoch 0 is durable.
	if a := h.add(6, "f", AccessExclusiveWithFencing, nil); !errors.Is(a.Err, errNoAnswer) {
		t.Fatalf("fencing producer answered before its epoch was durable: %+v", a)
	}
	var fenced []string
	for _, a := range h.take() {
		switch a := a.(type) {
		case ProducerFencedOut:
			fenced = append(fenced, fmt.Sprintf("%d waiting=%v", a.Producer, a.Waiting))
		case PersistEpoch:
			h.acts = append(h.acts, a)
			if a.Epoch != 0 {
				t.Fatalf("first epoch %d, want 0", a.Epoch)
			}
		}
	}
	wantStrings(t, "fenced", fenced, []string{"4 waiting=true", "1 waiting=false"})
	acts := h.persistEpoch(nil)
	if len(acts) != 1 || acts[0].(ProducerAnswer).Producer != 6 || !acts[0].(ProducerAnswer).Ready {
		t.Fatalf("after the epoch persisted: %+v", acts)
	}
	h.do(h.p.RemoveProducer(6))
	h.do(h.p.RemoveProducer(1)) // a fenced producer's late close changes nothing

	// A new exclusive producer gets epoch 1.
	h.add(7, "x", AccessExclusive, nil)
	h.take()
	if acts := h.do(h.p.EpochPersisted(1, nil)); acts[0].(ProducerAnswer).Epoch != 1 {
		t.Fatalf("epoch %+v, want 1", acts)
	}
	h.do(h.p.RemoveProducer(7))
	old, held := uint64(0), uint64(1)
	wantAnswer(t, h.add(8, "x", AccessExclusive, &old), ErrProducerFenced, false)
	// The holder reconnecting with the durable epoch is answered at once.
	wantAnswer(t, h.add(9, "x", AccessExclusive, &held), nil, true)
	if e, _ := h.p.Epoch(); e != 1 {
		t.Fatalf("reconnect with the held epoch moved it to %d", e)
	}
	// ... and a second reconnection under the same name and epoch replaces
	// the first (its old connection is still open).
	wantAnswer(t, h.add(10, "x", AccessExclusive, &held), nil, true)
	var replaced bool
	for _, a := range h.take() {
		if f, ok := a.(ProducerFencedOut); ok && f.Producer == 9 {
			replaced = true
		}
	}
	if !replaced || h.p.Producers() != 1 {
		t.Fatalf("old holder not replaced: producers %d", h.p.Producers())
	}
}

// WaitForExclusive: queued while others produce, promoted (with a new
// epoch, once durable) when the last one leaves.
func TestPartitionWaitForExclusivePromotion(t *testing.T) {
	h := newPartHarness(t, PartitionConfig{}, PartitionState{Epoch: 4, HasEpoch: true})
	wantAnswer(t, h.add(1, "a", AccessShared, nil), nil, true)
	wantAnswer(t, h.add(2, "w1", AccessWaitForExclusive, nil), nil, false)
	wantAnswer(t, h.add(3, "w2", AccessWaitForExclusive, nil), nil, false)
	h.take()
	h.send(2, 0)
	wantStrings(t, "send of a waiting producer", h.receipts(), []string{"p2:0 failed"})
	h.do(h.p.CloseProducer(1))
	acts := h.persistEpoch(nil)
	if len(acts) != 1 {
		t.Fatalf("promotion: %+v", acts)
	}
	if pr, ok := acts[0].(ProducerPromoted); !ok || pr.Producer != 2 || pr.Epoch != 5 {
		t.Fatalf("promotion: %+v, want producer 2 at epoch 5", acts[0])
	}
	h.send(2, 0)
	h.commit(h.appends()...)
	wantStrings(t, "promoted producer sends", h.receipts(), []string{"p2:0@0"})
	// w2 is promoted after w1 leaves; a failed epoch persist refuses it.
	h.take()
	h.do(h.p.RemoveProducer(2))
	acts = h.persistEpoch(errors.New("etcd down"))
	if len(acts) != 1 {
		t.Fatalf("failed promotion: %+v", acts)
	}
	if f, ok := acts[0].(ProducerFencedOut); !ok || f.Producer != 3 {
		t.Fatalf("failed promotion: %+v, want producer 3 fenced out", acts[0])
	}
	if h.p.Producers() != 0 || h.p.Waiting() != 0 {
		t.Fatalf("producers %d waiting %d after a failed promotion", h.p.Producers(), h.p.Waiting())
	}
}

// An epoch that moves while its persist runs is persisted again before
// anyone is answered.
func TestPartitionEpochMovesDuringPersist(t *testing.T) {
	h := newPartHarness(t, PartitionConfig{}, PartitionState{})
	h.add(1, "a", AccessExclusiveWithFencing, nil) // epoch 0, persisting
	h.add(2, "b", AccessExclusiveWithFencing, nil) // fences a, epoch 1
	var pe []PersistEpoch
	for _, a := range h.take() {
		if p, ok := a.(PersistEpoch); ok {
			pe = append(pe, p)
		}
	}
	if len(pe) != 1 || pe[0].Epoch != 0 {
		t.Fatalf("persists %+v, want one of epoch 0", pe)
	}
	acts := h.do(h.p.EpochPersisted(0, nil))
	if len(acts) != 1 || acts[0] != (PersistEpoch{Epoch: 1}) {
		t.Fatalf("after the stale persist: %+v, want PersistEpoch 1", acts)
	}
	acts = h.do(h.p.EpochPersisted(1, nil))
	if len(acts) != 1 || acts[0].(ProducerAnswer).Producer != 2 || acts[0].(ProducerAnswer).Epoch != 1 {
		t.Fatalf("answers %+v, want producer 2 at epoch 1", acts)
	}
}

// Receipts go out in SEND order even when appends complete out of order,
// and a producer's entries are appended in SEND order.
func TestPartitionReceiptsInOrder(t *testing.T) {
	h := newPartHarness(t, PartitionConfig{}, PartitionState{})
	h.add(1, "a", AccessShared, nil)
	h.add(2, "b", AccessShared, nil)
	h.take()
	for seq := range uint64(3) {
		h.send(1, seq)
		h.send(2, seq)
	}
	aes := h.appends()
	if len(aes) != 6 {
		t.Fatalf("%d appends, want 6", len(aes))
	}
	for i, ae := range aes {
		if want := fmt.Sprint(i / 2); string(ae.Payload) != want {
			t.Fatalf("append %d carries %q, want %q", i, ae.Payload, want)
		}
	}
	// Complete the last append of each producer first: no receipt yet.
	h.do(h.p.AppendDone(aes[5].Token, lakestream.EntryHeader{Offset: 5, Records: 1}, nil))
	h.do(h.p.AppendDone(aes[4].Token, lakestream.EntryHeader{Offset: 4, Records: 1}, nil))
	wantStrings(t, "receipts before the heads completed", h.receipts(), nil)
	for i := range 4 {
		h.do(h.p.AppendDone(aes[i].Token, lakestream.EntryHeader{Offset: int64(i), Records: 1}, nil))
	}
	// p1:2 (done already) follows p1:1 at once; p2's wait for p2:1.
	wantStrings(t, "receipts", h.receipts(),
		[]string{"p1:0@0", "p2:0@1", "p1:1@2", "p1:2@4", "p2:1@3", "p2:2@5"})
	// A failed append fails its SEND and, through the append chain, the
	// producer's SENDs in flight after it (the engine fails them); its
	// later SENDs fail without an append. Another producer goes on.
	h.send(1, 3)
	h.send(1, 4)
	aes = h.appends()
	h.fail(aes[0], lakestream.ErrUnavailable)
	h.send(1, 5)
	h.fail(aes[1], lakestream.ErrChainBroken)
	h.send(2, 3)
	wantStrings(t, "after a failed append", h.receipts(), []string{"p1:3 failed", "p1:4 failed", "p1:5 failed"})
	h.next = 6
	h.commit(h.appends()...)
	wantStrings(t, "another producer", h.receipts(), []string{"p2:3@6"})
}

// A fenced log (terminated topic) fails the SEND that found it and every
// later one, and refuses new producers.
func TestPartitionTerminated(t *testing.T) {
	h := newPartHarness(t, PartitionConfig{}, PartitionState{})
	h.add(1, "a", AccessShared, nil)
	h.send(1, 0)
	h.send(1, 1)
	aes := h.appends()
	h.do(h.p.AppendDone(aes[0].Token, lakestream.EntryHeader{}, fmt.Errorf("%w: log 1", lakestream.ErrFenced)))
	h.do(h.p.AppendDone(aes[1].Token, lakestream.EntryHeader{}, fmt.Errorf("%w: log 1", lakestream.ErrFenced)))
	h.send(1, 2)
	wantStrings(t, "sends to a terminated topic", h.receipts(), []string{"p1:0 failed", "p1:1 failed", "p1:2 failed"})
	if len(h.appends()) != 0 {
		t.Fatal("appended to a terminated topic")
	}
	wantAnswer(t, h.add(2, "b", AccessShared, nil), lakestream.ErrFenced, false)
	if !NewPartition(PartitionConfig{}, PartitionState{Terminated: true}).Terminated() {
		t.Fatal("loaded termination lost")
	}
}

// CloseProducer is answered after every SEND accepted before it; its name
// is free at once.
func TestPartitionCloseProducerDrains(t *testing.T) {
	h := newPartHarness(t, PartitionConfig{}, PartitionState{})
	h.add(1, "a", AccessShared, nil)
	h.send(1, 0)
	h.send(1, 1)
	aes := h.appends()
	h.take()
	for _, a := range h.do(h.p.CloseProducer(1)) {
		if _, ok := a.(ProducerClosed); ok {
			t.Fatal("closed before its receipts")
		}
	}
	wantAnswer(t, h.add(2, "a", AccessShared, nil), nil, true)
	h.take()
	h.commit(aes...)
	got := h.receipts()
	var closed bool
	for _, a := range h.take() {
		if c, ok := a.(ProducerClosed); ok && c.Producer == 1 {
			closed = true
		}
	}
	wantStrings(t, "receipts of a closing producer", got, []string{"p1:0@0", "p1:1@1"})
	if !closed {
		t.Fatal("no ProducerClosed after the last receipt")
	}
	h.send(1, 2)
	wantStrings(t, "send after close", h.receipts(), []string{"p1:2 failed"})
}

// Deduplication: duplicates are answered without appending; a resend
// racing its original (another connection, same name) waits for the
// original's outcome; a failed original lets its resend through.
func TestPartitionDedup(t *testing.T) {
	h := newPartHarness(t, PartitionConfig{Dedup: true}, PartitionState{Sequences: map[string]int64{"a": 9}, DedupEnd: 10})
	if a := h.add(1, "a", AccessShared, nil); a.LastSequence != 9 {
		t.Fatalf("last sequence %d, want 9", a.LastSequence)
	}
	h.take()
	h.send(1, 9)
	wantStrings(t, "resend of a durable sequence id", h.receipts(), []string{"p1:9 dup"})
	h.send(1, 10)
	h.send(1, 11)
	orig := h.appends()
	if len(orig) != 2 {
		t.Fatalf("%d appends, want 2", len(orig))
	}
	// The client reconnects (producer 2, same name) and resends 10..12
	// while 10 and 11 are still in flight on the old connection.
	h.do(h.p.RemoveProducer(1))
	h.add(2, "a", AccessShared, nil)
	h.take()
	h.send(2, 10)
	h.send(2, 11)
	h.send(2, 12)
	if aes := h.appends(); len(aes) != 0 {
		t.Fatalf("resends appended while their originals are in flight: %+v", aes)
	}
	h.next = 10
	h.commit(orig[0])                                                                        // 10 is durable: its resend is a duplicate
	h.do(h.p.AppendDone(orig[1].Token, lakestream.EntryHeader{}, lakestream.ErrUnavailable)) // 11 failed
	aes := h.appends()
	if len(aes) != 2 || string(aes[0].Payload) != "11" || string(aes[1].Payload) != "12" {
		t.Fatalf("appends after the originals ended: %+v, want 11 and 12", aes)
	}
	h.commit(aes...)
	wantStrings(t, "resends", h.receipts(), []string{"p2:10 dup", "p2:11@11", "p2:12@12"})
	if got := h.p.LastSequence("a"); got != 12 {
		t.Fatalf("last sequence %d, want 12", got)
	}
}

// Deduplication snapshots: asked for every DedupSnapshotEntries appends
// when nothing is in flight, when a producer leaves, and by Drain; never
// while appends are in flight.
func TestPartitionDedupSnapshots(t *testing.T) {
	h := newPartHarness(t, PartitionConfig{Dedup: true, DedupSnapshotEntries: 3}, PartitionState{})
	h.add(1, "a", AccessShared, nil)
	snapshots := func() []PersistDedup {
		var out []PersistDedup
		for _, a := range h.take() {
			if p, ok := a.(PersistDedup); ok {
				out = append(out, p)
			}
		}
		return out
	}
	for seq := range uint64(3) {
		h.send(1, seq)
	}
	aes := h.appends()
	h.commit(aes[:2]...)
	if s := snapshots(); len(s) != 0 {
		t.Fatalf("snapshot with appends in flight: %+v", s)
	}
	h.commit(aes[2])
	s := snapshots()
	if len(s) != 1 || s[0].End != 3 || s[0].Sequences["a"] != 2 {
		t.Fatalf("snapshots %+v, want one with a=2 below 3", s)
	}
	h.do(h.p.DedupPersisted(nil))
	h.send(1, 3)
	h.commit(h.appends()...)
	if s := snapshots(); len(s) != 0 {
		t.Fatalf("snapshot after 1 append: %+v", s)
	}
	acts := h.do(h.p.Drain())
	var drained bool
	for _, a := range acts {
		if _, ok := a.(Drained); ok {
			drained = true
		}
	}
	if s := snapshots(); len(s) != 1 || s[0].Sequences["a"] != 3 || !drained {
		t.Fatalf("drain: snapshots %+v drained %v", s, drained)
	}
	h.send(1, 4)
	var refused bool
	for _, a := range h.take() {
		if f, ok := a.(SendFailed); ok && errors.Is(f.Err, ErrPartitionClosed) {
			refused = true
		}
	}
	if !refused {
		t.Fatal("SEND accepted while draining")
	}
}

// Drain waits for the appends in flight.
func TestPartitionDrainWaitsForAppends(t *testing.T) {
	h := newPartHarness(t, PartitionConfig{}, PartitionState{})
	h.add(1, "a", AccessShared, nil)
	h.send(1, 0)
	aes := h.appends()
	h.take()
	for _, a := range h.do(h.p.Drain()) {
		if _, ok := a.(Drained); ok {
			t.Fatal("drained with an append in flight")
		}
	}
	h.commit(aes...)
	wantStrings(t, "receipt before Drained", h.receipts(), []string{"p1:0@0"})
	var drained bool
	for _, a := range h.take() {
		if _, ok := a.(Drained); ok {
			drained = true
		}
	}
	if !drained {
		t.Fatal("not drained after the last append")
	}
	if ids := h.p.Close(); len(ids) != 1 || ids[0] != 1 {
		t.Fatalf("Close returned %v, want [1]", ids)
	}
	wantAnswer(t, h.add(2, "b", AccessShared, nil), ErrPartitionClosed, false)
}

// Failures keep each producer's order (docs/dedup.md, "Order and
// failures"), the sequence that lost acknowledged messages of a
// deduplicated topic: a producer's SEND fails while its later SENDs are in
// flight. The engine fails every later append of the chain; the machine
// issues nothing until they have all ended, then starts a new chain, fails
// the later SENDs of the producers that saw a failure and appends the
// others'. A new owner, loading the state from what was stored, then
// appends the client's resends instead of answering them as duplicates.
func TestPartitionFailedAppendKeepsOrder(t *testing.T) {
	h := newPartHarness(t, PartitionConfig{Dedup: true}, PartitionState{Sequences: map[string]int64{"p2": 74}, DedupEnd: 75})
	h.next = 75
	h.add(1, "p1", AccessShared, nil)
	h.add(2, "p2", AccessShared, nil)
	h.add(3, "p3", AccessShared, nil)
	h.take()
	h.send(1, 10)
	for seq := uint64(75); seq < 78; seq++ {
		h.send(2, seq)
	}
	h.send(1, 11)
	aes := h.appends() // p1:10 p2:75 p2:76 p2:77 p1:11
	if len(aes) != 5 {
		t.Fatalf("%d appends, want 5", len(aes))
	}
	for _, ae := range aes {
		if ae.Chain != 1 {
			t.Fatalf("append %q of chain %d, want 1", ae.Payload, ae.Chain)
		}
	}
	h.commit(aes[0])
	h.fail(aes[1], lakestream.ErrUnavailable) // p2:75's object failed
	// While the chain's appends are in flight nothing is appended: a SEND
	// of the producer that failed, and one of a producer that has not
	// (yet: p3 has nothing in flight, p1 has).
	h.send(2, 78)
	h.send(3, 0)
	h.send(1, 12)
	if aes := h.appends(); len(aes) != 0 {
		t.Fatalf("appended while the broken chain has appends in flight: %+v", aes)
	}
	// The engine fails the chain's later appends.
	for _, ae := range aes[2:] {
		h.fail(ae, fmt.Errorf("%w: %w", lakestream.ErrChainBroken, lakestream.ErrUnavailable))
	}
	next := h.appends()
	if len(next) != 1 || string(next[0].Payload) != "0" || next[0].Chain != 2 {
		t.Fatalf("appends once the chain ended: %+v, want p3:0 on chain 2", next)
	}
	h.commit(next...)
	got := h.receipts()
	wantStrings(t, "receipts", got, []string{"p1:10@75", "p2:75 failed", "p2:76 failed", "p2:77 failed", "p2:78 failed",
		"p1:11 failed", "p1:12 failed", "p3:0@76"})
	for _, a := range h.do(h.p.Send(2, SendRequest{Seq: 79, Highest: 79, Records: 1})) {
		if f, ok := a.(SendFailed); !ok || !errors.Is(f.Err, ErrEarlierSendFailed) || !errors.Is(f.Err, lakestream.ErrUnavailable) {
			t.Fatalf("a later SEND of the failed producer: %+v, want ErrEarlierSendFailed wrapping the failure", a)
		}
	}
	if h.p.LastSequence("p2") != 74 {
		t.Fatalf("last sequence of p2 %d, want 74", h.p.LastSequence("p2"))
	}

	// A new owner loads what the log holds (p2 up to 74) and the client of
	// p2 resends 75..78 on its new connection: all appended, in order.
	h2 := newPartHarness(t, PartitionConfig{Dedup: true}, PartitionState{Sequences: map[string]int64{"p1": 10, "p2": 74, "p3": 0}, DedupEnd: 77})
	h2.next = 77
	h2.add(4, "p2", AccessShared, nil)
	h2.take()
	for seq := uint64(75); seq < 79; seq++ {
		h2.send(4, seq)
	}
	h2.commit(h2.appends()...)
	wantStrings(t, "resends on the new owner", h2.receipts(), []string{"p4:75@77", "p4:76@78", "p4:77@79", "p4:78@80"})
}

// An append refused for its own entry (ErrTooLarge, ErrInvalidArgument)
// takes no place in the log's order: it fails its SEND only.
func TestPartitionRefusedEntryKeepsChain(t *testing.T) {
	h := newPartHarness(t, PartitionConfig{}, PartitionState{})
	h.add(1, "a", AccessShared, nil)
	h.take()
	h.send(1, 0)
	h.fail(h.appends()[0], lakestream.ErrTooLarge)
	h.send(1, 1)
	aes := h.appends()
	if len(aes) != 1 || aes[0].Chain != 1 {
		t.Fatalf("appends after a refused entry: %+v, want one on chain 1", aes)
	}
	h.commit(aes...)
	wantStrings(t, "receipts", h.receipts(), []string{"p1:0 failed", "p1:1@0"})
}

// seqsInFlight keeps the highest sequence id in flight through appends
// that end in any order.
func TestSeqsInFlight(t *testing.T) {
	f := &seqsInFlight{counts: map[int64]int{}}
	for _, h := range []int64{5, 3, 7, 5} {
		f.add(h)
	}
	for _, step := range []struct{ remove, max int64 }{{7, 5}, {3, 5}, {5, 5}, {5, -1}} {
		f.remove(step.remove)
		if len(f.counts) == 0 {
			if step.max != -1 {
				t.Fatalf("after removing %d: empty, want max %d", step.remove, step.max)
			}
			continue
		}
		if f.max != step.max {
			t.Fatalf("after removing %d: max %d, want %d", step.remove, f.max, step.max)
		}
	}
	f.add(2)
	if f.max != 2 {
		t.Fatalf("max %d after emptied then 2 added", f.max)
	}
}
