package actors

import (
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// Errors of the runtime: what a sender is told instead of its message being
// dropped without a word.
var (
	// ErrStopped: the actor has stopped; the message was not queued.
	// Returned by Ref.Send and Ref.Reserve.
	ErrStopped = errors.New("actors: actor stopped")
	// ErrMailboxFull: every reservation of the actor is held (Ref.Reserve);
	// the work that needed one is refused with an error wrapping this.
	ErrMailboxFull = errors.New("actors: mailbox full")
)

// Handler is the behaviour of one actor: Receive is called with one message
// at a time, never concurrently, in the order the messages were queued by
// any one sender. Stopped is called once, after the last Receive.
type Handler interface {
	Receive(msg any)
	Stopped()
}

// Ref addresses a spawned actor. Safe for concurrent use.
//
// Its mailbox is one queue with one bound: Mailbox.SendMsgs messages queued
// by Send, plus at most one message per reservation held (at most
// Mailbox.ReservedMax). See the driver contract in doc.go.
type Ref interface {
	// Send queues msg, waiting while SendMsgs sent messages are queued
	// (backpressure on the sender). Only a goroutine that may wait calls
	// it — a session's reader, a timer, a goroutine the actor started —
	// never the actor itself (it would wait for itself) and never code
	// that must not block (use a Reservation). ErrStopped once the actor
	// has stopped: msg was not queued, and Send never waits on a stopped
	// actor.
	Send(msg any) error
	// Reserve takes a reservation without waiting: a place kept in the
	// mailbox for one message at a time, which code that must not block
	// (an engine completion callback, a connection's writer) fills with
	// Reservation.Send. ErrMailboxFull when ReservedMax reservations are
	// held, ErrStopped once the actor has stopped.
	Reserve() (Reservation, error)
	// Stop stops the actor after the messages already queued; it does not
	// wait.
	Stop()
	// Done is closed once the actor has stopped (after Handler.Stopped).
	Done() <-chan struct{}
}

// Reservation is a place in an actor's mailbox for one message at a time.
// Safe for concurrent use.
type Reservation interface {
	// Send queues msg in the place. It never waits and is never refused
	// for room. It returns false, and queues nothing, when the place still
	// holds a message the actor has not received yet (that one is
	// received later than now, so callers whose messages say "look again"
	// coalesce on it), after Release, or once the actor has stopped (its
	// Stopped answered everyone).
	Send(msg any) bool
	// Release gives the reservation back; a message still queued in it is
	// received all the same. Idempotent.
	Release()
}

// Mailbox bounds an actor's mailbox.
type Mailbox struct {
	// SendMsgs bounds the messages queued by Ref.Send, in messages.
	// Default DefaultMailboxMsgs.
	SendMsgs int
	// ReservedMax bounds the reservations held at a time (Ref.Reserve),
	// each queuing at most one message. 0: the actor takes none.
	ReservedMax int
}

// Runtime spawns actors. It is the only place lakegate touches the actor
// library, so the library can be replaced without touching state machines.
type Runtime interface {
	// Spawn starts an actor driving h with mailbox bounds mb.
	Spawn(h Handler, mb Mailbox) Ref
	// Shutdown stops every actor.
	Shutdown()
}

// DefaultMailboxMsgs is the default bound of the messages an actor's
// mailbox queues from Ref.Send, in messages.
const DefaultMailboxMsgs = 1024

// NewRuntime returns a Runtime over protoactor-go's actor package (local
// actors only; no cluster, no remoting). log may be nil (discard).
func NewRuntime(log *slog.Logger) Runtime {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return log }))
	return &protoRuntime{sys: sys}
}

type protoRuntime struct {
	sys *actor.ActorSystem
}

// envelope carries a Send: receiving it frees a place of SendMsgs.
type envelope struct{ msg any }

// The bounds are enforced here — a channel of places for Send, a count of
// reservations, one message per reservation — and protoactor's mailbox is
// left unbounded: its bounded ring buffer spins (Gosched) when full and
// never lets a sender go once the actor has stopped. Only envelopes and
// places (and protoactor's own lifecycle messages) reach it, so its length
// never exceeds SendMsgs + ReservedMax.
func (r *protoRuntime) Spawn(h Handler, mb Mailbox) Ref {
	if mb.SendMsgs <= 0 {
		mb.SendMsgs = DefaultMailboxMsgs
	}
	ref := &protoRef{sys: r.sys, slots: make(chan struct{}, mb.SendMsgs), reservedMax: int64(max(mb.ReservedMax, 0)),
		done: make(chan struct{})}
	props := actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *actor.Started, *actor.Stopping, *actor.Restarting:
		case *actor.Stopped:
			h.Stopped()
			ref.markDone()
		case envelope:
			<-ref.slots
			h.Receive(m.msg)
		case *place:
			h.Receive(m.take()) // a Send from now on queues another
		}
	})
	ref.pid = r.sys.Root.Spawn(props)
	return ref
}

func (r *protoRuntime) Shutdown() { r.sys.Shutdown() }

type protoRef struct {
	sys         *actor.ActorSystem
	pid         *actor.PID
	slots       chan struct{} // one per queued Send; cap = SendMsgs
	reservedMax int64
	held        atomic.Int64 // reservations held, or released with a message still queued
	done        chan struct{}
	doneOnce    sync.Once
}

func (p *protoRef) Send(msg any) error {
	select {
	case <-p.done:
		return ErrStopped
	default:
	}
	select {
	case p.slots <- struct{}{}:
		p.sys.Root.Send(p.pid, envelope{msg})
		return nil
	case <-p.done:
		return ErrStopped
	}
}

func (p *protoRef) Reserve() (Reservation, error) {
	select {
	case <-p.done:
		return nil, ErrStopped
	default:
	}
	if p.held.Add(1) > p.reservedMax {
		p.held.Add(-1)
		return nil, ErrMailboxFull
	}
	return &place{ref: p}, nil
}

func (p *protoRef) Stop()                 { p.sys.Root.Stop(p.pid) }
func (p *protoRef) Done() <-chan struct{} { return p.done }

func (p *protoRef) markDone() { p.doneOnce.Do(func() { close(p.done) }) }

// place is a Reservation. Its state is two bits: queued (a message is in
// the mailbox) and released. The reservation counts against held until it
// is released and empty; whichever of Release and the receipt comes last
// gives it back, exactly once. The place itself is what goes through the
// mailbox, holding its message (no envelope to allocate per message).
type place struct {
	ref   *protoRef
	state atomic.Int32
	msg   any // written by Send while not queued, read by take
}

const (
	placeQueued   = 1
	placeReleased = 2
)

func (pl *place) Send(msg any) bool {
	select {
	case <-pl.ref.done:
		return false
	default:
	}
	if !pl.state.CompareAndSwap(0, placeQueued) {
		return false
	}
	pl.msg = msg
	pl.ref.sys.Root.Send(pl.ref.pid, pl)
	return true
}

func (pl *place) Release() {
	if old := pl.state.Or(placeReleased); old == 0 {
		pl.ref.held.Add(-1)
	}
}

// take empties the place on the actor's goroutine and returns its message.
func (pl *place) take() any {
	msg := pl.msg
	pl.msg = nil
	if old := pl.state.And(^int32(placeQueued)); old&placeReleased != 0 {
		pl.ref.held.Add(-1)
	}
	return msg
}
