package broker_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/internal/testmember"
	"github.com/lakegate/lakegate/lakestream"
)

// twoMembers is a one-member membership that lists a second live member.
type twoMembers struct {
	*testmember.Membership
	other lakestream.Member
}

func (m twoMembers) Members(ctx context.Context) ([]lakestream.Member, error) {
	return []lakestream.Member{m.Self(), m.other}, nil
}

// Rebalancing hands over the owned units placement gives to another live
// member, at most Max per round, and keeps the others; a drain's
// successor of a unit is that member's pulsar URL.
func TestRebalanceHandsOverWhatPlacementMoves(t *testing.T) {
	ctx := context.Background()
	self := lakestream.Member{ID: "a", Endpoints: map[string]string{"pulsar": "pulsar://a:6650"}}
	other := lakestream.Member{ID: "b", Endpoints: map[string]string{"pulsar": "pulsar://b:6650"}}
	m := twoMembers{testmember.New(self), other}
	b, err := broker.New(broker.Config{Catalog: nopCatalog{}, Membership: m})
	if err != nil {
		t.Fatal(err)
	}
	var moving, staying []string
	for i := range 20 {
		unit := "persistent://public/default/t" + string(rune('a'+i))
		if _, err := m.Acquire(ctx, unit); err != nil {
			t.Fatal(err)
		}
		if p, _ := broker.Placement(unit, []lakestream.Member{self, other}); p.ID == "b" {
			moving = append(moving, unit)
		} else {
			staying = append(staying, unit)
		}
	}
	if len(moving) < 3 || len(staying) == 0 {
		t.Fatalf("placement: %d move, %d stay of 20", len(moving), len(staying))
	}
	succ := b.Successors(ctx)
	for _, u := range moving {
		if got := succ(u); got != "pulsar://b:6650" {
			t.Fatalf("successor of %s = %q", u, got)
		}
	}

	var mu sync.Mutex
	var handed []string
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.RunRebalance(rctx, broker.RebalanceOptions{Interval: 10 * time.Millisecond, Max: 2,
			HandOver: func(ctx context.Context, unit, dest string) error {
				if dest != "b" {
					t.Errorf("handed %s to %q", unit, dest)
				}
				mu.Lock()
				handed = append(handed, unit)
				mu.Unlock()
				_, err := b.ReleaseOwned(ctx, unit)
				return err
			}})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(handed)
		mu.Unlock()
		if n >= len(moving) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("handed over %d of %d", n, len(moving))
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	slices.Sort(handed)
	if !slices.Equal(handed, moving) {
		t.Fatalf("handed over %v, want %v", handed, moving)
	}
	var kept []string
	for _, o := range m.Owned() {
		kept = append(kept, o.Unit())
	}
	if !slices.Equal(kept, staying) {
		t.Fatalf("kept %v, want %v", kept, staying)
	}
}

// StreamUnits names a partitioned stream's partitions, a non-partitioned
// one by its name.
func TestStreamUnits(t *testing.T) {
	md := lakestream.StreamMetadata{ID: lakestream.StreamIdentifier{Namespace: "public/default", Name: "s"}}
	if got := broker.StreamUnits(md); !slices.Equal(got, []string{"persistent://public/default/s"}) {
		t.Fatalf("non-partitioned: %v", got)
	}
	md.Partitioning.NumPartitions = 2
	want := []string{"persistent://public/default/s-partition-0", "persistent://public/default/s-partition-1"}
	if got := broker.StreamUnits(md); !slices.Equal(got, want) {
		t.Fatalf("partitioned: %v", got)
	}
}

// nopCatalog: the cluster side needs no catalog.
type nopCatalog struct{ lakestream.StreamCatalog }
