package actors

import (
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// Handler is the behaviour of one actor: Receive is called with one message
// at a time, never concurrently, in the order the messages were sent by any
// one sender. Stopped is called once, after the last Receive.
type Handler interface {
	Receive(msg any)
	Stopped()
}

// Wake is the message a Ref.Notify delivers. Handlers that use Notify drain
// whatever their notifiers queued when they receive it.
type Wake struct{}

// Ref addresses a spawned actor. Safe for concurrent use.
type Ref interface {
	// Send enqueues msg. The mailbox is bounded: Send blocks while it is
	// full (backpressure) and returns at once, dropping msg, once the actor
	// has stopped.
	Send(msg any)
	// Notify makes the actor receive a Wake soon. It never blocks: wakes
	// do not count against the mailbox bound and coalesce (at most one is
	// queued at a time; a Notify after the Wake was received queues
	// another). It is the way for code that must not block — an engine
	// completion callback, say — to hand work to an actor: queue the work
	// under a lock of your own, then Notify.
	Notify()
	// Stop stops the actor after the messages already enqueued; it does not
	// wait.
	Stop()
	// Done is closed once the actor has stopped (after Handler.Stopped).
	Done() <-chan struct{}
}

// Runtime spawns actors. It is the only place lakegate touches the actor
// library, so the library can be replaced without touching state machines.
type Runtime interface {
	// Spawn starts an actor driving h with a mailbox of mailboxMsgs messages.
	Spawn(h Handler, mailboxMsgs int) Ref
	// Shutdown stops every actor.
	Shutdown()
}

// DefaultMailboxMsgs is the default bound of an actor's mailbox, in messages.
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

// envelope carries a Send: the receiving side frees its mailbox slot.
type envelope struct{ msg any }

// The mailbox bound is enforced here, with a channel of slots, rather than
// by protoactor's bounded mailbox alone: its ring buffer spins (Gosched) when
// full and never lets a sender go once the actor has stopped. The protoactor
// mailbox gets one extra place for the (single) queued Wake, so a Put into it
// never waits.
func (r *protoRuntime) Spawn(h Handler, mailboxMsgs int) Ref {
	if mailboxMsgs <= 0 {
		mailboxMsgs = DefaultMailboxMsgs
	}
	ref := &protoRef{sys: r.sys, slots: make(chan struct{}, mailboxMsgs), done: make(chan struct{})}
	props := actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *actor.Started, *actor.Stopping, *actor.Restarting:
		case *actor.Stopped:
			h.Stopped()
			ref.markDone()
		case envelope:
			<-ref.slots
			h.Receive(m.msg)
		case Wake:
			ref.woken.Store(false) // a Notify from now on queues another Wake
			h.Receive(m)
		default:
			h.Receive(m)
		}
	}, actor.WithMailbox(actor.Bounded(mailboxMsgs+1)))
	ref.pid = r.sys.Root.Spawn(props)
	return ref
}

func (r *protoRuntime) Shutdown() { r.sys.Shutdown() }

type protoRef struct {
	sys      *actor.ActorSystem
	pid      *actor.PID
	slots    chan struct{} // one per queued Send; cap = the mailbox bound
	woken    atomic.Bool   // a Wake is queued
	done     chan struct{}
	doneOnce sync.Once
}

func (p *protoRef) Send(msg any) {
	select {
	case <-p.done:
		return
	default:
	}
	select {
	case p.slots <- struct{}{}:
		p.sys.Root.Send(p.pid, envelope{msg})
	case <-p.done:
	}
}

func (p *protoRef) Notify() {
	if p.woken.CompareAndSwap(false, true) {
		select {
		case <-p.done:
		default:
			p.sys.Root.Send(p.pid, Wake{})
		}
	}
}

func (p *protoRef) Stop()                 { p.sys.Root.Stop(p.pid) }
func (p *protoRef) Done() <-chan struct{} { return p.done }

func (p *protoRef) markDone() { p.doneOnce.Do(func() { close(p.done) }) }
