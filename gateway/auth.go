package gateway

// Authentication of connections (docs/security.md).
//
// With Config.Auth set, CONNECT must carry credentials a configured
// provider accepts (auth.Authenticator): a token, or a verified client
// certificate on a TLS connection. A refusal is an ERROR
// AuthenticationError with the reason, and the connection closes.
//
// Credentials that expire are handled when they do: a token's client that
// announced supports_auth_refresh (the Java, Go and C++ clients do) gets
// AUTH_CHALLENGE and must answer AUTH_RESPONSE with a fresh token for the
// same role within Config.AuthRefreshGrace; otherwise — for a client that
// cannot refresh, and at a client certificate's NotAfter (a certificate is
// part of the TLS handshake: no AUTH_RESPONSE renews it) — the connection
// closes. Failures are counted by reason (lakegate_auth_failures_total),
// never with the credentials.
//
// Proxies (Config.ProxyRoles: other members relaying a connection, Apache
// Pulsar's proxy) connect as their own role and name the client in
// CONNECT's original_principal, with its token as original_auth_data;
// every request is then authorized for both roles (authzRoles), and the
// client's forwarded token is verified and challenged like a direct
// client's.

import (
	"context"
	"crypto/tls"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lakegate/lakegate/broker"

	"github.com/lakegate/lakegate/auth"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

// Errors of authentication and authorization, as clients see them.
// (broker.ErrAuthentication and broker.ErrAuthorization: the admin REST
// answers them too).
var (
	ErrAuthentication = broker.ErrAuthentication
	ErrAuthorization  = broker.ErrAuthorization
)

// sessionAuth is a session's authenticated identity and its refresh.
type sessionAuth struct {
	mu struct {
		sync.Mutex
		// id is who authenticated the connection: the client, or a proxy
		// role connecting on behalf of original.
		id auth.Identity
		// original is the client a proxy role connects for (CONNECT's
		// original_principal; Role "" when none). With Method set, its
		// credentials were verified here (original_auth_data) and are the
		// ones challenged when they expire.
		original auth.Identity
		// challenged: an AUTH_CHALLENGE is out; the connection closes at
		// deadline unless fresh credentials come back.
		challenged bool
		timer      *time.Timer
		// proxyTimer closes the connection when a proxy's own credentials
		// expire: they cannot be refreshed through it.
		proxyTimer *time.Timer
		gen        uint64 // bumped by every setIdentity: older timers do nothing
	}
	canRefresh bool // the client announced supports_auth_refresh
	// relaying: the connection is relayed to another member, which
	// challenges expiring tokens itself; here only credentials that cannot
	// be refreshed (a client certificate) still end the connection.
	relaying atomic.Bool
}

// role is the session's authenticated role ("" without authentication):
// the proxy's when it connects for another client.
func (s *session) role() string {
	s.auth.mu.Lock()
	defer s.auth.mu.Unlock()
	return s.auth.mu.id.Role
}

// identities are the session's authenticated identity and, for a proxy's
// connection, the original client's (Role "" otherwise).
func (s *session) identities() (id, original auth.Identity) {
	s.auth.mu.Lock()
	defer s.auth.mu.Unlock()
	return s.auth.mu.id, s.auth.mu.original
}

// authzRoles are the roles a request of this session must be authorized
// for: the authenticated role and, on a proxy's connection, the original
// principal too (Pulsar's rule: both roles must be allowed, so that a proxy
// grants nothing its client lacks).
func (s *session) authzRoles() []string {
	id, original := s.identities()
	if original.Role != "" {
		return []string{id.Role, original.Role}
	}
	return []string{id.Role}
}

// authorize runs check for every role of authzRoles: the first refusal.
func (s *session) authorize(check func(role string) error) error {
	for _, role := range s.authzRoles() {
		if err := check(role); err != nil {
			return err
		}
	}
	return nil
}

// tlsState is the connection's TLS state (nil for a plain connection).
func (s *session) tlsState() *tls.ConnectionState {
	tc, ok := s.conn.(*tls.Conn)
	if !ok {
		return nil
	}
	st := tc.ConnectionState()
	return &st
}

// authenticateConnect checks CONNECT's credentials, and the original
// principal a proxy names; an error closes the connection after the ERROR
// went out.
func (s *session) authenticateConnect(c *pb.CommandConnect) error {
	a := s.srv.cfg.Auth
	if a == nil {
		return nil
	}
	s.auth.canRefresh = c.GetFeatureFlags().GetSupportsAuthRefresh()
	id, err := a.Authenticate(c.GetAuthMethodName(), c.GetAuthData(), s.tlsState())
	if err != nil {
		return s.refuseAuth(err)
	}
	original, err := s.originalIdentity(c, id)
	if err != nil {
		return err
	}
	s.setIdentity(id, original)
	s.log = s.log.With("role", id.Role)
	if original.Role != "" {
		s.log = s.log.With("original_principal", original.Role)
		s.log.Info("a proxy connected for a client", "verified", original.Method != "") // as Pulsar's broker logs it
	}
	return nil
}

// proxied reports whether CONNECT speaks for another client.
func proxied(c *pb.CommandConnect) bool {
	return c.OriginalPrincipal != nil || c.OriginalAuthData != nil || c.OriginalAuthMethod != nil || c.ProxyVersion != nil
}

// originalIdentity is the client a proxy's CONNECT names (Role "" when it
// names none). As Pulsar's broker: original_principal (and proxy_version)
// are accepted from a proxy role only, a proxy role must name a client, and
// that client is no proxy role. Forwarded credentials (original_auth_data)
// are verified unless SkipOriginalAuthData, and must be the named
// principal's; a client certificate cannot be forwarded, so a principal
// without credentials, or named with method tls, is taken on the proxy's
// word.
func (s *session) originalIdentity(c *pb.CommandConnect, id auth.Identity) (auth.Identity, error) {
	proxyRoles := s.srv.cfg.ProxyRoles
	isProxy := auth.IsProxyRole(id.Role, proxyRoles)
	if !proxied(c) {
		if isProxy {
			return auth.Identity{}, s.refuseAuthz(fmt.Errorf("%w: role %q is a proxy role (auth.proxyRoles) and connects for clients only: it must name one in original_principal", ErrAuthorization, id.Role))
		}
		return auth.Identity{}, nil
	}
	if !isProxy {
		return auth.Identity{}, s.refuseAuthz(fmt.Errorf("%w: role %q is not a proxy role (auth.proxyRoles) and may not connect on behalf of another principal", ErrAuthorization, id.Role))
	}
	original := auth.Identity{Role: c.GetOriginalPrincipal()}
	if data, method := c.GetOriginalAuthData(), c.GetOriginalAuthMethod(); data != "" && method != auth.MethodTLS && !s.srv.cfg.SkipOriginalAuthData {
		oid, err := s.srv.cfg.Auth.Authenticate(method, []byte(data), nil)
		if err != nil {
			return auth.Identity{}, s.refuseAuth(fmt.Errorf("original_auth_data: %w", err))
		}
		if original.Role != "" && oid.Role != original.Role {
			return auth.Identity{}, s.refuseAuth(fmt.Errorf("%w: original_auth_data is for role %q, original_principal names %q", auth.ErrInvalidCredentials, oid.Role, original.Role))
		}
		original = oid
	}
	switch {
	case original.Role == "":
		return auth.Identity{}, s.refuseAuthz(fmt.Errorf("%w: a proxy role (%q) must name the client it connects for in original_principal", ErrAuthorization, id.Role))
	case auth.IsProxyRole(original.Role, proxyRoles):
		return auth.Identity{}, s.refuseAuthz(fmt.Errorf("%w: the original principal %q is a proxy role", ErrAuthorization, original.Role))
	}
	return original, nil
}

// refuseAuth answers an authentication failure and counts it.
func (s *session) refuseAuth(err error) error {
	s.srv.metrics.authFailures.WithLabelValues(auth.Reason(err)).Inc()
	err = fmt.Errorf("%w: %w", ErrAuthentication, err)
	s.log.Info("authentication refused", "reason", auth.Reason(err))
	s.sendFinal(protocol.Error(0, pb.ServerError_AuthenticationError, err.Error()))
	return fmt.Errorf("%w: %w", errRefused, err)
}

// refuseAuthz answers a CONNECT whose roles do not go together (err wraps
// ErrAuthorization) and counts it.
func (s *session) refuseAuthz(err error) error {
	s.srv.metrics.authFailures.WithLabelValues("unauthorized").Inc()
	s.log.Info("connection refused", "err", err)
	s.sendFinal(protocol.Error(0, pb.ServerError_AuthorizationError, err.Error()))
	return fmt.Errorf("%w: %w", errRefused, err)
}

// setIdentity records the identities and arms their expiry: the client's
// credentials (the original ones on a proxy's connection) are challenged,
// or end the connection when they cannot be refreshed (a certificate); a
// proxy's own credentials end it.
func (s *session) setIdentity(id, original auth.Identity) {
	s.auth.mu.Lock()
	defer s.auth.mu.Unlock()
	s.auth.mu.id, s.auth.mu.original = id, original
	s.auth.mu.challenged = false
	s.auth.mu.gen++
	for _, t := range []**time.Timer{&s.auth.mu.timer, &s.auth.mu.proxyTimer} {
		if *t != nil {
			(*t).Stop()
			*t = nil
		}
	}
	gen := s.auth.mu.gen
	client := id
	if original.Role != "" {
		client = original
		if !id.Expires.IsZero() {
			s.auth.mu.proxyTimer = time.AfterFunc(max(time.Until(id.Expires), 0), func() { s.proxyExpired(gen) })
		}
	}
	if !client.Expires.IsZero() {
		s.auth.mu.timer = time.AfterFunc(max(time.Until(client.Expires), 0), func() { s.credentialsExpired(gen) })
	}
}

// credentialsExpired runs when the client's credentials expire: it
// challenges a client that can refresh them, and closes the connection of
// one that cannot — it did not announce supports_auth_refresh, or its
// credential is a certificate (no AUTH_CHALLENGE can renew it: the Java,
// Go and C++ clients answer with the same certificate) —; a challenge
// unanswered within AuthRefreshGrace closes it too. On a relayed
// connection the owner challenges tokens; only certificates end it here.
func (s *session) credentialsExpired(gen uint64) {
	select {
	case <-s.done:
		return
	default:
	}
	s.auth.mu.Lock()
	if gen != s.auth.mu.gen {
		s.auth.mu.Unlock()
		return // refreshed meanwhile
	}
	client := s.auth.mu.id
	if s.auth.mu.original.Role != "" {
		client = s.auth.mu.original
	}
	if s.auth.relaying.Load() && client.Refreshable() {
		s.auth.mu.Unlock()
		return
	}
	closeNow := !s.auth.canRefresh || !client.Refreshable() || s.auth.mu.challenged
	if !closeNow {
		s.auth.mu.challenged = true
		s.auth.mu.timer = time.AfterFunc(s.srv.cfg.AuthRefreshGrace, func() { s.credentialsExpired(gen) })
	}
	s.auth.mu.Unlock()
	if closeNow {
		s.srv.metrics.authFailures.WithLabelValues("expired").Inc()
		// s.log belongs to the reader goroutine; this runs on a timer's.
		s.srv.cfg.Logger.Info("closing a connection whose credentials expired", "remote", s.conn.RemoteAddr().String(), "role", client.Role, "method", client.Method)
		s.close()
		return
	}
	s.send(protocol.AuthChallenge(s.srv.cfg.ServerVersion, s.protocolVersion, client.Method, []byte("refresh")))
}

// proxyExpired closes a proxy's connection when the proxy's own
// credentials expire (an AUTH_CHALLENGE would reach its client, not it).
func (s *session) proxyExpired(gen uint64) {
	s.auth.mu.Lock()
	stale := gen != s.auth.mu.gen
	s.auth.mu.Unlock()
	if stale {
		return
	}
	select {
	case <-s.done:
		return
	default:
	}
	s.srv.metrics.authFailures.WithLabelValues("expired").Inc()
	s.srv.cfg.Logger.Info("closing a proxy's connection whose own credentials expired", "remote", s.conn.RemoteAddr().String())
	s.close()
}

// handleAuthResponse checks fresh credentials: the same role, valid now.
// On a proxy's connection they are the original client's (the challenge
// went through the proxy to it).
func (s *session) handleAuthResponse(c *pb.CommandAuthResponse) error {
	a := s.srv.cfg.Auth
	if a == nil {
		return nil // nothing was asked
	}
	r := c.GetResponse()
	id, original := s.identities()
	if original.Role != "" {
		fresh, err := a.Authenticate(r.GetAuthMethodName(), r.GetAuthData(), nil)
		if err != nil {
			return s.refuseAuth(err)
		}
		if fresh.Role != original.Role {
			return s.refuseAuth(fmt.Errorf("%w: refreshed credentials are for role %q, the connection's client is %q", auth.ErrInvalidCredentials, fresh.Role, original.Role))
		}
		s.setIdentity(id, fresh)
		return nil
	}
	fresh, err := a.Authenticate(r.GetAuthMethodName(), r.GetAuthData(), s.tlsState())
	if err != nil {
		return s.refuseAuth(err)
	}
	if fresh.Role != id.Role {
		return s.refuseAuth(fmt.Errorf("%w: refreshed credentials are for role %q, the connection's is %q", auth.ErrInvalidCredentials, fresh.Role, id.Role))
	}
	s.setIdentity(fresh, auth.Identity{})
	return nil
}

// stopAuth stops the expiry timers (the session ends).
func (s *session) stopAuth() {
	s.auth.mu.Lock()
	defer s.auth.mu.Unlock()
	for _, t := range []*time.Timer{s.auth.mu.timer, s.auth.mu.proxyTimer} {
		if t != nil {
			t.Stop()
		}
	}
}

// checkTopicName checks a topic name a client sent (clientTopicName:
// broker.ErrInvalidTopicName, or broker.ErrNotAllowed for the reserved tenant), then that
// the session's role may do action on it (nil without authorization).
// Every command naming a topic calls it first, before the topic is looked
// up: nothing about a topic is revealed to a role that may not use it.
func (s *session) checkTopicName(ctx context.Context, name, action string) error {
	tn, err := clientTopicName(name)
	if err != nil {
		return err
	}
	if !s.srv.authzOn() {
		return nil
	}
	if err := s.authorize(func(role string) error { return s.srv.checkTopic(ctx, role, tn, action) }); err != nil {
		s.srv.metrics.authFailures.WithLabelValues("unauthorized").Inc()
		return err
	}
	return nil
}
