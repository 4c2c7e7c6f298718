package actors

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/lakegate/lakegate/lakestream"
)

// heldLog is a lakestream.Log whose AppendAsync holds each append until the
// test completes it. Methods the partition actor does not call here are left
// to the embedded nil interface (calling them panics).
type heldLog struct {
	lakestream.Log

	mu   sync.Mutex
	next int64
	held []func(lakestream.EntryHeader, error)
	recs []int32
}

type heldChain struct{}

func (heldChain) Err() error { return nil }

func (l *heldLog) NewAppendChain() lakestream.AppendChain { return heldChain{} }

func (l *heldLog) AppendAsync(_ context.Context, records int, _ []byte, done func(lakestream.EntryHeader, error), _ ...lakestream.AppendOption) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held = append(l.held, done)
	l.recs = append(l.recs, int32(records))
	return nil
}

// completeAll commits every append held, in order, from another goroutine
// (as the engine does).
func (l *heldLog) completeAll() {
	l.mu.Lock()
	held, recs := l.held, l.recs
	l.held, l.recs = nil, nil
	l.mu.Unlock()
	go func() {
		for i, done := range held {
			l.mu.Lock()
			h := lakestream.EntryHeader{Offset: l.next, Records: recs[i]}
			l.next += int64(recs[i])
			l.mu.Unlock()
			done(h, nil)
		}
	}()
}

func (l *heldLog) heldCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.held)
}

// eventSink records what the partition tells one producer.
type eventSink struct{ events chan any }

type sendFailedEvent struct {
	seq uint64
	err error
}

func (s *eventSink) Receipt(r SendReceipt)            { s.events <- r }
func (s *eventSink) SendFailed(seq uint64, err error) { s.events <- sendFailedEvent{seq, err} }
func (s *eventSink) Promoted(uint64, int64)           {}
func (s *eventSink) FencedOut(bool)                   {}
func (s *eventSink) CloseDone()                       {}
func (s *eventSink) Closed(string)                    { s.events <- "closed" }

// AppendsInflightMax bounds the appends in flight (each holds a reservation
// for its outcome): a SEND beyond it fails with ErrPartitionBusy — answered
// in SEND order, after the receipts of the appends before it — instead of
// growing the actor's queue; the partition goes on serving.
func TestPartitionActorAppendsInflightMax(t *testing.T) {
	rt := NewRuntime(nil)
	defer rt.Shutdown()
	log := &heldLog{}
	a := StartPartition(rt, PartitionOptions{Name: "t", Log: log, State: &LoadedPartition{}, AppendsInflightMax: 2})
	sink := &eventSink{events: make(chan any, 16)}
	if ans := a.AddProducer(ProducerSpec{ID: 1, Name: "p"}, sink); ans.Err != nil {
		t.Fatal(ans.Err)
	}
	for seq := range uint64(3) {
		if err := a.Send(1, SendRequest{Seq: seq, Records: 1, Payload: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	if i := a.Info(); i.Inflight != 2 || log.heldCount() != 2 {
		t.Fatalf("in flight: machine %d, log %d; want 2 and 2", i.Inflight, log.heldCount())
	}
	log.completeAll()
	for seq := range uint64(2) {
		if r, ok := (<-sink.events).(SendReceipt); !ok || r.Seq != seq {
			t.Fatalf("event %d: %#v, want the receipt of SEND %d", seq, r, seq)
		}
	}
	if f, ok := (<-sink.events).(sendFailedEvent); !ok || f.seq != 2 || !errors.Is(f.err, ErrPartitionBusy) {
		t.Fatalf("SEND 2: %#v, want SendFailed(2, ErrPartitionBusy)", f)
	}
	// A new producer appends again once the appends in flight ended.
	sink2 := &eventSink{events: make(chan any, 16)}
	if ans := a.AddProducer(ProducerSpec{ID: 2, Name: "q"}, sink2); ans.Err != nil {
		t.Fatal(ans.Err)
	}
	a.Send(2, SendRequest{Seq: 0, Records: 1, Payload: []byte("y")})
	a.Info() // a round trip behind the SEND: it was handled once Info returns
	if n := log.heldCount(); n != 1 {
		t.Fatalf("appends held after the limit: %d, want 1", n)
	}
	log.completeAll()
	if r, ok := (<-sink2.events).(SendReceipt); !ok || r.Seq != 0 {
		t.Fatalf("after the limit: %#v, want a receipt", r)
	}
	a.Unload(false, "")
	if err := a.Send(2, SendRequest{Seq: 1, Records: 1}); !errors.Is(err, ErrPartitionClosed) {
		t.Fatalf("Send after unload: %v, want ErrPartitionClosed", err)
	}
}
