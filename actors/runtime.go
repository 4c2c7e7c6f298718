package actors

import (
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
)

// Handler is the behaviour of one actor: Receive is called with one message
// at a time, never concurrently, in the order the messages were sent by any
// one sender. Stopped is called once, after the last Receive.
type Handler interface {
	Receive(msg any)
	Stopped()
}

// Ref addresses a spawned actor. Safe for concurrent use.
type Ref interface {
	// Send enqueues msg. The mailbox is bounded: Send blocks while it is
	// full (backpressure). Messages sent after Stop are dropped.
	Send(msg any)
	// Stop stops the actor after the messages already enqueued; it does not
	// wait.
	Stop()
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

func (r *protoRuntime) Spawn(h Handler, mailboxMsgs int) Ref {
	if mailboxMsgs <= 0 {
		mailboxMsgs = DefaultMailboxMsgs
	}
	props := actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *actor.Started, *actor.Stopping, *actor.Restarting:
		case *actor.Stopped:
			h.Stopped()
		default:
			h.Receive(m)
		}
	}, actor.WithMailbox(actor.Bounded(mailboxMsgs)))
	pid := r.sys.Root.Spawn(props)
	return &protoRef{sys: r.sys, pid: pid}
}

func (r *protoRuntime) Shutdown() { r.sys.Shutdown() }

type protoRef struct {
	sys *actor.ActorSystem
	pid *actor.PID
}

func (p *protoRef) Send(msg any) { p.sys.Root.Send(p.pid, msg) }
func (p *protoRef) Stop()        { p.sys.Root.Stop(p.pid) }
