package engine

// Cluster membership and ownership over the metadata store
// (lakestream.Membership; docs/cluster.md).
//
// Keys (under the engine's root):
//
//	members/<member id>  → {"id", "endpoints", "session"}   attached to the member's session lease
//	owners/<unit>        → {"member", "session"}             attached to the owner's session lease
//
// A member's session is one lease, kept alive every SessionTTL/3. An owner
// key is created only if absent, with the owner's lease, so it goes when the
// owner leaves, releases the unit, or its session expires. The value names
// the session as well as the member: a key left by an earlier session of the
// same member (one that was lost) is not mistaken for a current ownership.
//
// Loss. The node gives every ownership up at once, and starts a new session,
// when a keep-alive finds the lease gone, and also when no keep-alive has
// succeeded for long enough that the lease may have expired on the server
// (the local deadline: the send time of the last successful keep-alive plus
// the TTL, less a safety margin) — so a node cut off from etcd, or paused,
// stops serving before another can take over. Guarded writes compare the
// owner key's revision (ownership.cmps), so even a node that has not noticed
// yet cannot write (ErrGuardLost).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
)

// MembershipConfig configures Engine.JoinCluster. Zero values take the
// documented defaults.
type MembershipConfig struct {
	// ID names this member; it must be unique among live members. A
	// process that joins with the id of an earlier one that died ends that
	// one's session at once (its topics move now, not at its lease expiry),
	// so give each process of a deployment a stable id of its own (a pod
	// name). Default the engine's NodeID (random per start).
	ID string
	// Endpoints are the URLs this member advertises (lakestream.Member).
	Endpoints map[string]string
	// SessionTTL is the lease time to live: a member that stops keeping its
	// session alive (killed, paused, cut off) loses its ownerships this long
	// after its last keep-alive. etcd rounds it up to whole seconds.
	// Default 5 s.
	SessionTTL time.Duration
	// Logger. Default the engine's.
	Logger *slog.Logger
}

// Membership is the engine's lakestream.Membership.
type Membership struct {
	e    *Engine
	ms   meta.Store
	cfg  MembershipConfig
	self lakestream.Member
	log  *slog.Logger

	ctx    context.Context // canceled by Close
	cancel context.CancelFunc
	done   chan struct{} // closed when the session loop ends

	mu struct {
		sync.Mutex
		lease    meta.LeaseID // current session; 0 while there is none
		deadline time.Time    // the session counts as lost after this
		owned    map[string]*ownership
		closed   bool
	}
}

var _ lakestream.Membership = (*Membership)(nil)

type memberValue struct {
	ID        string            `json:"id"`
	Endpoints map[string]string `json:"endpoints,omitempty"`
	Session   int64             `json:"session"`
}

type ownerValue struct {
	Member  string `json:"member"`
	Session int64  `json:"session"`
}

func (k keys) membersPrefix() string                { return k.root + "members/" }
func (k keys) member(id string) string              { return k.membersPrefix() + id }
func (k keys) ownersPrefix() string                 { return k.root + "owners/" }
func (k keys) owner(unit string) string             { return k.ownersPrefix() + unit }
func sessionMargin(ttl time.Duration) time.Duration { return max(ttl/5, 100*time.Millisecond) }

