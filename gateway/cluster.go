package gateway

// Cluster: ownership of topics, lookup, hand-over (docs/cluster.md).
//
// Every topic-partition (the unit Pulsar clients look up) is served by one
// member at a time, its owner (lakestream.Membership). LOOKUP answers the
// owner's address; when nobody owns the topic, the member that placement
// (rendezvous hashing over the live members) picks takes it — the asked
// node itself, or the one it redirects the client to. PRODUCER and
// SUBSCRIBE on a node that does not own the topic take it when it is free
// and are refused with ServiceNotReady (the client looks it up again) when
// another member owns it. In proxy mode LOOKUP tells clients to keep
// talking to the address they dialled, and a CONNECT naming another member
// (proxy_to_broker_url) is relayed to it byte for byte.
//
// Ownership moves: an admin unload, a dedup policy change, a member leaving
// (SIGTERM: Drain) and rebalancing (a member that joined takes its share,
// a few topics per round) unload topics gracefully — appends in flight are
// answered, cursors persisted, the ownership released — and tell clients
// where to reconnect (CLOSE_PRODUCER/CLOSE_CONSUMER with the new owner's
// URL). A member that loses a topic (session expired, a guarded write
// refused) unloads it at once.
//
// Placement, the member list, the units taken and released, rebalancing
// and a drain's successors are the broker's (broker/cluster.go); here:
// LOOKUP, the relay, and unloading units — the topics served here, or at
// their owner through its admin API.

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
	"github.com/lakegate/lakegate/txn"
)

// forwardedHeader marks an admin request forwarded by another member: it is
// served here and never forwarded again.
const forwardedHeader = broker.ForwardedHeader

// self is this node as a member (its advertised endpoints).
func (s *Server) self() lakestream.Member { return s.brk.Self() }

// members returns the live members, cached (broker/cluster.go).
func (s *Server) members(ctx context.Context) ([]lakestream.Member, error) {
	return s.brk.Members(ctx)
}

// placement is broker.Placement: the member a unit belongs on.
func placement(unit string, candidates []lakestream.Member) (lakestream.Member, bool) {
	return broker.Placement(unit, candidates)
}

// streamUnits is broker.StreamUnits: the units of a stream's partitions.
func streamUnits(md lakestream.StreamMetadata) []string { return broker.StreamUnits(md) }

// brokerURLs are the URLs LOOKUP names for member: its pulsar URL (its
// pulsar+ssl one when it has no plain listener) and its pulsar+ssl URL.
func brokerURLs(member lakestream.Member) (plain, secure string) {
	plain, secure = member.Endpoints["pulsar"], member.Endpoints["pulsar+ssl"]
	if plain == "" {
		plain = secure
	}
	return plain, secure
}

func (s *Server) handleLookupTopic(ctx context.Context, c *pb.CommandLookupTopic) *pb.BaseCommand {
	req := c.GetRequestId()
	fail := func(err error) *pb.BaseCommand { return protocol.LookupError(req, serverError(err), err.Error()) }
	if isTxnCoordinatorTopic(c.GetTopic()) {
		return s.lookupTxnCoordinator(ctx, req, c.GetTopic())
	}
	unit, err := s.lookupUnit(ctx, c.GetTopic())
	if err != nil {
		return fail(err)
	}
	m := s.cfg.Membership
	owner, ok, err := m.Owner(ctx, unit)
	if err != nil {
		return fail(err)
	}
	if ok {
		return s.connectTo(req, owner)
	}
	if !c.GetAuthoritative() {
		ms, err := s.members(ctx)
		if err != nil {
			return fail(err)
		}
		if target, ok := placement(unit, ms); ok && target.ID != m.Self().ID {
			u, tls := brokerURLs(target)
			cmd := protocol.LookupRedirect(req, u, tls, true)
			cmd.LookupTopicResponse.ProxyThroughServiceUrl = boolPtr(s.cfg.ProxyLookups)
			return cmd
		}
	}
	// This node takes it (placement says so, or the client was sent here
	// to take it).
	if _, err := m.Acquire(ctx, unit); err != nil {
		var owned *lakestream.OwnedError
		if errors.As(err, &owned) && len(owned.Owner.Endpoints) > 0 {
			return s.connectTo(req, owned.Owner) // lost the race: go to the winner
		}
		return fail(err)
	}
	return s.connectTo(req, m.Self())
}

func boolPtr(b bool) *bool { return &b }

