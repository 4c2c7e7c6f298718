package actors

// Deduplication of transactional (staged) SENDs by the partition machine
// (docs/dedup.md, "Transactional sends"): one sequence per producer name
// across staged and plain SENDs; a staging set learned (LoadStaged,
// StagedLoaded) before the first SEND into it is judged; the bounds on
// learned sets and reads in flight.
//
//	go test ./actors -run 'TestPartitionStaged|TestPartitionActorStaged' -v

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/engine"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
	"github.com/lakegate/lakegate/objstore"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

func (h *partHarness) sendStaged(id, seq uint64, set string) {
	h.do(h.p.Send(id, SendRequest{Seq: seq, Highest: seq, Records: 1, Payload: []byte(fmt.Sprint(seq)), Stage: set}))
}

// commitStaged completes staged appends: durable, no offset.
func (h *partHarness) commitStaged(aes ...AppendEntry) {
	h.t.Helper()
	for _, ae := range aes {
		if ae.Stage == "" {
			h.t.Fatalf("append %d is not staged", ae.Token)
		}
		h.do(h.p.AppendDone(ae.Token, lakestream.EntryHeader{Offset: -1, Records: ae.Records}, nil))
	}
}

// loads returns the sets of the LoadStaged actions recorded (and keeps the
// rest).
func (h *partHarness) loads() []string {
	var out []string
	var rest []Action
	for _, a := range h.acts {
		if l, ok := a.(LoadStaged); ok {
			out = append(out, l.Set)
		} else {
			rest = append(rest, a)
		}
	}
	h.acts = rest
	return out
}

// payloads names the appends: payload, and the set when staged.
func payloads(aes []AppendEntry) []string {
	var out []string
	for _, ae := range aes {
		s := string(ae.Payload)
		if ae.Stage != "" {
			s += " in " + ae.Stage
		}
		out = append(out, s)
	}
	return out
}

// TestPartitionStagedDedup: on one owner, a resend into a set is a
// duplicate once the original is durable, waits while it is in flight,
// and staged and plain SENDs share the producer's sequence; a staged
// append moves neither the log end the snapshot covers nor anything when
// deduplication is off.
func TestPartitionStagedDedup(t *testing.T) {
	h := newPartHarness(t, PartitionConfig{Dedup: true}, PartitionState{})
	h.add(1, "a", AccessShared, nil)
	h.take()
	h.sendStaged(1, 0, "txn-1")
	wantStrings(t, "first SEND into a set", h.loads(), []string{"txn-1"})
	if aes := h.appends(); len(aes) != 0 {
		t.Fatalf("appended before the set was learned: %+v", aes)
	}
	h.do(h.p.StagedLoaded("txn-1", map[string]int64{}, nil)) // nothing staged yet
	aes := h.appends()
	wantStrings(t, "after the set was learned", payloads(aes), []string{"0 in txn-1"})
	h.commitStaged(aes...)
	h.sendStaged(1, 1, "txn-1")
	h.sendStaged(1, 2, "txn-1")
	if l := h.loads(); len(l) != 0 {
		t.Fatalf("a learned set read again: %v", l)
	}
	orig := h.appends()
	wantStrings(t, "SENDs into a learned set", payloads(orig), []string{"1 in txn-1", "2 in txn-1"})
	h.commitStaged(orig[0])
	wantStrings(t, "receipts", h.receipts(), []string{"p1:0@-1", "p1:1@-1"})

	// The receipt of 2 is lost: the client reconnects and resends 1 and 2
	// (2 still in flight on the old connection), then sends 3.
	h.do(h.p.RemoveProducer(1))
	h.add(2, "a", AccessShared, nil)
	h.take()
	h.sendStaged(2, 1, "txn-1")
	h.sendStaged(2, 2, "txn-1")
	h.sendStaged(2, 3, "txn-1")
	wantStrings(t, "resend of a durable staged SEND", h.receipts(), []string{"p2:1 dup"})
	if aes := h.appends(); len(aes) != 0 {
		t.Fatalf("appended while the original is in flight: %+v", payloads(aes))
	}
	h.commitStaged(orig[1])
	aes = h.appends()
	wantStrings(t, "after the original is durable", payloads(aes), []string{"3 in txn-1"})
	h.commitStaged(aes...)
	wantStrings(t, "receipts", h.receipts(), []string{"p2:2 dup", "p2:3@-1"})
	if got := h.p.LastSequence("a"); got != 3 {
		t.Fatalf("last sequence %d after staged SENDs, want 3", got)
	}

	// One sequence: a plain resend of 3 is a duplicate too (Pulsar's
	// rule), a plain 4 is stored; the snapshot covers the log's one entry.
	h.send(2, 3)
	h.send(2, 4)
	aes = h.appends()
	wantStrings(t, "plain SENDs", payloads(aes), []string{"4"})
	h.commit(aes...)
	wantStrings(t, "receipts", h.receipts(), []string{"p2:3 dup", "p2:4@0"})
	var snaps []PersistDedup
	for _, a := range h.do(h.p.Drain()) {
		if s, ok := a.(PersistDedup); ok {
			snaps = append(snaps, s)
		}
	}
	if len(snaps) != 1 || snaps[0].End != 1 || snaps[0].Sequences["a"] != 4 {
		t.Fatalf("snapshot %+v, want a=4 below offset 1 (staged appends have no offset)", snaps)
	}

	// Without deduplication a staged SEND is appended at once, twice if
	// sent twice.
	h = newPartHarness(t, PartitionConfig{}, PartitionState{})
	h.add(1, "a", AccessShared, nil)
	h.take()
	h.sendStaged(1, 0, "txn-1")
	h.sendStaged(1, 0, "txn-1")
	if l := h.loads(); len(l) != 0 {
		t.Fatalf("a set read without deduplication: %v", l)
	}
	wantStrings(t, "without deduplication", payloads(h.appends()), []string{"0 in txn-1", "0 in txn-1"})
}

