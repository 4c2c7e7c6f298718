package gateway

import (
	"errors"
	"testing"
	"testing/synctest"
)

func frameN(i int) outFrame { return outFrame{head: []byte{byte(i)}} }

// offer is refused at the soft bound and its waiter called once the
// writer has written what it took; post goes past the soft bound up to the
// hard one; frames come out in the order they went in.
func TestOutQueueBounds(t *testing.T) {
	q := newOutQueue(3, 2)
	for i := range 3 {
		if !q.offer(frameN(i), nil) {
			t.Fatalf("offer %d refused below the bound", i)
		}
	}
	called := 0
	if q.offer(frameN(9), func() { called++ }) {
		t.Fatal("offer accepted at the bound")
	}
	for i := 3; i < 5; i++ {
		if err := q.post(frameN(i)); err != nil {
			t.Fatalf("post %d past the soft bound: %v", i, err)
		}
	}
	if err := q.post(frameN(5)); !errors.Is(err, errOutboundOverflow) {
		t.Fatalf("post at the hard bound: %v", err)
	}
	batch := q.take(nil)
	if len(batch) != 5 {
		t.Fatalf("took %d frames, want 5", len(batch))
	}
	for i, f := range batch {
		if f.head[0] != byte(i) {
			t.Fatalf("frame %d is %d: out of order", i, f.head[0])
		}
	}
	// Taken but not written: still counted.
	if q.offer(frameN(9), nil) || called != 0 {
		t.Fatalf("offer accepted (or waiter called: %d) while the writer holds the bound", called)
	}
	q.written(len(batch))
	if called != 1 {
		t.Fatalf("waiter called %d times after the queue drained, want 1", called)
	}
	if !q.offer(frameN(0), nil) {
		t.Fatal("offer refused after the queue drained")
	}
	q.close()
	if q.offer(frameN(0), func() { t.Fatal("waiter registered on a closed queue") }) || !errors.Is(q.post(frameN(0)), errQueueClosed) || q.waitRoom() {
		t.Fatal("closed queue still takes frames")
	}
}

// waitRoom (the reader) waits while the queue is at its soft bound and
// returns once the writer wrote what it held, or the queue closed.
func TestOutQueueWaitRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newOutQueue(2, 10)
		q.post(frameN(0))
		q.post(frameN(1))
		returned := make(chan bool)
		go func() { returned <- q.waitRoom() }()
		synctest.Wait()
		select {
		case <-returned:
			t.Fatal("waitRoom returned with the queue full")
		default:
		}
		batch := q.take(nil)
		synctest.Wait()
		select {
		case <-returned:
			t.Fatal("waitRoom returned while the writer holds the frames")
		default:
		}
		q.written(len(batch))
		if !<-returned {
			t.Fatal("waitRoom: false on an open queue")
		}

		q.post(frameN(2))
		q.post(frameN(3))
		go func() { returned <- q.waitRoom() }()
		synctest.Wait()
		q.close()
		if <-returned {
			t.Fatal("waitRoom: true on a closed queue")
		}
	})
}