// JoinCluster registers this engine as a cluster member and keeps its
// session alive until Close. It returns once the first session exists.
func (e *Engine) JoinCluster(ctx context.Context, cfg MembershipConfig) (*Membership, error) {
	if cfg.ID == "" {
		cfg.ID = e.opts.NodeID
	}
	if strings.ContainsAny(cfg.ID, "/\x00") {
		return nil, fmt.Errorf("%w: member id %q", lakestream.ErrInvalidArgument, cfg.ID)
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = e.opts.Logger
	}
	m := &Membership{
		e: e, ms: e.meta, cfg: cfg,
		self: lakestream.Member{ID: cfg.ID, Endpoints: maps.Clone(cfg.Endpoints)},
		log:  cfg.Logger.With("component", "membership", "member", cfg.ID),
		done: make(chan struct{}),
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.mu.owned = map[string]*ownership{}
	if err := m.endEarlierSession(ctx); err != nil {
		m.cancel()
		return nil, err
	}
	if err := m.startSession(ctx); err != nil {
		m.cancel()
		return nil, err
	}
	go m.sessionLoop()
	return m, nil
}

// Self implements lakestream.Membership.
func (m *Membership) Self() lakestream.Member {
	return lakestream.Member{ID: m.self.ID, Endpoints: maps.Clone(m.self.Endpoints)}
}

// endEarlierSession revokes the session of an earlier process with this
// member id (one that was killed or crashed: ids are unique among live
// members), so that its topics can be taken at once rather than when its
// lease expires.
func (m *Membership) endEarlierSession(ctx context.Context) error {
	kv, found, err := m.ms.Get(ctx, m.e.keys.member(m.self.ID))
	if err != nil {
		return fmt.Errorf("%w: reading member %s: %w", lakestream.ErrUnavailable, m.self.ID, err)
	}
	if !found {
		return nil
	}
	var v memberValue
	if json.Unmarshal(kv.Value, &v) != nil || v.Session == 0 {
		return nil
	}
	m.log.Info("ending the session of an earlier process with this member id", "lease", fmt.Sprintf("%x", v.Session))
	if err := m.ms.Revoke(ctx, meta.LeaseID(v.Session)); err != nil {
		return fmt.Errorf("%w: ending an earlier session of member %s: %w", lakestream.ErrUnavailable, m.self.ID, err)
	}
	return nil
}

// startSession grants a lease and registers the member under it.
func (m *Membership) startSession(ctx context.Context) error {
	sent := time.Now()
	lease, err := m.ms.Grant(ctx, m.cfg.SessionTTL)
	if err != nil {
		return fmt.Errorf("%w: cluster session: %w", lakestream.ErrUnavailable, err)
	}
	v, _ := json.Marshal(memberValue{ID: m.self.ID, Endpoints: m.self.Endpoints, Session: int64(lease)})
	if _, _, err := m.ms.Txn(ctx, nil, []meta.Op{meta.PutWithLease(m.e.keys.member(m.self.ID), v, lease)}); err != nil {
		_ = m.ms.Revoke(context.WithoutCancel(ctx), lease)
		return fmt.Errorf("%w: registering member %s: %w", lakestream.ErrUnavailable, m.self.ID, err)
	}
	m.mu.Lock()
	m.mu.lease = lease
	m.mu.deadline = sent.Add(m.cfg.SessionTTL - sessionMargin(m.cfg.SessionTTL))
	m.mu.Unlock()
	m.log.Debug("cluster session started", "lease", fmt.Sprintf("%x", int64(lease)))
	return nil
}

// sessionLoop keeps the session alive; when it is lost it gives every
// ownership up and starts a new one.
func (m *Membership) sessionLoop() {
	defer close(m.done)
	ttl := m.cfg.SessionTTL
	every := ttl / 3
	retry := max(ttl/20, 50*time.Millisecond)
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
		}
		m.mu.Lock()
		lease, deadline := m.mu.lease, m.mu.deadline
		m.mu.Unlock()
		if lease == 0 {
			// No session: start one.
			ctx, cancel := context.WithTimeout(m.ctx, ttl)
			err := m.startSession(ctx)
			cancel()
			if err != nil {
				m.log.Warn("cluster session not renewed; retrying", "err", err)
				t.Reset(retry)
				continue
			}
			t.Reset(every)
			continue
		}
		if time.Now().After(deadline) {
			m.loseSession(lease, "no keep-alive succeeded before the session could expire")
			t.Reset(0)
			continue
		}
		sent := time.Now()
		ctx, cancel := context.WithDeadline(m.ctx, deadline)
		got, err := m.ms.KeepAlive(ctx, lease)
		cancel()
		switch {
		case err == nil:
			m.mu.Lock()
			if m.mu.lease == lease {
				m.mu.deadline = sent.Add(min(got, ttl) - sessionMargin(ttl))
			}
			m.mu.Unlock()
			t.Reset(every)
		case errors.Is(err, meta.ErrLeaseExpired):
			m.loseSession(lease, "the session lease expired")
			t.Reset(0)
		default:
			if m.ctx.Err() != nil {
				return
			}
			m.log.Warn("cluster keep-alive failed; retrying", "err", err)
			t.Reset(retry)
		}
	}
}