// TestPartitionStagedLearn: a set unknown to the owner (staged into by an
// earlier one) is read once; the SENDs into it wait, in order per producer,
// while other SENDs go on; what was read raises the state. A failed read
// fails the waiting SENDs and their producer's later ones and leaves the
// set unknown; an ended set has nothing to learn.
func TestPartitionStagedLearn(t *testing.T) {
	h := newPartHarness(t, PartitionConfig{Dedup: true}, PartitionState{Sequences: map[string]int64{"a": 2}, DedupEnd: 3})
	h.next = 3
	for id, name := range map[uint64]string{1: "a", 2: "b", 3: "c"} {
		h.add(id, name, AccessShared, nil)
	}
	h.take()
	h.sendStaged(1, 5, "s")
	h.sendStaged(1, 6, "s")
	h.send(1, 7) // plain, behind the staged ones
	h.sendStaged(2, 0, "s")
	h.send(3, 0)
	wantStrings(t, "reads", h.loads(), []string{"s"})
	aes := h.appends()
	wantStrings(t, "while the set is read", payloads(aes), []string{"0"}) // c's plain SEND
	h.commit(aes...)
	// The earlier owner had staged a's 3..5 into s.
	h.do(h.p.StagedLoaded("s", map[string]int64{"a": 5}, nil))
	aes = h.appends()
	wantStrings(t, "after the read", payloads(aes), []string{"6 in s", "7", "0 in s"})
	h.commitStaged(aes[0])
	h.commit(aes[1])
	h.commitStaged(aes[2])
	wantStrings(t, "receipts", h.receipts(), []string{"p3:0@3", "p1:5 dup", "p1:6@-1", "p1:7@4", "p2:0@-1"})
	if got := h.p.LastSequence("a"); got != 7 {
		t.Fatalf("last sequence of a %d, want 7", got)
	}

	// A failed read.
	h.sendStaged(1, 8, "t")
	h.send(1, 9)
	wantStrings(t, "reads", h.loads(), []string{"t"})
	h.do(h.p.StagedLoaded("t", nil, lakestream.ErrUnavailable))
	if aes := h.appends(); len(aes) != 0 {
		t.Fatalf("appended after a failed read: %+v", payloads(aes))
	}
	var errs []error
	for _, a := range h.acts {
		if f, ok := a.(SendFailed); ok {
			errs = append(errs, f.Err)
		}
	}
	wantStrings(t, "after a failed read", h.receipts(), []string{"p1:8 failed", "p1:9 failed"})
	if len(errs) != 2 || !errors.Is(errs[0], lakestream.ErrUnavailable) || !errors.Is(errs[1], ErrEarlierSendFailed) {
		t.Fatalf("failures %v, want ErrUnavailable then ErrEarlierSendFailed", errs)
	}
	// The client resends on a new connection: the set is read again; this
	// time it has ended (committed or aborted): nothing to learn, the
	// SENDs go to the log, whose appends fail.
	h.do(h.p.RemoveProducer(1))
	h.add(4, "a", AccessShared, nil)
	h.take()
	h.sendStaged(4, 8, "t")
	wantStrings(t, "reads after the failure", h.loads(), []string{"t"})
	h.do(h.p.StagedLoaded("t", nil, fmt.Errorf("%w: staging set t: commit", lakestream.ErrStageEnded)))
	wantStrings(t, "into an ended set", payloads(h.appends()), []string{"8 in t"})
	h.sendStaged(2, 1, "t")
	if l := h.loads(); len(l) != 0 {
		t.Fatalf("an ended set read again: %v", l)
	}
}

