package broker

// The cluster side of serving topics (docs/cluster.md): which member a
// topic belongs on (placement: rendezvous hashing over the live members),
// the units this node takes and gives up, and rebalancing — a member that
// joined takes its share, a few topics per round. Unloading a topic and
// asking another member to unload one are the caller's (the gateway's
// topics served and its admin API): RunRebalance hands each unit over
// through the HandOver it is given.

import (
	"context"
	"errors"
	"hash/fnv"
	"slices"
	"strconv"
	"time"

	"github.com/lakegate/lakegate/lakestream"
)

// membersCacheAge bounds how stale the member list placement uses may be.
const membersCacheAge = time.Second

// Self is this node as a member (its advertised endpoints).
func (b *Broker) Self() lakestream.Member { return b.cfg.Membership.Self() }

// Members returns the live members, cached for a second.
func (b *Broker) Members(ctx context.Context) ([]lakestream.Member, error) {
	c := &b.membersCache
	c.Lock()
	defer c.Unlock()
	if time.Since(c.at) < membersCacheAge && c.list != nil {
		return c.list, nil
	}
	ms, err := b.cfg.Membership.Members(ctx)
	if err != nil {
		return nil, err
	}
	c.list, c.at = ms, time.Now()
	return ms, nil
}

// Placement is the member a unit belongs on: the highest rendezvous score
// of unit and member id among candidates (ok false when there are none).
func Placement(unit string, candidates []lakestream.Member) (lakestream.Member, bool) {
	var (
		best  lakestream.Member
		score uint64
		found bool
	)
	for _, m := range candidates {
		h := fnv.New64a()
		h.Write([]byte(unit))
		h.Write([]byte{0})
		h.Write([]byte(m.ID))
		v := h.Sum64()
		// Mix: FNV's low bits are weak for inputs that share a prefix.
		v ^= v >> 33
		v *= 0xff51afd7ed558ccd
		v ^= v >> 33
		if !found || v > score || (v == score && m.ID < best.ID) {
			best, score, found = m, v, true
		}
	}
	return best, found
}

// TakeUnit acquires the ownership of unit for this node; a unit another
// member took first stays with it.
func (b *Broker) TakeUnit(ctx context.Context, unit string) error {
	_, err := b.cfg.Membership.Acquire(ctx, unit)
	var owned *lakestream.OwnedError
	if errors.As(err, &owned) {
		return nil
	}
	return err
}

// ReleaseOwned releases this node's ownership of unit, if it holds one
// (ok: it did); for a unit owned (looked up) but not served.
func (b *Broker) ReleaseOwned(ctx context.Context, unit string) (ok bool, err error) {
	for _, o := range b.cfg.Membership.Owned() {
		if o.Unit() == unit {
			return true, o.Release(ctx)
		}
	}
	return false, nil
}

// ReleaseAllOwned releases every ownership this node holds (the end of a
// drain: units looked up here and never served).
func (b *Broker) ReleaseAllOwned(ctx context.Context) {
	for _, o := range b.cfg.Membership.Owned() {
		o.Release(ctx)
	}
}

// Successors maps a unit to the pulsar URL of the member it goes to when
// this node leaves (placement among the other live members; "" when there
// is none, or the members cannot be listed): the URL a drain gives to
// clients.
func (b *Broker) Successors(ctx context.Context) func(unit string) string {
	var others []lakestream.Member
	if ms, err := b.Members(ctx); err == nil {
		self := b.Self().ID
		others = slices.DeleteFunc(slices.Clone(ms), func(x lakestream.Member) bool { return x.ID == self })
	}
	return func(unit string) string {
		if target, ok := Placement(unit, others); ok {
			return target.Endpoints["pulsar"]
		}
		return ""
	}
}

// StreamUnits are the units (topic names) of a stream's partitions.
func StreamUnits(md lakestream.StreamMetadata) []string {
	base := "persistent://" + md.ID.Namespace + "/" + md.ID.Name
	n := md.Partitioning.NumPartitions
	if n == 0 {
		return []string{base}
	}
	out := make([]string, n)
	for i := range n {
		out[i] = base + PartitionSuffix + strconv.Itoa(i)
	}
	return out
}

// HandOver unloads unit gracefully where it is served and makes member
// dest (an id) its owner.
type HandOver func(ctx context.Context, unit, dest string) error

// RebalanceOptions configure RunRebalance.
type RebalanceOptions struct {
	// Interval between rounds. Required (> 0).
	Interval time.Duration
	// Max bounds the units handed over per round.
	Max int
	// Paused, when it returns true, skips a round (the node is draining).
	Paused func() bool
	// HandOver hands one unit over.
	HandOver HandOver
}

// RunRebalance hands over, every o.Interval until ctx ends, up to o.Max of
// the units this node owns that placement gives to another live member (a
// member that joined takes its share gradually, never all at once).
func (b *Broker) RunRebalance(ctx context.Context, o RebalanceOptions) {
	t := time.NewTicker(o.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if o.Paused != nil && o.Paused() {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, o.Interval)
		b.rebalanceOnce(rctx, o)
		cancel()
	}
}

func (b *Broker) rebalanceOnce(ctx context.Context, o RebalanceOptions) {
	m := b.cfg.Membership
	ms, err := b.Members(ctx)
	if err != nil || len(ms) < 2 {
		return
	}
	self := m.Self().ID
	moved := 0
	for _, own := range m.Owned() {
		if moved >= o.Max {
			return
		}
		target, ok := Placement(own.Unit(), ms)
		if !ok || target.ID == self {
			continue
		}
		b.cfg.Logger.Info("rebalancing: handing a topic over", "topic", own.Unit(), "to", target.ID)
		if err := o.HandOver(ctx, own.Unit(), target.ID); err != nil {
			b.cfg.Logger.Warn("rebalancing: hand-over failed", "topic", own.Unit(), "err", err)
			continue
		}
		moved++
	}
}

// MemberHTTP is the admin base URL of member as listed to clients: its
// http endpoint, else its https one. (Requests to members go to the
// address a peer is reached at: the gateway's peerBase.)
func MemberHTTP(member lakestream.Member) string {
	if u := member.Endpoints["http"]; u != "" {
		return u
	}
	return member.Endpoints["https"]
}

// OwnerOrPlacement is the member serving unit: its owner; else the member
// placement picks (this node acquires the unit when that is itself).
func (b *Broker) OwnerOrPlacement(ctx context.Context, unit string) (lakestream.Member, error) {
	m := b.cfg.Membership
	if owner, ok, err := m.Owner(ctx, unit); err != nil || ok {
		return owner, err
	}
	ms, err := b.Members(ctx)
	if err != nil {
		return lakestream.Member{}, err
	}
	if target, ok := Placement(unit, ms); ok && target.ID != m.Self().ID {
		return target, nil
	}
	if _, err := m.Acquire(ctx, unit); err != nil {
		if owner, ok, oerr := m.Owner(ctx, unit); oerr == nil && ok {
			return owner, nil // lost a race: the winner serves it
		}
		return lakestream.Member{}, err
	}
	return m.Self(), nil
}