// connectTo answers LOOKUP with Connect to member.
func (s *Server) connectTo(req uint64, member lakestream.Member) *pb.BaseCommand {
	u, tls := brokerURLs(member)
	if u == "" {
		return protocol.LookupError(req, pb.ServerError_ServiceNotReady, fmt.Sprintf("member %s advertises no pulsar endpoint", member.ID))
	}
	return protocol.LookupResponse(req, u, tls, true, s.cfg.ProxyLookups)
}

// lookupUnit is the unit a LOOKUP asks for: the canonical topic name. The
// topic need not exist (SUBSCRIBE or PRODUCER decide about creation).
func (s *Server) lookupUnit(ctx context.Context, name string) (string, error) {
	if tn, err := broker.ParseTopicName(name); err == nil && tn.NonPersistent {
		return tn.String(), nil
	}
	ref, err := s.brk.Resolve(ctx, name, false)
	if err == nil {
		return ref.Unit(), nil
	}
	if errors.Is(err, lakestream.ErrNoSuchStream) && !errors.Is(err, lakestream.ErrStreamDeleted) {
		tn, perr := broker.ParseTopicName(name)
		if perr != nil {
			return "", perr
		}
		tn.Partition = -1 // not a partition of an existing partitioned topic
		return tn.String(), nil
	}
	return "", err
}

// proxyTarget decides what a CONNECT with proxy_to_broker_url asks for:
// nil when it names this node (serve the connection here), else the member
// to relay to. Only a node in proxy mode (ProxyLookups) relays, and only to
// live members; anything else is refused.
func (s *Server) proxyTarget(ctx context.Context, to string) (*lakestream.Member, error) {
	self := s.self()
	if to == "" || sameHostPort(to, self.Endpoints["pulsar"]) || sameHostPort(to, self.Endpoints["pulsar+ssl"]) {
		return nil, nil
	}
	if !s.cfg.ProxyLookups {
		return nil, fmt.Errorf("%w: proxy_to_broker_url %q names another broker, and this node relays no connection (cluster.proxyLookups is off)", broker.ErrNotAllowed, to)
	}
	ms, err := s.members(ctx)
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		if sameHostPort(to, m.Endpoints["pulsar"]) || sameHostPort(to, m.Endpoints["pulsar+ssl"]) {
			if m.ID == s.cfg.Membership.Self().ID {
				return nil, nil
			}
			return &m, nil
		}
	}
	return nil, fmt.Errorf("%w: proxy_to_broker_url %q is not a live member", broker.ErrServiceNotReady, to)
}

// hostPort is the host:port of a pulsar:// URL (or of a bare host:port).
func hostPort(u string) string {
	if p, err := url.Parse(u); err == nil && p.Host != "" {
		return p.Host
	}
	return u
}

func sameHostPort(a, b string) bool { return a != "" && b != "" && hostPort(a) == hostPort(b) }

// relay connects the client to member: this node, which authenticated the
// client, connects to the member as a proxy (relayConnect: its own
// credentials, the client's role as original_principal), then bytes flow
// both ways until either side closes. A client whose certificate is its
// credential is disconnected at the certificate's NotAfter here, as it
// would be by the owner (auth.go).
func (s *session) relay(member lakestream.Member, connect *pb.CommandConnect, buffered []byte) error {
	target, useTLS, err := s.srv.relayEndpoint(member)
	if err != nil {
		return err
	}
	d := net.Dialer{Timeout: 10 * time.Second}
	var up net.Conn
	if useTLS {
		host, _, _ := net.SplitHostPort(target)
		cfg := s.srv.clientTLS()
		cfg.ServerName = host
		up, err = (&tls.Dialer{NetDialer: &d, Config: cfg}).DialContext(s.srv.ctx, "tcp", target)
	} else {
		up, err = d.DialContext(s.srv.ctx, "tcp", target)
	}
	if err != nil {
		return fmt.Errorf("proxy: dial %s: %w", target, err)
	}
	defer up.Close()
	frame, err := protocol.AppendCommand(nil, &pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: s.relayConnect(connect)})
	if err != nil {
		return err
	}
	if _, err := up.Write(append(frame, buffered...)); err != nil {
		return fmt.Errorf("proxy: write to %s: %w", target, err)
	}
	s.conn.SetDeadline(time.Time{})
	s.srv.metrics.proxiedConnections.Inc()
	errc := make(chan error, 2)
	go func() { _, err := copyConn(up, s.conn); errc <- err }()
	go func() { _, err := copyConn(s.conn, up); errc <- err }()
	defer s.conn.Close()
	select {
	case err = <-errc:
	case <-s.done:
	}
	return err
}

