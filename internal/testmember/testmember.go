// Package testmember is a one-member cluster membership for tests that
// start a gateway or a broker over a catalog that does not check guards
// (a fake one, or one opened by URI without its engine's membership): a
// node is always a cluster member, standalone included (node/assembly).
// Tests over an engine join the engine's cluster instead
// (engine.JoinCluster): the engine accepts only its own guards.
package testmember

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/lakegate/lakegate/lakestream"
)

// Membership is a one-member cluster: every Acquire succeeds, and an
// ownership is lost only when released (Release, Close). Safe for
// concurrent use.
type Membership struct {
	self lakestream.Member
	mu   sync.Mutex
	own  map[string]*ownership
}

// New is the membership of a cluster whose only member is self.
func New(self lakestream.Member) *Membership {
	return &Membership{self: self, own: map[string]*ownership{}}
}

// Self implements lakestream.Membership.
func (m *Membership) Self() lakestream.Member { return m.self }

// Members is self alone.
func (m *Membership) Members(context.Context) ([]lakestream.Member, error) {
	return []lakestream.Member{m.self}, nil
}

// Acquire always succeeds: there is no other member.
func (m *Membership) Acquire(_ context.Context, unit string) (lakestream.Ownership, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if o := m.own[unit]; o != nil {
		return o, nil
	}
	o := &ownership{m: m, unit: unit, lost: make(chan struct{})}
	m.own[unit] = o
	return o, nil
}

// Owner is self for a unit acquired and not released.
func (m *Membership) Owner(_ context.Context, unit string) (lakestream.Member, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.own[unit] != nil {
		return m.self, true, nil
	}
	return lakestream.Member{}, false, nil
}

// Owned lists the units held, sorted.
func (m *Membership) Owned() []lakestream.Ownership {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]lakestream.Ownership, 0, len(m.own))
	for _, o := range m.own {
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b lakestream.Ownership) int { return cmp.Compare(a.Unit(), b.Unit()) })
	return out
}

// Close releases every ownership.
func (m *Membership) Close(ctx context.Context) error {
	for _, o := range m.Owned() {
		o.Release(ctx)
	}
	return nil
}

type ownership struct {
	m    *Membership
	unit string
	once sync.Once
	lost chan struct{}
}

func (o *ownership) Unit() string { return o.unit }

// Lost is closed by Release.
func (o *ownership) Lost() <-chan struct{} { return o.lost }

func (o *ownership) Held() bool {
	select {
	case <-o.lost:
		return false
	default:
		return true
	}
}

func (o *ownership) Release(context.Context) error {
	o.once.Do(func() {
		o.m.mu.Lock()
		if o.m.own[o.unit] == o {
			delete(o.m.own, o.unit)
		}
		o.m.mu.Unlock()
		close(o.lost)
	})
	return nil
}

var _ lakestream.Membership = (*Membership)(nil)
