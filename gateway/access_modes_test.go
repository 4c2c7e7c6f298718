package gateway

import (
	"errors"
	"testing"

	"github.com/lakegate/lakegate/protocol/pb"
)

func newTestTopic() *topic {
	t := &topic{name: TopicName{Tenant: "public", Namespace: "default", Local: "t", Partition: -1}}
	t.mu.producers = map[string]*producer{}
	return t
}

func testProducer(name string, mode pb.ProducerAccessMode, epoch *uint64) *producer {
	return &producer{name: name, mode: mode, askedEpoch: epoch}
}

// TestAddProducerAccessModes walks the access-mode rules of addProducer:
// refusals, queueing, fencing and the topic epoch.
func TestAddProducerAccessModes(t *testing.T) {
	tp := newTestTopic()
	must := func(p *producer) []fencedProducer {
		t.Helper()
		f, err := tp.addProducer(p)
		if err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		return f
	}
	refused := func(p *producer, want error) {
		t.Helper()
		if _, err := tp.addProducer(p); !errors.Is(err, want) {
			t.Fatalf("%s: %v, want %v", p.name, err, want)
		}
	}
	shared := testProducer("s", pb.ProducerAccessMode_Shared, nil)
	must(shared)
	refused(testProducer("s", pb.ProducerAccessMode_Shared, nil), ErrProducerBusy)
	refused(testProducer("x", pb.ProducerAccessMode_Exclusive, nil), ErrProducerFenced)
	waiter := testProducer("w", pb.ProducerAccessMode_WaitForExclusive, nil)
	must(waiter)
	if waiter.ready.Load() || len(tp.mu.waiting) != 1 {
		t.Fatal("WaitForExclusive producer not queued")
	}
	refused(testProducer("s2", pb.ProducerAccessMode_Shared, nil), ErrProducerBusy)

	fencer := testProducer("f", pb.ProducerAccessMode_ExclusiveWithFencing, nil)
	fenced := must(fencer)
	if len(fenced) != 2 || !shared.fenced.Load() || !waiter.fenced.Load() || !fencer.ready.Load() {
		t.Fatalf("fenced %v", fenced)
	}
	if tp.mu.epoch != 0 || !tp.mu.hasEpoch || tp.mu.exclusive != fencer {
		t.Fatalf("epoch %d (%v), exclusive %v", tp.mu.epoch, tp.mu.hasEpoch, tp.mu.exclusive)
	}
	tp.removeProducer(fencer)
	tp.removeProducer(shared) // a fenced producer's late close changes nothing

	x := testProducer("x", pb.ProducerAccessMode_Exclusive, nil)
	must(x)
	if tp.mu.epoch != 1 {
		t.Fatalf("epoch %d, want 1", tp.mu.epoch)
	}
	tp.removeProducer(x)
	old := uint64(0)
	refused(testProducer("x", pb.ProducerAccessMode_Exclusive, &old), ErrProducerFenced)
	held := uint64(1)
	must(testProducer("x", pb.ProducerAccessMode_Exclusive, &held))
	if tp.mu.epoch != 1 {
		t.Fatalf("reconnect with the held epoch moved it to %d", tp.mu.epoch)
	}
}