// TestPartitionStagedForget: at most StagedLoadsMax reads are in flight
// (further sets queued in order) and StagedSetsMax sets learned, the
// least recently used forgotten first and read again when named; a read
// that ends after Drained judges nothing.
func TestPartitionStagedForget(t *testing.T) {
	h := newPartHarness(t, PartitionConfig{Dedup: true, StagedSetsMax: 2, StagedLoadsMax: 1}, PartitionState{})
	for id := uint64(1); id <= 3; id++ {
		h.add(id, fmt.Sprint("p", id), AccessShared, nil)
	}
	h.take()
	seq := map[uint64]uint64{}
	send := func(id uint64, set string) {
		h.sendStaged(id, seq[id], set)
		seq[id]++
	}
	send(1, "s1")
	send(2, "s2")
	send(3, "s3")
	wantStrings(t, "reads in flight", h.loads(), []string{"s1"})
	for _, set := range []string{"s1", "s2", "s3"} {
		h.do(h.p.StagedLoaded(set, nil, nil))
		aes := h.appends()
		if len(aes) != 1 || aes[0].Stage != set {
			t.Fatalf("after the read of %s: appends %v", set, payloads(aes))
		}
		h.commitStaged(aes...)
		if next := h.loads(); set != "s3" && (len(next) != 1 || next[0] == set) {
			t.Fatalf("after the read of %s, reads started: %v", set, next)
		}
	}
	// Learned in the order s1, s2, s3: s1 was forgotten.
	send(2, "s2") // s2 used: s3 is now the least recently used
	send(1, "s1")
	wantStrings(t, "a forgotten set", h.loads(), []string{"s1"})
	h.do(h.p.StagedLoaded("s1", nil, nil))
	send(3, "s3")
	wantStrings(t, "the least recently used set", h.loads(), []string{"s3"})
	send(2, "s2")
	if l := h.loads(); len(l) != 0 {
		t.Fatalf("a recently used set read again: %v", l)
	}
	aes := h.appends()
	if got := payloads(aes); len(got) != 3 {
		t.Fatalf("appends %v, want s2's, s1's and s2's", got)
	}
	h.commitStaged(aes...)
	// Unload: Drained comes while s3's read is in flight; its result
	// judges nothing (the producers are closed and resend elsewhere).
	drained := false
	for _, a := range h.do(h.p.Drain()) {
		_, ok := a.(Drained)
		drained = drained || ok
	}
	if !drained {
		t.Fatal("not drained with no append in flight")
	}
	h.take()
	if acts := h.do(h.p.StagedLoaded("s3", nil, nil)); len(acts) != 0 {
		t.Fatalf("after Drained: %+v", acts)
	}
}

