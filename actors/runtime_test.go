package actors

import (
	"errors"
	"testing"
)

type recorder struct {
	got     chan any
	stopped chan struct{}
}

func (r *recorder) Receive(m any) { r.got <- m }
func (r *recorder) Stopped()      { close(r.stopped) }

// Messages from one sender arrive in order; Stop runs Stopped once.
func TestRuntimeOrderAndStop(t *testing.T) {
	rt := NewRuntime(nil)
	defer rt.Shutdown()
	r := &recorder{got: make(chan any, 100), stopped: make(chan struct{})}
	ref := rt.Spawn(r, Mailbox{SendMsgs: 4})
	for i := range 100 {
		if err := ref.Send(i); err != nil { // waits while the 4-message mailbox is full
			t.Fatal(err)
		}
	}
	for want := range 100 {
		if got := <-r.got; got != want {
			t.Fatalf("got %v, want %d", got, want)
		}
	}
	ref.Stop()
	<-r.stopped
}

// A Reservation's Send never blocks, even with a full mailbox; a place
// holds one message at a time (a Send while it is queued is refused: the
// caller coalesces on it); ReservedMax bounds the reservations held, and a
// reservation released with its message queued counts until the message is
// received.
func TestRuntimeReservations(t *testing.T) {
	rt := NewRuntime(nil)
	defer rt.Shutdown()
	gate := make(chan struct{})
	r := &gatedRecorder{gate: gate, got: make(chan any, 100)}
	ref := rt.Spawn(r, Mailbox{SendMsgs: 2, ReservedMax: 2})
	res1, err := ref.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	res2, err := ref.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ref.Reserve(); !errors.Is(err, ErrMailboxFull) {
		t.Fatalf("third Reserve: %v, want ErrMailboxFull", err)
	}
	ref.Send("a") // taken by the actor, which then blocks on gate
	ref.Send("b")
	ref.Send("c") // the mailbox's 2 sent places are now full
	if !res1.Send("r1") {
		t.Fatal("Send on an empty place refused")
	}
	for range 10 {
		if res1.Send("again") { // must not block, and is refused: r1 is queued
			t.Fatal("a place queued two messages")
		}
	}
	res2.Send("r2")
	res2.Release() // still delivered; the reservation counts until then
	if _, err := ref.Reserve(); !errors.Is(err, ErrMailboxFull) {
		t.Fatalf("Reserve with r2 queued: %v, want ErrMailboxFull", err)
	}
	close(gate)
	for _, want := range []any{"a", "b", "c", "r1", "r2"} {
		if got := <-r.got; got != want {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	if !res1.Send("r1 again") {
		t.Fatal("after its message was received, the place refused another")
	}
	if got := <-r.got; got != "r1 again" {
		t.Fatalf("got %v, want r1 again", got)
	}
	res3, err := ref.Reserve() // r2's reservation came back on receipt
	if err != nil {
		t.Fatalf("Reserve after r2 was received: %v", err)
	}
	res3.Release()
	res1.Release()
	if res1.Send("late") {
		t.Fatal("Send on a released reservation queued")
	}
}

// Send and Reserve on a stopped actor return ErrStopped instead of
// blocking, even when its mailbox was full; a reservation's Send queues
// nothing.
func TestRuntimeSendAfterStop(t *testing.T) {
	rt := NewRuntime(nil)
	defer rt.Shutdown()
	r := &recorder{got: make(chan any, 100), stopped: make(chan struct{})}
	ref := rt.Spawn(r, Mailbox{SendMsgs: 1, ReservedMax: 1})
	res, err := ref.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	ref.Stop()
	<-ref.Done()
	for i := range 10 {
		if err := ref.Send(i); !errors.Is(err, ErrStopped) {
			t.Fatalf("Send after stop: %v, want ErrStopped", err)
		}
	}
	if _, err := ref.Reserve(); !errors.Is(err, ErrStopped) {
		t.Fatalf("Reserve after stop: %v, want ErrStopped", err)
	}
	if res.Send("x") {
		t.Fatal("a reservation queued on a stopped actor")
	}
}

type gatedRecorder struct {
	gate chan struct{}
	got  chan any
}

func (r *gatedRecorder) Receive(m any) { <-r.gate; r.got <- m }
func (r *gatedRecorder) Stopped()      {}
