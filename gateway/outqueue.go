package gateway

import (
	"errors"
	"sync"
)

// outQueue is a session's outbound frames, in the order they were queued.
// Nothing that queues a frame ever waits for the socket except the
// session's own reader, so no partition or subscription actor (nor any
// other shared goroutine) is held up by a slow connection. Its bound is in
// frames, counting those the writer took and has not written yet:
//
//   - offer (a MESSAGE: subscription actors, non-persistent fan-out) is
//     refused while the queue holds soft (Config.OutboundFramesMax)
//     frames. A refused offer's waiter is called once the writer has
//     written what it held and the queue has room again: the consumer then
//     asks its subscription to dispatch to it again (actors.Subscription
//     SinkFull / SinkReady).
//   - post (every other frame: answers, receipts, notices) never waits. It
//     is allowed past soft, up to hard (soft + Config.OutboundOwedMax);
//     beyond, errOutboundOverflow: the session closes the connection rather
//     than owe more to a client that does not read.
//   - waitRoom (the reader, before it reads the next frame) waits while the
//     queue holds soft frames or more: a connection that does not read what
//     it is sent is not read either, so what it can make the node owe past
//     soft is bounded by the requests it had in flight (its producers'
//     pending SENDs, acknowledgements with request ids).
//
// Safe for concurrent use.
type outQueue struct {
	soft, hard int
	// ready has a value when frames were queued since the writer last
	// looked (cap 1).
	ready chan struct{}

	mu struct {
		sync.Mutex
		frames []outFrame
		// writing counts the frames the writer took and has not written.
		writing int
		// room, when not nil, is closed (and dropped) once the queue has
		// room: waitRoom waits on it.
		room chan struct{}
		// waiters are the refused offers' callbacks, called (once each)
		// when the queue has room again.
		waiters []func()
		closed  bool
	}
}

// errOutboundOverflow: a frame was posted to a queue holding its hard bound.
var errOutboundOverflow = errors.New("gateway: outbound queue full: the client does not read what it is sent")

func newOutQueue(soft, owed int) *outQueue {
	return &outQueue{soft: soft, hard: soft + owed, ready: make(chan struct{}, 1)}
}

// usedLocked is the number of frames the bound counts.
func (q *outQueue) usedLocked() int { return len(q.mu.frames) + q.mu.writing }

func (q *outQueue) appendLocked(f outFrame) {
	q.mu.frames = append(q.mu.frames, f)
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// offer queues f unless the queue holds soft frames or more; then it
// returns false and, when waiter is not nil, registers it to be called
// (once, on the writer's goroutine, without locks held) when the queue
// has room again. False without registering once the queue is closed.
func (q *outQueue) offer(f outFrame, waiter func()) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mu.closed {
		return false
	}
	if q.usedLocked() >= q.soft {
		if waiter != nil {
			q.mu.waiters = append(q.mu.waiters, waiter)
		}
		return false
	}
	q.appendLocked(f)
	return true
}

// post queues f without waiting. Errors: errQueueClosed once closed;
// errOutboundOverflow when the queue holds hard frames.
func (q *outQueue) post(f outFrame) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mu.closed {
		return errQueueClosed
	}
	if q.usedLocked() >= q.hard {
		return errOutboundOverflow
	}
	q.appendLocked(f)
	return nil
}

// errQueueClosed: the session ended; the frame is dropped.
var errQueueClosed = errors.New("gateway: connection closed")

// waitRoom waits until the queue holds fewer than soft frames; false once
// the queue is closed.
func (q *outQueue) waitRoom() bool {
	for {
		q.mu.Lock()
		if q.mu.closed {
			q.mu.Unlock()
			return false
		}
		if q.usedLocked() < q.soft {
			q.mu.Unlock()
			return true
		}
		if q.mu.room == nil {
			q.mu.room = make(chan struct{})
		}
		room := q.mu.room
		q.mu.Unlock()
		<-room
	}
}

// take returns every queued frame for the writer, which reports them with
// written once they are on the socket. buf (the previous batch, cleared)
// becomes the queue's storage.
func (q *outQueue) take(buf []outFrame) []outFrame {
	q.mu.Lock()
	defer q.mu.Unlock()
	batch := q.mu.frames
	q.mu.frames = buf[:0]
	q.mu.writing += len(batch)
	return batch
}

// written reports that n frames taken were written: when the queue has
// room again, waitRoom returns and the refused offers' waiters are called.
func (q *outQueue) written(n int) {
	q.mu.Lock()
	q.mu.writing -= n
	var waiters []func()
	if q.usedLocked() < q.soft {
		if q.mu.room != nil {
			close(q.mu.room)
			q.mu.room = nil
		}
		waiters = q.mu.waiters
		q.mu.waiters = nil
	}
	q.mu.Unlock()
	for _, w := range waiters {
		w()
	}
}

// close drops what is queued and every waiter, and releases waitRoom.
// Idempotent.
func (q *outQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mu.closed {
		return
	}
	q.mu.closed = true
	q.mu.frames = nil
	q.mu.waiters = nil
	if q.mu.room != nil {
		close(q.mu.room)
		q.mu.room = nil
	}
}
