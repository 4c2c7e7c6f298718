package gateway

// A consumer's side of the end of a terminated topic (the topic's side:
// broker/end_of_topic.go): what it was delivered, and REACHED_END_OF_TOPIC
// sent once.

import (
	"sync/atomic"

	"github.com/lakegate/lakegate/protocol"
)

// consumerEnd is the end-of-topic state a consumer embeds.
type consumerEnd struct {
	// deliveredEnd is the offset just past the last entry delivered to the
	// consumer (written by the subscription actor's goroutine only).
	deliveredEnd atomic.Int64
	endSent      atomic.Bool
}

// Subscription implements broker.EndWatcher.
func (c *consumer) Subscription() string { return c.subName }

// ReachedEnd implements broker.EndWatcher: whether c's subscription has
// dispatched or acknowledged every record before end. It calls into the
// subscription actor: never from the actor's goroutine (Deliver uses
// deliveredEnd).
func (c *consumer) ReachedEnd(end int64) bool {
	if c.end.deliveredEnd.Load() >= end {
		return true
	}
	info, err := c.sub.Info()
	return err == nil && info.MarkDeleteOffset+1 >= end && info.Unacked == 0
}

// NotifyEnd implements broker.EndWatcher: REACHED_END_OF_TOPIC, once.
func (c *consumer) NotifyEnd() {
	if c.end.endSent.CompareAndSwap(false, true) {
		c.sess.send(protocol.ReachedEndOfTopic(c.id))
	}
}

// delivered records a delivery to c (the actor's goroutine) and tells the
// subscription when it reached the end of a terminated topic.
func (c *consumer) delivered(offset int64, records int32) {
	if e := offset + int64(records); e > c.end.deliveredEnd.Load() {
		c.end.deliveredEnd.Store(e)
	}
	if end, ok := c.t.End().Offset(); ok && c.end.deliveredEnd.Load() >= end {
		c.t.End().Notify(c.subName)
	}
}