// loseSession ends the session lease: every ownership is lost at once, and
// the lease is revoked (best effort) so its keys go now rather than at its
// expiry.
func (m *Membership) loseSession(lease meta.LeaseID, why string) {
	m.mu.Lock()
	if m.mu.lease != lease {
		m.mu.Unlock()
		return
	}
	m.mu.lease = 0
	owned := slices.Collect(maps.Values(m.mu.owned))
	m.mu.owned = map[string]*ownership{}
	m.mu.Unlock()
	m.log.Warn("cluster session lost: giving up every owned unit", "why", why, "units", len(owned))
	for _, o := range owned {
		o.markLost()
	}
	ctx, cancel := context.WithTimeout(m.ctx, m.cfg.SessionTTL)
	defer cancel()
	_ = m.ms.Revoke(ctx, lease)
}

// Members implements lakestream.Membership.
func (m *Membership) Members(ctx context.Context) ([]lakestream.Member, error) {
	p := m.e.keys.membersPrefix()
	kvs, err := m.ms.Range(ctx, p, prefixEnd(p), 0)
	if err != nil {
		return nil, fmt.Errorf("%w: list members: %w", lakestream.ErrUnavailable, err)
	}
	out := make([]lakestream.Member, 0, len(kvs))
	for _, kv := range kvs {
		var v memberValue
		if err := json.Unmarshal(kv.Value, &v); err != nil {
			continue // not a member record of ours
		}
		out = append(out, lakestream.Member{ID: v.ID, Endpoints: v.Endpoints})
	}
	return out, nil
}

// member reads one member record (ok false: not live).
func (m *Membership) member(ctx context.Context, id string) (lakestream.Member, bool, error) {
	kv, found, err := m.ms.Get(ctx, m.e.keys.member(id))
	if err != nil {
		return lakestream.Member{}, false, fmt.Errorf("%w: read member %s: %w", lakestream.ErrUnavailable, id, err)
	}
	if !found {
		return lakestream.Member{}, false, nil
	}
	var v memberValue
	if err := json.Unmarshal(kv.Value, &v); err != nil {
		return lakestream.Member{}, false, fmt.Errorf("%w: member %s: %w", errCorruptMeta, id, err)
	}
	return lakestream.Member{ID: v.ID, Endpoints: v.Endpoints}, true, nil
}

// Owner implements lakestream.Membership.
func (m *Membership) Owner(ctx context.Context, unit string) (lakestream.Member, bool, error) {
	if err := checkUnit(unit); err != nil {
		return lakestream.Member{}, false, err
	}
	kv, found, err := m.ms.Get(ctx, m.e.keys.owner(unit))
	if err != nil {
		return lakestream.Member{}, false, fmt.Errorf("%w: read owner of %s: %w", lakestream.ErrUnavailable, unit, err)
	}
	if !found {
		return lakestream.Member{}, false, nil
	}
	var v ownerValue
	if err := json.Unmarshal(kv.Value, &v); err != nil {
		return lakestream.Member{}, false, fmt.Errorf("%w: owner of %s: %w", errCorruptMeta, unit, err)
	}
	if v.Member == m.self.ID {
		return m.Self(), true, nil
	}
	return m.member(ctx, v.Member)
}

func checkUnit(unit string) error {
	if unit == "" || len(unit) > 1024 || strings.ContainsRune(unit, 0) {
		return fmt.Errorf("%w: unit %q", lakestream.ErrInvalidArgument, unit)
	}
	return nil
}