// stagedEntry is a stored Pulsar entry of producer name with sequence id
// seq.
func stagedEntry(t *testing.T, name string, seq uint64) []byte {
	t.Helper()
	md, err := protocol.MarshalMetadata(&pb.MessageMetadata{ProducerName: proto.String(name), SequenceId: proto.Uint64(seq),
		PublishTime: proto.Uint64(1)})
	if err != nil {
		t.Fatal(err)
	}
	e, err := protocol.AppendEntry(nil, md, fmt.Appendf(nil, "m-%d", seq))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// nextEvent returns the sink's next event, failing the test once ctx ends.
func nextEvent(t *testing.T, ctx context.Context, s *eventSink) any {
	t.Helper()
	select {
	case ev := <-s.events:
		return ev
	case <-ctx.Done():
		t.Fatal("no event from the partition")
		return nil
	}
}

// stagedEngine is an engine on a mem store and metadata, its log 1 and an
// actor runtime, all closed when t ends, with a context of a minute.
func stagedEngine(t *testing.T) (context.Context, *engine.Engine, lakestream.Log, Runtime) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	st, err := objstore.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	ms := meta.NewMem(meta.MemOptions{})
	t.Cleanup(func() { st.Close(); ms.Close() })
	e, err := engine.New(st, ms, engine.Options{NodeID: "n", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	log, err := e.Log(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	rt := NewRuntime(nil)
	t.Cleanup(rt.Shutdown)
	return ctx, e, log, rt
}

// TestPartitionActorStagedDedup: partition actors on the engine. The owner
// that staged a transaction's SENDs stops without a word (as if killed: no
// snapshot); a new owner learns the set through Log.ReadStaged and answers
// the client's resends as duplicates; after the commit each message is in
// the log once, and an owner loaded then finds the producer's sequence in
// the log.
func TestPartitionActorStagedDedup(t *testing.T) {
	ctx, e, log, rt := stagedEngine(t)
	owner := func() (*PartitionActor, *eventSink, ProducerAnswer) {
		t.Helper()
		lp, err := LoadPartition(ctx, log, true)
		if err != nil {
			t.Fatal(err)
		}
		a := StartPartition(rt, PartitionOptions{Name: "t", Log: log, State: lp, Config: PartitionConfig{Dedup: true}})
		sink := &eventSink{events: make(chan any, 16)}
		ans := a.AddProducer(ProducerSpec{ID: 1, Name: "a"}, sink)
		if ans.Err != nil {
			t.Fatal(ans.Err)
		}
		return a, sink, ans
	}
	const set = "txn-0-7"
	send := func(a *PartitionActor, sink *eventSink, seq uint64, stage string) SendReceipt {
		t.Helper()
		if err := a.Send(1, SendRequest{Seq: seq, Highest: seq, Records: 1, Payload: stagedEntry(t, "a", seq), Stage: stage}); err != nil {
			t.Fatal(err)
		}
		r, ok := nextEvent(t, ctx, sink).(SendReceipt)
		if !ok || r.Seq != seq {
			t.Fatalf("SEND %d: %#v", seq, r)
		}
		return r
	}

	a1, sink1, _ := owner()
	for seq := range uint64(3) {
		if r := send(a1, sink1, seq, set); r.Dup || r.Header.Offset != -1 {
			t.Fatalf("staged SEND %d: %+v", seq, r)
		}
	}
	a1.Unload(false, "") // killed: no snapshot, nothing handed over

	a2, sink2, _ := owner()
	for seq := range uint64(4) {
		r := send(a2, sink2, seq+1, set)
		if r.Dup != (seq+1 <= 2) || (!r.Dup && r.Header.Offset != -1) {
			t.Fatalf("resend %d to the new owner: %+v", seq+1, r)
		}
	}
	a2.Unload(true, "")

	if err := e.CommitStaged(ctx, set); err != nil {
		t.Fatal(err)
	}
	es, err := log.ReadEntries(ctx, 0, 100, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, en := range es {
		_, p, _ := protocol.SplitEntry(en.Payload)
		got = append(got, string(p))
	}
	wantStrings(t, "the log after the commit", got, []string{"m-0", "m-1", "m-2", "m-3", "m-4"})

	// An owner loaded after the commit: the committed entries are in the
	// state (from the snapshot, and the replay of the log after it).
	a3, sink3, ans := owner()
	if ans.LastSequence != 4 {
		t.Fatalf("last sequence after the commit %d, want 4", ans.LastSequence)
	}
	if r := send(a3, sink3, 4, ""); !r.Dup {
		t.Fatalf("plain resend of a committed sequence: %+v", r)
	}
	if r := send(a3, sink3, 5, ""); r.Dup || r.Header.Offset != 5 {
		t.Fatalf("plain SEND after the commit: %+v", r)
	}
	a3.Unload(true, "")
}

// TestPartitionLoadLearnsOpenSets: the owner that staged a transaction's
// SENDs stops without a word; the next owner loads while the set is open
// and is never sent into it; the set commits, and that owner's snapshot
// covers the committed entries. The open set was read at its load, so the
// snapshot holds the producer's sequence: an owner loaded after it knows
// the last sequence id and answers a resend of a committed one as a
// duplicate (docs/dedup.md, "Transactional sends").
func TestPartitionLoadLearnsOpenSets(t *testing.T) {
	ctx, e, log, rt := stagedEngine(t)
	const set = "txn-0-9"
	load := func() (*PartitionActor, *LoadedPartition) {
		t.Helper()
		lp, err := LoadPartition(ctx, log, true)
		if err != nil {
			t.Fatal(err)
		}
		return StartPartition(rt, PartitionOptions{Name: "t", Log: log, State: lp, Config: PartitionConfig{Dedup: true}}), lp
	}
	producer := func(a *PartitionActor, id uint64, name string) (*eventSink, ProducerAnswer) {
		t.Helper()
		sink := &eventSink{events: make(chan any, 16)}
		ans := a.AddProducer(ProducerSpec{ID: id, Name: name}, sink)
		if ans.Err != nil {
			t.Fatal(ans.Err)
		}
		return sink, ans
	}
	send := func(a *PartitionActor, sink *eventSink, id uint64, name string, seq uint64, stage string) SendReceipt {
		t.Helper()
		if err := a.Send(id, SendRequest{Seq: seq, Highest: seq, Records: 1, Payload: stagedEntry(t, name, seq), Stage: stage}); err != nil {
			t.Fatal(err)
		}
		r, ok := nextEvent(t, ctx, sink).(SendReceipt)
		if !ok || r.Seq != seq {
			t.Fatalf("SEND %d of %s: %#v", seq, name, r)
		}
		return r
	}

	a1, _ := load()
	sink1, _ := producer(a1, 1, "a")
	for seq := range uint64(3) {
		send(a1, sink1, 1, "a", seq, set)
	}
	a1.Unload(false, "") // killed: no snapshot, nothing handed over

	a2, lp2 := load()
	if !slices.Equal(lp2.State.Staged, []string{set}) || lp2.State.Sequences["a"] != 2 {
		t.Fatalf("loaded with the set open: staged %q, sequences %v; want [%s], a: 2", lp2.State.Staged, lp2.State.Sequences, set)
	}
	if err := e.CommitStaged(ctx, set); err != nil {
		t.Fatal(err)
	}
	// Another producer's SEND after the commit: the owner's state now
	// covers the committed entries, and its snapshot says so.
	sinkB, _ := producer(a2, 2, "b")
	if r := send(a2, sinkB, 2, "b", 0, ""); r.Dup || r.Header.Offset != 3 {
		t.Fatalf("SEND after the commit: %+v, want offset 3", r)
	}
	a2.Unload(true, "")
	if cur, err := log.LoadCursor(ctx, DedupCursorName); err != nil || cur.MarkDeleteOffset() < 3 {
		t.Fatalf("the snapshot does not cover the committed entries: %v", err)
	}

	a3, _ := load()
	sink3, ans := producer(a3, 1, "a")
	if ans.LastSequence != 2 {
		t.Fatalf("last sequence of a restarted producer %d, want 2", ans.LastSequence)
	}
	if r := send(a3, sink3, 1, "a", 1, ""); !r.Dup {
		t.Fatalf("resend of a committed sequence: %+v, want a duplicate", r)
	}
	a3.Unload(true, "")
}

// BenchmarkPartitionStagedSend measures a partition actor's SENDs on the
// engine (mem store and metadata, 1 ms linger): one producer pipelining
// b.N SENDs of a small entry (up to 1000 outstanding, as the Go client),
// plain or staged, with deduplication off or on; "staged-newset" stages
// into a new set every 10 SENDs, so every 10th SEND waits for the read of
// its set (ReadStaged of an empty set: one metadata range read, in memory
// here — an etcd round trip in production).
//
//	go test -run '^$' -bench BenchmarkPartitionStagedSend -benchmem ./actors/
func BenchmarkPartitionStagedSend(b *testing.B) {
	for _, bc := range []struct {
		name   string
		dedup  bool
		staged bool
		every  int // a new set every so many SENDs (0: one set)
	}{
		{"plain-nodedup", false, false, 0},
		{"plain-dedup", true, false, 0},
		{"staged-nodedup", false, true, 0},
		{"staged-dedup", true, true, 0},
		{"staged-dedup-newset", true, true, 10},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			st, _ := objstore.Open(ctx, "mem://")
			ms := meta.NewMem(meta.MemOptions{})
			e, err := engine.New(st, ms, engine.Options{NodeID: "n", Linger: time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { e.Close(); ms.Close(); st.Close() }()
			log, err := e.Log(ctx, 1)
			if err != nil {
				b.Fatal(err)
			}
			lp, err := LoadPartition(ctx, log, bc.dedup)
			if err != nil {
				b.Fatal(err)
			}
			rt := NewRuntime(nil)
			defer rt.Shutdown()
			a := StartPartition(rt, PartitionOptions{Name: "b", Log: log, State: lp, Config: PartitionConfig{Dedup: bc.dedup}})
			defer a.Unload(false, "")
			sink := &eventSink{events: make(chan any, 1024)}
			if ans := a.AddProducer(ProducerSpec{ID: 1, Name: "a"}, sink); ans.Err != nil {
				b.Fatal(ans.Err)
			}
			reqs := make([]SendRequest, b.N)
			for i := range reqs {
				var stage string
				if bc.staged {
					stage = "txn-0-0"
					if bc.every > 0 {
						stage = fmt.Sprintf("txn-0-%d", i/bc.every)
					}
				}
				md, _ := protocol.MarshalMetadata(&pb.MessageMetadata{ProducerName: proto.String("a"), SequenceId: proto.Uint64(uint64(i)),
					PublishTime: proto.Uint64(1)})
				p, _ := protocol.AppendEntry(nil, md, make([]byte, 100))
				reqs[i] = SendRequest{Seq: uint64(i), Highest: uint64(i), Records: 1, Payload: p, Stage: stage}
			}
			const window = 1000
			b.ReportAllocs()
			b.ResetTimer()
			sent, got := 0, 0
			for got < b.N {
				for sent < b.N && sent-got < window {
					if err := a.Send(1, reqs[sent]); err != nil {
						b.Fatal(err)
					}
					sent++
				}
				if r, ok := (<-sink.events).(SendReceipt); !ok || r.Dup || r.Seq != uint64(got) {
					b.Fatalf("receipt %d: %#v", got, r)
				}
				got++
			}
		})
	}
}
