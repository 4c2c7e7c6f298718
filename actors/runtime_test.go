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