// clientTLS is the configuration for reaching other members over TLS (a
// fresh one per connection: the CA file may have been rotated).
func (s *Server) clientTLS() *tls.Config {
	if s.cfg.ClientTLS != nil {
		if c := s.cfg.ClientTLS(); c != nil {
			return c.Clone()
		}
	}
	return &tls.Config{MinVersion: tls.VersionTLS12}
}

// memberHTTP is broker.MemberHTTP: the admin base URL of member as listed
// to clients.
func memberHTTP(member lakestream.Member) string { return broker.MemberHTTP(member) }

// copyConn copies until EOF or an error, then closes dst's write side.
func copyConn(dst, src net.Conn) (int64, error) {
	buf := make([]byte, 64<<10)
	var n int64
	for {
		k, err := src.Read(buf)
		if k > 0 {
			w, werr := dst.Write(buf[:k])
			n += int64(w)
			if werr != nil {
				return n, werr
			}
		}
		if err != nil {
			if cw, ok := dst.(interface{ CloseWrite() error }); ok {
				cw.CloseWrite()
			}
			return n, err
		}
	}
}

// reloadStreams unloads, gracefully and wherever they are served, the loaded
// partitions of streams, so that their next load reads changed policies.
func (s *Server) reloadStreams(ctx context.Context, ids []lakestream.StreamIdentifier) error {
	var errs []error
	for _, id := range ids {
		md, err := s.cfg.Catalog.LoadStream(ctx, id)
		if errors.Is(err, lakestream.ErrNoSuchStream) {
			continue
		}
		if err != nil {
			return err
		}
		for _, unit := range streamUnits(md) {
			errs = append(errs, s.unloadUnit(ctx, unit, ""))
		}
	}
	return errors.Join(errs...)
}

// unloadUnit unloads a unit gracefully where it is served: here (releasing
// the ownership), or at its owner through the owner's admin API. A unit
// nobody owns needs nothing. dest, when set, is the member id the unit
// should go to next (its URL is given to the clients).
func (s *Server) unloadUnit(ctx context.Context, unit, dest string) error {
	assigned := ""
	var destMember lakestream.Member
	if dest != "" {
		ms, err := s.members(ctx)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(ms, func(m lakestream.Member) bool { return m.ID == dest })
		if i < 0 {
			return fmt.Errorf("%w: destination broker %q is not a live member", broker.ErrPrecondition, dest)
		}
		destMember = ms[i]
		assigned = destMember.Endpoints["pulsar"]
	}
	t := s.topics.Get(unit)
	s.mu.Lock()
	npt := s.mu.npTopics[unit]
	s.mu.Unlock()
	if t != nil || npt != nil {
		if t != nil {
			s.unloadTopic(t, true, assigned)
		} else {
			npt.Close(assigned)
		}
		if dest != "" {
			// Hand the unit over: the destination takes it now, so that
			// a client's lookup in between does not place it elsewhere.
			if err := s.handOver(ctx, destMember, unit); err != nil {
				s.cfg.Logger.Warn("unload: the destination did not take the topic (placement decides)", "topic", unit, "destination", dest, "err", err)
			}
		}
		return nil
	}
	m := s.cfg.Membership
	owner, ok, err := m.Owner(ctx, unit)
	if err != nil || !ok {
		return err
	}
	if owner.ID == m.Self().ID {
		// Owned (looked up) but never loaded: release it.
		if ok, err := s.brk.ReleaseOwned(ctx, unit); !ok || err != nil || dest == "" {
			return err
		}
		return s.handOver(ctx, destMember, unit)
	}
	return s.forwardUnload(ctx, owner, unit, dest)
}

// unloadLocal is unloadUnit for a request another member forwarded: only
// what this node serves or owns is unloaded, nothing is forwarded again.
func (s *Server) unloadLocal(ctx context.Context, unit, dest string) error {
	if t, _ := s.loadedTopic(unit); t != nil {
		return s.unloadUnit(ctx, unit, dest)
	}
	s.mu.Lock()
	npt := s.mu.npTopics[unit]
	s.mu.Unlock()
	if npt != nil {
		return s.unloadUnit(ctx, unit, dest)
	}
	if dest != "" && dest == s.self().ID {
		// The previous owner hands the unit to this node (handOver).
		return s.brk.TakeUnit(ctx, unit)
	}
	_, err := s.brk.ReleaseOwned(ctx, unit)
	return err
}

