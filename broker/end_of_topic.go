package broker

// End of a terminated topic (REACHED_END_OF_TOPIC).
//
// The admin terminate (admin/topics.go) fences the log and records
// its end: the offset just past its last record. A subscription has
// reached the end when it has dispatched or acknowledged every record
// before it; then each consumer of that subscription on this node is sent
// REACHED_END_OF_TOPIC, once (clients answer hasReachedEndOfTopic() with
// it). The check runs when the last entry is delivered, at the terminate
// itself (consumers that already read everything), and at SUBSCRIBE on a
// terminated topic.
//
// The end is durable: the log's fence. A node that loads a terminated
// topic (after a restart, or taking it over) reads it and tells consumers
// as the terminating node would.
//
// Lock order: TopicEnd's watchers lock is a leaf (nothing is locked or
// sent while it is held).

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lakegate/lakegate/lakestream"
)

// EndWatcher is a consumer attached to a topic through this node, told
// when its subscription reaches the end of the terminated topic.
type EndWatcher interface {
	comparable
	// Subscription is the consumer's subscription.
	Subscription() string
	// ReachedEnd reports whether the subscription has dispatched or
	// acknowledged every record before end. It may call into the
	// subscription actor: never called from the actor's goroutine.
	ReachedEnd(end int64) bool
	// NotifyEnd tells the consumer it reached the end (at most once).
	NotifyEnd()
}

// TopicEnd is the end-of-topic state of one topic-partition served here,
// and the consumers attached to it through this node. The zero value is
// ready. Safe for concurrent use.
type TopicEnd[W EndWatcher] struct {
	// endPlus1 is the end offset + 1 of a terminated topic; 0: not known.
	endPlus1 atomic.Int64
	watchers struct {
		sync.Mutex
		m map[W]struct{}
	}
}

// Offset returns the end of a terminated topic; ok is false when the
// topic is not known to be terminated (or its end is unknown).
func (e *TopicEnd[W]) Offset() (end int64, ok bool) {
	v := e.endPlus1.Load()
	return v - 1, v > 0
}

// AddWatcher attaches a consumer.
func (e *TopicEnd[W]) AddWatcher(w W) {
	e.watchers.Lock()
	defer e.watchers.Unlock()
	if e.watchers.m == nil {
		e.watchers.m = map[W]struct{}{}
	}
	e.watchers.m[w] = struct{}{}
}

// RemoveWatcher detaches a consumer.
func (e *TopicEnd[W]) RemoveWatcher(w W) {
	e.watchers.Lock()
	defer e.watchers.Unlock()
	delete(e.watchers.m, w)
}

// Watchers returns the consumers of subscription sub ("": all).
func (e *TopicEnd[W]) Watchers(sub string) []W {
	e.watchers.Lock()
	defer e.watchers.Unlock()
	out := make([]W, 0, len(e.watchers.m))
	for w := range e.watchers.m {
		if sub == "" || w.Subscription() == sub {
			out = append(out, w)
		}
	}
	return out
}

// MarkTerminated records the end of a terminated topic and tells the
// consumers whose subscription has already reached it. Not on a
// subscription actor's goroutine (it asks the actors for their state).
func (e *TopicEnd[W]) MarkTerminated(end int64) {
	e.endPlus1.Store(end + 1)
	for _, w := range e.Watchers("") {
		if w.ReachedEnd(end) {
			e.Notify(w.Subscription())
		}
	}
}

// Notify tells every consumer of subscription sub on this topic that was
// not told yet that it reached the end.
func (e *TopicEnd[W]) Notify(sub string) {
	for _, w := range e.Watchers(sub) {
		w.NotifyEnd()
	}
}

// MarkTerminatedUnknownEnd learns from a failed append that log was
// fenced elsewhere: the end is read from the log, off the calling
// goroutine (a partition or subscription actor's), within ctx.
func (e *TopicEnd[W]) MarkTerminatedUnknownEnd(ctx context.Context, log lakestream.Log) {
	if _, ok := e.Offset(); ok {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if end, err := log.NextOffset(ctx); err == nil {
			e.MarkTerminated(end)
		}
	}()
}
