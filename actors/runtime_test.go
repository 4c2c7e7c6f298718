package actors

import "testing"

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
	ref := rt.Spawn(r, 4)
	for i := range 100 {
		ref.Send(i) // blocks while the 4-message mailbox is full
	}
	for want := range 100 {
		if got := <-r.got; got != want {
			t.Fatalf("got %v, want %d", got, want)
		}
	}
	ref.Stop()
	<-r.stopped
}

// Notify never blocks, even with a full mailbox, and coalesces: a burst of
// Notifies queues one Wake; a Notify after the Wake was received queues
// another.
func TestRuntimeNotify(t *testing.T) {
	rt := NewRuntime(nil)
	defer rt.Shutdown()
	gate := make(chan struct{})
	r := &gatedRecorder{gate: gate, got: make(chan any, 100)}
	ref := rt.Spawn(r, 2)
	ref.Send("a") // taken by the actor, which then blocks on gate
	ref.Send("b")
	ref.Send("c") // the mailbox (2) is now full
	for range 10 {
		ref.Notify() // must not block
	}
	close(gate)
	for _, want := range []any{"a", "b", "c", Wake{}} {
		if got := <-r.got; got != want {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	ref.Notify()
	if got := <-r.got; got != (Wake{}) {
		t.Fatalf("after a received Wake, Notify queued %v, want Wake", got)
	}
	select {
	case extra := <-r.got:
		t.Fatalf("unexpected %v: Notifies did not coalesce", extra)
	default:
	}
}

// A Send to a stopped actor returns (dropped) instead of blocking, even when
// its mailbox was full.
func TestRuntimeSendAfterStop(t *testing.T) {
	rt := NewRuntime(nil)
	defer rt.Shutdown()
	r := &recorder{got: make(chan any, 100), stopped: make(chan struct{})}
	ref := rt.Spawn(r, 1)
	ref.Stop()
	<-ref.Done()
	for i := range 10 {
		ref.Send(i)
	}
	ref.Notify()
}

type gatedRecorder struct {
	gate chan struct{}
	got  chan any
}

func (r *gatedRecorder) Receive(m any) { <-r.gate; r.got <- m }
func (r *gatedRecorder) Stopped()      {}
