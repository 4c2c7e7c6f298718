package actors

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"github.com/lakegate/lakegate/lakestream"
)

// fakeCluster is an in-memory ownership table shared by fake members.
type fakeCluster struct {
	mu      sync.Mutex
	members map[string]bool
	owners  map[string]string // unit → member
}

type fakeMember struct {
	c  *fakeCluster
	id string
}

type fakeOwnership struct {
	m    *fakeMember
	unit string
	lost chan struct{}
}

func (o *fakeOwnership) Lost() <-chan struct{} { return o.lost }
func (o *fakeOwnership) Held() bool {
	select {
	case <-o.lost:
		return false
	default:
		return true
	}
}
func (o *fakeOwnership) Unit() string { return o.unit }
func (o *fakeOwnership) Release(context.Context) error {
	o.m.c.mu.Lock()
	defer o.m.c.mu.Unlock()
	if o.m.c.owners[o.unit] == o.m.id {
		delete(o.m.c.owners, o.unit)
	}
	return nil
}

func (m *fakeMember) Self() lakestream.Member { return lakestream.Member{ID: m.id} }
func (m *fakeMember) Members(context.Context) ([]lakestream.Member, error) {
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	var out []lakestream.Member
	for id := range m.c.members {
		out = append(out, lakestream.Member{ID: id})
	}
	slices.SortFunc(out, func(a, b lakestream.Member) int { return cmpString(a.ID, b.ID) })
	return out, nil
}
func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
func (m *fakeMember) Acquire(_ context.Context, unit string) (lakestream.Ownership, error) {
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	if o, ok := m.c.owners[unit]; ok && o != m.id {
		return nil, &lakestream.OwnedError{Unit: unit, Owner: lakestream.Member{ID: o}}
	}
	m.c.owners[unit] = m.id
	return &fakeOwnership{m: m, unit: unit, lost: make(chan struct{})}, nil
}
func (m *fakeMember) Owner(_ context.Context, unit string) (lakestream.Member, bool, error) {
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	o, ok := m.c.owners[unit]
	return lakestream.Member{ID: o}, ok, nil
}
func (m *fakeMember) Owned() []lakestream.Ownership {
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	var out []lakestream.Ownership
	for u, o := range m.c.owners {
		if o == m.id {
			out = append(out, &fakeOwnership{m: m, unit: u, lost: make(chan struct{})})
		}
	}
	return out
}
func (m *fakeMember) Close(context.Context) error { return nil }

// die ends a member's session: it leaves and its units go.
func (c *fakeCluster) die(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.members, id)
	for u, o := range c.owners {
		if o == id {
			delete(c.owners, u)
		}
	}
}

func (c *fakeCluster) join(id string) *fakeMember {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.members[id] = true
	return &fakeMember{c: c, id: id}
}

// round runs one catalog scan on every member and returns, per log, the
// members that would compact it.
func round(t *testing.T, ms []*fakeMember, jobs []lakestream.MaterializationJob) map[lakestream.LogID][]string {
	t.Helper()
	out := map[lakestream.LogID][]string{}
	for _, m := range ms {
		js, _, err := clusterJobs(t.Context(), m, jobs, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range js {
			out[j.Log] = append(out[j.Log], m.id)
		}
	}
	return out
}

// TestClusterJobsOneOwnerPerTable: every log is compacted by exactly one
// node, all partitions of a table by the same one; tables spread over the
// nodes; a dead node's tables move to the others at the next scan; a
// joining node takes its share (the previous owner hands over first).
func TestClusterJobsOneOwnerPerTable(t *testing.T) {
	c := &fakeCluster{members: map[string]bool{}, owners: map[string]string{}}
	ms := []*fakeMember{c.join("n0"), c.join("n1"), c.join("n2")}
	var jobs []lakestream.MaterializationJob
	for s := range 12 {
		for p := range 3 {
			jobs = append(jobs, lakestream.MaterializationJob{Stream: lakestream.StreamIdentifier{Namespace: "t/ns", Name: fmt.Sprintf("s%d", s)}, Partition: p, Log: lakestream.LogID(s*3 + p)})
		}
	}
	check := func(ms []*fakeMember, rounds int) map[string]int {
		t.Helper()
		var got map[lakestream.LogID][]string
		for range rounds {
			got = round(t, ms, jobs)
			for l, owners := range got {
				if len(owners) > 1 {
					t.Fatalf("log %d compacted by %v in one round", l, owners)
				}
			}
		}
		perNode := map[string]int{}
		for _, j := range jobs {
			owners := got[j.Log]
			if len(owners) != 1 {
				t.Fatalf("log %d compacted by %v, want exactly one node", j.Log, owners)
			}
			first := got[lakestream.LogID(int(j.Log)/3*3)][0]
			if owners[0] != first {
				t.Fatalf("table %s split over %s and %s", j.Stream, first, owners[0])
			}
			if j.Partition == 0 {
				perNode[owners[0]]++
			}
		}
		return perNode
	}
	// Nodes start one after the other: the first takes every table, and
	// hands over what placement gives the others once they are candidates.
	spread := check(ms, 3)
	if len(spread) != 3 {
		t.Fatalf("tables per node %v: want all three nodes used", spread)
	}
	c.die("n1")
	after := check([]*fakeMember{ms[0], ms[2]}, 1)
	if after["n0"]+after["n2"] != 12 {
		t.Fatalf("after n1 died: %v", after)
	}
	ms = append([]*fakeMember{ms[0], ms[2]}, c.join("n3"))
	// n3 becomes a candidate in its first scan; the others release what
	// is placed on it in their next; n3 acquires it in its next.
	joined := check(ms, 3)
	if joined["n3"] == 0 {
		t.Fatalf("n3 took no table: %v", joined)
	}
	t.Logf("tables per node: %v; after n1 died: %v; after n3 joined: %v", spread, after, joined)
}

// A node that does not run compaction is never a candidate.
func TestClusterJobsCandidatesRunWorkers(t *testing.T) {
	c := &fakeCluster{members: map[string]bool{}, owners: map[string]string{}}
	worker := c.join("w")
	c.join("servingOnly") // a member without a compaction worker
	jobs := []lakestream.MaterializationJob{}
	for s := range 8 {
		jobs = append(jobs, lakestream.MaterializationJob{Stream: lakestream.StreamIdentifier{Namespace: "t/ns", Name: fmt.Sprintf("s%d", s)}, Log: lakestream.LogID(s)})
	}
	got := round(t, []*fakeMember{worker}, jobs)
	if len(got) != 8 {
		t.Fatalf("the only worker compacts %d of 8 tables", len(got))
	}
}
