package gateway

// End of a terminated topic (REACHED_END_OF_TOPIC).
//
// The admin terminate (admin_topics.go) fences the log and records its end:
// the offset just past its last record. A subscription has reached the end
// when it has dispatched or acknowledged every record before it; then each
// consumer of that subscription on this gateway is sent
// REACHED_END_OF_TOPIC, once (clients answer hasReachedEndOfTopic() with
// it). The check runs when the last entry is delivered, at the terminate
// itself (consumers that already read everything), and at SUBSCRIBE on a
// terminated topic.
//
// The end is durable: the log's fence. A node that loads a terminated
// topic (after a restart, or taking it over) reads it and tells consumers
// as the terminating node would.
//
// Lock order: endWatchers.mu is a leaf (nothing is locked or sent while it
// is held).

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lakegate/lakegate/protocol"
)

// topicEnd is the end-of-topic state a topic embeds.
type topicEnd struct {
	// endPlus1 is the end offset + 1 of a terminated topic; 0: not known.
	endPlus1 atomic.Int64
	watchers struct {
		sync.Mutex
		m map[*consumer]struct{}
	}
}

// consumerEnd is the end-of-topic state a consumer embeds.
type consumerEnd struct {
	// deliveredEnd is the offset just past the last entry delivered to the
	// consumer (written by the subscription actor's goroutine only).
	deliveredEnd atomic.Int64
	endSent      atomic.Bool
}

// endOffset returns the end of a terminated topic; ok is false when the
// topic is not known to be terminated (or its end is unknown).
func (t *topic) endOffset() (end int64, ok bool) {
	v := t.end.endPlus1.Load()
	return v - 1, v > 0
}

func (t *topic) addEndWatcher(c *consumer) {
	t.end.watchers.Lock()
	defer t.end.watchers.Unlock()
	if t.end.watchers.m == nil {
		t.end.watchers.m = map[*consumer]struct{}{}
	}
	t.end.watchers.m[c] = struct{}{}
}

func (t *topic) removeEndWatcher(c *consumer) {
	t.end.watchers.Lock()
	defer t.end.watchers.Unlock()
	delete(t.end.watchers.m, c)
}

// endWatchers returns the consumers of subscription sub ("": all).
func (t *topic) endWatchers(sub string) []*consumer {
	t.end.watchers.Lock()
	defer t.end.watchers.Unlock()
	out := make([]*consumer, 0, len(t.end.watchers.m))
	for c := range t.end.watchers.m {
		if sub == "" || c.subName == sub {
			out = append(out, c)
		}
	}
	return out
}

// markTerminated records the end of a terminated topic and tells the
// consumers whose subscription has already reached it. Not on a
// subscription actor's goroutine (it asks the actors for their state).
func (t *topic) markTerminated(end int64) {
	t.end.endPlus1.Store(end + 1)
	for _, c := range t.endWatchers("") {
		if c.reachedEnd(end) {
			t.notifyEnd(c.subName)
		}
	}
}

// reachedEnd reports whether c's subscription has dispatched or
// acknowledged every record before end. It calls into the subscription
// actor: never from the actor's goroutine (Deliver uses deliveredEnd).
func (c *consumer) reachedEnd(end int64) bool {
	if c.end.deliveredEnd.Load() >= end {
		return true
	}
	info, err := c.sub.Info()
	return err == nil && info.MarkDeleteOffset+1 >= end && info.Unacked == 0
}

// notifyEnd sends REACHED_END_OF_TOPIC to every consumer of subscription
// sub on this topic that was not told yet.
func (t *topic) notifyEnd(sub string) {
	for _, c := range t.endWatchers(sub) {
		if c.end.endSent.CompareAndSwap(false, true) {
			c.sess.send(protocol.ReachedEndOfTopic(c.id))
		}
	}
}

// delivered records a delivery to c (the actor's goroutine) and tells the
// subscription when it reached the end of a terminated topic.
func (c *consumer) delivered(offset int64, records int32) {
	if e := offset + int64(records); e > c.end.deliveredEnd.Load() {
		c.end.deliveredEnd.Store(e)
	}
	if end, ok := c.t.endOffset(); ok && c.end.deliveredEnd.Load() >= end {
		c.t.notifyEnd(c.subName)
	}
}

// markTerminatedUnknownEnd learns from a failed append that the log was
// fenced elsewhere: the end is read from the log, off the calling goroutine
// (a partition or subscription actor's).
func (t *topic) markTerminatedUnknownEnd() {
	if _, ok := t.endOffset(); ok {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(t.srv.ctx, 30*time.Second)
		defer cancel()
		if end, err := t.log.NextOffset(ctx); err == nil {
			t.markTerminated(end)
		}
	}()
}