// Acquire implements lakestream.Membership.
func (m *Membership) Acquire(ctx context.Context, unit string) (lakestream.Ownership, error) {
	if err := checkUnit(unit); err != nil {
		return nil, err
	}
	m.mu.Lock()
	if m.mu.closed {
		m.mu.Unlock()
		return nil, lakestream.ErrClosed
	}
	if o := m.mu.owned[unit]; o != nil && o.held() == nil {
		m.mu.Unlock()
		return o, nil
	}
	lease := m.mu.lease
	m.mu.Unlock()
	if lease == 0 {
		return nil, fmt.Errorf("%w: the cluster session is being renewed", lakestream.ErrUnavailable)
	}
	key := m.e.keys.owner(unit)
	v, _ := json.Marshal(ownerValue{Member: m.self.ID, Session: int64(lease)})
	ok, rev, err := m.ms.Txn(ctx, []meta.Cmp{{Key: key}}, []meta.Op{meta.PutWithLease(key, v, lease)})
	if errors.Is(err, meta.ErrLeaseExpired) {
		return nil, fmt.Errorf("%w: the cluster session expired", lakestream.ErrUnavailable)
	}
	if err != nil {
		// Unknown outcome: if it applied, the key is ours and the next
		// Acquire finds it (below).
		return nil, fmt.Errorf("%w: acquire %s: %w", lakestream.ErrUnavailable, unit, err)
	}
	if !ok {
		return m.ownedElsewhere(ctx, unit, key, lease)
	}
	o := &ownership{m: m, unit: unit, key: key, rev: rev, lease: lease, lost: make(chan struct{})}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.lease != lease || m.mu.closed {
		// The session ended while acquiring: the key goes with its lease.
		o.markLost()
		return nil, fmt.Errorf("%w: the cluster session ended while acquiring %s", lakestream.ErrUnavailable, unit)
	}
	m.mu.owned[unit] = o
	return o, nil
}

// ownedElsewhere explains a failed acquisition: another member owns unit,
// or this member does through a key whose write outcome was unknown (it is
// adopted), or an earlier session's key has not expired yet.
func (m *Membership) ownedElsewhere(ctx context.Context, unit, key string, lease meta.LeaseID) (lakestream.Ownership, error) {
	kv, found, err := m.ms.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("%w: read owner of %s: %w", lakestream.ErrUnavailable, unit, err)
	}
	if !found {
		return nil, fmt.Errorf("%w: %s was released while acquiring it; retry", lakestream.ErrUnavailable, unit)
	}
	var v ownerValue
	if err := json.Unmarshal(kv.Value, &v); err != nil {
		return nil, fmt.Errorf("%w: owner of %s: %w", errCorruptMeta, unit, err)
	}
	if v.Member == m.self.ID {
		if v.Session != int64(lease) {
			return nil, fmt.Errorf("%w: %s is still held by an ended session of this member (expires within %v)",
				lakestream.ErrUnavailable, unit, m.cfg.SessionTTL)
		}
		// Ours: an earlier Acquire applied but its reply was lost.
		m.mu.Lock()
		defer m.mu.Unlock()
		if prev := m.mu.owned[unit]; prev != nil && prev.held() == nil {
			return prev, nil
		}
		if m.mu.lease != lease {
			return nil, fmt.Errorf("%w: the cluster session ended while acquiring %s", lakestream.ErrUnavailable, unit)
		}
		o := &ownership{m: m, unit: unit, key: key, rev: kv.ModRevision, lease: lease, lost: make(chan struct{})}
		m.mu.owned[unit] = o
		return o, nil
	}
	owner, live, err := m.member(ctx, v.Member)
	if err != nil {
		return nil, err
	}
	if !live {
		owner = lakestream.Member{ID: v.Member}
	}
	return nil, &lakestream.OwnedError{Unit: unit, Owner: owner}
}

// Owned implements lakestream.Membership.
func (m *Membership) Owned() []lakestream.Ownership {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]lakestream.Ownership, 0, len(m.mu.owned))
	for _, u := range slices.Sorted(maps.Keys(m.mu.owned)) {
		out = append(out, m.mu.owned[u])
	}
	return out
}

// Close implements lakestream.Membership: it releases every ownership and
// ends the session (the member record goes with it).
func (m *Membership) Close(ctx context.Context) error {
	m.mu.Lock()
	if m.mu.closed {
		m.mu.Unlock()
		return nil
	}
	m.mu.closed = true
	lease := m.mu.lease
	m.mu.lease = 0
	owned := slices.Collect(maps.Values(m.mu.owned))
	m.mu.owned = map[string]*ownership{}
	m.mu.Unlock()
	for _, o := range owned {
		o.markLost()
	}
	m.cancel()
	<-m.done
	if lease != 0 {
		if err := m.ms.Revoke(ctx, lease); err != nil {
			return fmt.Errorf("%w: leaving the cluster: %w", lakestream.ErrUnavailable, err)
		}
	}
	return nil
}

// forget drops o from the owned set (after a release or a loss).
func (m *Membership) forget(o *ownership) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.owned[o.unit] == o {
		delete(m.mu.owned, o.unit)
	}
}

