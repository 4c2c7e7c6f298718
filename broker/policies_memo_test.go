package broker

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/lakegate/lakegate/lakestream"
)

// countingCatalog answers LoadNamespace from a map and counts the calls
// (every other catalog method is not used by the policy resolution).
type countingCatalog struct {
	lakestream.StreamCatalog
	ns    map[string]lakestream.Namespace
	loads atomic.Int64
}

func (c *countingCatalog) LoadNamespace(_ context.Context, name string) (lakestream.Namespace, error) {
	c.loads.Add(1)
	ns, ok := c.ns[name]
	if !ok {
		return lakestream.Namespace{}, lakestream.ErrNoSuchNamespace
	}
	return ns, nil
}

// TestPolicyRoundReadsNamespaceOnce: within one policy round (a context
// from withNamespaceMemo) the policies, limits and compaction threshold of
// any number of topics read their namespace once; outside a round every
// resolution reads it (an admin change is seen at once).
func TestPolicyRoundReadsNamespaceOnce(t *testing.T) {
	cat := &countingCatalog{ns: map[string]lakestream.Namespace{
		"public/default": {Name: "public/default", Properties: map[string]string{CompactionThresholdProperty: "1048576"}},
	}}
	b := &Broker{cfg: Config{Catalog: cat}}
	md := func(ns, name string) lakestream.StreamMetadata {
		return lakestream.StreamMetadata{ID: lakestream.StreamIdentifier{Namespace: ns, Name: name}}
	}
	resolve := func(ctx context.Context, m lakestream.StreamMetadata) int64 {
		t.Helper()
		if _, err := b.PoliciesOf(ctx, m); err != nil {
			t.Fatal(err)
		}
		if _, err := b.LimitsOf(ctx, m); err != nil {
			t.Fatal(err)
		}
		th, err := b.CompactionThreshold(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		return th
	}

	round := withNamespaceMemo(context.Background())
	for i := range 10 {
		if th := resolve(round, md("public/default", string(rune('a'+i)))); th != 1<<20 {
			t.Fatalf("threshold %d, want the namespace's 1 MiB", th)
		}
	}
	if n := cat.loads.Load(); n != 1 {
		t.Fatalf("one round over 10 topics read the namespace %d times, want 1", n)
	}
	// A namespace that does not exist is remembered as such too.
	resolve(round, md("gone/ns", "x"))
	resolve(round, md("gone/ns", "y"))
	if n := cat.loads.Load(); n != 2 {
		t.Fatalf("%d namespace reads after a missing namespace twice, want 2", n)
	}

	cat.loads.Store(0)
	resolve(context.Background(), md("public/default", "a"))
	if n := cat.loads.Load(); n != 3 {
		t.Fatalf("outside a round: %d namespace reads for one topic, want 3", n)
	}
	// A failed read is not remembered.
	failing := &failingCatalog{}
	b.cfg.Catalog = failing
	round = withNamespaceMemo(context.Background())
	for range 2 {
		if _, err := b.PoliciesOf(round, md("public/default", "a")); !errors.Is(err, errUnavailableForTest) {
			t.Fatalf("PoliciesOf over a failing catalog: %v", err)
		}
	}
	if n := failing.loads.Load(); n != 2 {
		t.Fatalf("a failed read was remembered: %d reads, want 2", n)
	}
}

var errUnavailableForTest = errors.New("catalog unavailable")

type failingCatalog struct {
	lakestream.StreamCatalog
	loads atomic.Int64
}

func (c *failingCatalog) LoadNamespace(context.Context, string) (lakestream.Namespace, error) {
	c.loads.Add(1)
	return lakestream.Namespace{}, errUnavailableForTest
}