// handOver makes member dest the owner of unit, which this node has just
// released: here directly, elsewhere through dest's admin API (a forwarded
// unload naming dest as its destination).
func (s *Server) handOver(ctx context.Context, dest lakestream.Member, unit string) error {
	if dest.ID == s.self().ID {
		return s.brk.TakeUnit(ctx, unit)
	}
	return s.forwardUnload(ctx, dest, unit, dest.ID)
}

// forwardUnload asks the owner of unit to unload it (admin API, marked as
// forwarded so that it is not sent on again).
func (s *Server) forwardUnload(ctx context.Context, owner lakestream.Member, unit, dest string) error {
	base, err := s.peerBase(owner)
	if err != nil {
		return err
	}
	tn, err := broker.ParseTopicName(unit)
	if err != nil {
		return err
	}
	domain := "persistent"
	if tn.NonPersistent {
		domain = "non-persistent"
	}
	u := base + "/admin/v2/" + domain + "/" + url.PathEscape(tn.Tenant) + "/" + url.PathEscape(tn.Namespace) + "/" + url.PathEscape(tn.Local) + "/unload"
	if dest != "" {
		u += "?destinationBroker=" + url.QueryEscape(dest)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, u, http.NoBody)
	if err != nil {
		return err
	}
	req.Header.Set(forwardedHeader, "1")
	if t := s.cfg.BrokerClientToken; t != "" {
		req.Header.Set("Authorization", "Bearer "+t)
	}
	resp, err := s.httpClient.Do(req)
	if err != nil {
		return fmt.Errorf("%w: unload %s at %s: %w", broker.ErrServiceNotReady, unit, owner.ID, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		var b bytes.Buffer
		b.ReadFrom(io.LimitReader(resp.Body, 4<<10))
		return fmt.Errorf("%w: unload %s at %s: HTTP %d: %s", broker.ErrServiceNotReady, unit, owner.ID, resp.StatusCode, b.String())
	}
	return nil
}

// Drain hands every topic this node serves over to the member placement
// picks among the others (SIGTERM), releasing each ownership, so that
// clients move with no acknowledged message redelivered. It returns when
// every topic is unloaded or ctx ends. The only member of its cluster
// only unloads.
func (s *Server) Drain(ctx context.Context) {
	successor := s.brk.Successors(ctx) // broker/cluster.go
	s.draining.Store(true)
	ts := s.loadedTopics()
	slices.SortFunc(ts, func(a, b *topic) int { return cmp.Compare(a.Name(), b.Name()) })
	sem := make(chan struct{}, drainParallel)
	done := make(chan struct{}, len(ts))
	for _, t := range ts {
		assigned := successor(t.Name())
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		go func() {
			defer func() { <-sem; done <- struct{}{} }()
			s.unloadTopic(t, true, assigned)
		}()
	}
	for range ts {
		select {
		case <-done:
		case <-ctx.Done():
			return
		}
	}
	for _, t := range s.npTopicsServed() {
		t.Close(successor(t.name.String()))
	}
	s.brk.ReleaseAllOwned(ctx) // looked up here, never loaded
}

// drainParallel bounds the topics unloaded at once by Drain.
const drainParallel = 16

// lookupTxnCoordinator answers a lookup of a partition of Pulsar's
// transaction coordinator topic: the node serving that coordinator, its
// owner or the member placement picks (this node takes it when that is
// itself).
func (s *Server) lookupTxnCoordinator(ctx context.Context, req uint64, name string) *pb.BaseCommand {
	tc := s.brk.Txn()
	if tc == nil {
		return protocol.LookupError(req, pb.ServerError_NotAllowedError, errTxnOff.Error())
	}
	id, ok := txnCoordinatorOf(name)
	if !ok || id >= uint64(tc.Coordinators()) {
		return protocol.LookupError(req, pb.ServerError_TopicNotFound, fmt.Sprintf("%s: there are %d transaction coordinators", name, tc.Coordinators()))
	}
	owner, err := s.brk.OwnerOrPlacement(ctx, txn.Unit(id))
	if err != nil {
		return protocol.LookupError(req, serverError(err), err.Error())
	}
	return s.connectTo(req, owner)
}