// ownership is the engine's lakestream.Ownership and Guard: the owner key
// at the revision this member created it.
type ownership struct {
	m     *Membership
	unit  string
	key   string
	rev   int64 // ModRevision of the owner key (never rewritten while owned)
	lease meta.LeaseID

	lost     chan struct{}
	lostOnce sync.Once
}

var _ lakestream.Ownership = (*ownership)(nil)

func (o *ownership) Unit() string          { return o.unit }
func (o *ownership) Lost() <-chan struct{} { return o.lost }

// Held implements lakestream.Guard. Past the session's deadline it also
// has the session given up (in the background), so Lost follows.
func (o *ownership) Held() bool {
	if o.held() != nil {
		return false
	}
	m := o.m
	m.mu.Lock()
	lease, deadline := m.mu.lease, m.mu.deadline
	m.mu.Unlock()
	if lease != o.lease {
		return false
	}
	if time.Now().After(deadline) {
		go m.loseSession(lease, "no keep-alive succeeded before the session could expire")
		return false
	}
	return true
}

func (o *ownership) markLost() {
	o.lostOnce.Do(func() { close(o.lost) })
}

// Release implements lakestream.Ownership: it deletes the owner key if it is
// still this ownership's.
func (o *ownership) Release(ctx context.Context) error {
	if o.held() != nil {
		return nil
	}
	o.m.forget(o)
	defer o.markLost()
	if _, _, err := o.m.ms.Txn(ctx, []meta.Cmp{{Key: o.key, ModRevision: o.rev}}, []meta.Op{meta.Delete(o.key)}); err != nil {
		// The key stays until the session ends; the unit is given up
		// here either way.
		return fmt.Errorf("%w: release %s: %w", lakestream.ErrUnavailable, o.unit, err)
	}
	return nil
}

// guardOf converts a lakestream.Guard handed to the engine: nil, or an
// ownership of this engine.
func guardOf(g lakestream.Guard) (*ownership, error) {
	if g == nil {
		return nil, nil
	}
	o, ok := g.(*ownership)
	if !ok {
		return nil, fmt.Errorf("%w: guard %T was not handed out by this engine", lakestream.ErrInvalidArgument, g)
	}
	return o, nil
}

// held returns ErrGuardLost once the ownership is lost (nil for no guard).
func (o *ownership) held() error {
	if o == nil {
		return nil
	}
	select {
	case <-o.lost:
		return fmt.Errorf("%w: %s is no longer owned by %s", lakestream.ErrGuardLost, o.unit, o.m.self.ID)
	default:
		return nil
	}
}

// cmps returns base plus the guard's compare (none for no guard).
func (o *ownership) cmps(base ...meta.Cmp) []meta.Cmp {
	if o == nil {
		return base
	}
	return append(base, meta.Cmp{Key: o.key, ModRevision: o.rev})
}

// check re-reads the owner key after a guarded write failed its compares:
// when the key is gone or changed the ownership is lost (ErrGuardLost).
func (o *ownership) check(ctx context.Context, ms meta.Store) error {
	if o == nil {
		return nil
	}
	if err := o.held(); err != nil {
		return err
	}
	kv, found, err := ms.Get(ctx, o.key)
	if err != nil {
		return nil // cannot tell; the caller's own error stands
	}
	if !found || kv.ModRevision != o.rev {
		o.m.forget(o)
		o.markLost()
		return o.held()
	}
	return nil
}

// OwnerCounts counts the units each member owns now, by member ID, reading
// at most limit ownership records (complete is false when there were
// more). Cost: one range read of the owners prefix.
func (m *Membership) OwnerCounts(ctx context.Context, limit int) (counts map[string]int, complete bool, err error) {
	p := m.e.keys.ownersPrefix()
	kvs, err := m.ms.Range(ctx, p, prefixEnd(p), limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("%w: list owners: %w", lakestream.ErrUnavailable, err)
	}
	complete = len(kvs) <= limit
	counts = map[string]int{}
	for _, kv := range kvs[:min(len(kvs), limit)] {
		var v ownerValue
		if err := json.Unmarshal(kv.Value, &v); err != nil {
			return nil, false, fmt.Errorf("%w: owner record %s: %w", errCorruptMeta, kv.Key, err)
		}
		counts[v.Member]++
	}
	return counts, complete, nil
}
