package gateway

// Authentication of connections (docs/security.md).
//
// With Config.Auth set, CONNECT must carry credentials a configured
// provider accepts (auth.Authenticator): a token, or a verified client
// certificate on a TLS connection. A refusal is an ERROR
// AuthenticationError with the reason, and the connection closes.
//
// Credentials that expire (a token's "exp", a certificate's NotAfter) are
// challenged when they do: a client that announced supports_auth_refresh
// (the Java, Go and C++ clients do) gets AUTH_CHALLENGE and must answer
// AUTH_RESPONSE with fresh credentials for the same role within
// Config.AuthRefreshGrace; otherwise — or for a client that cannot refresh —
// the connection closes. Failures are counted by reason
// (lakegate_auth_failures_total), never with the credentials.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lakegate/lakegate/auth"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

// Errors of authentication and authorization, as clients see them.
var (
	// ErrAuthentication: missing, invalid or expired credentials
	// (AuthenticationError; HTTP 401).
	ErrAuthentication = errors.New("gateway: authentication failed")
	// ErrAuthorization: the role may not do this (AuthorizationError; HTTP
	// 403).
	ErrAuthorization = errors.New("gateway: not authorized")
)

// sessionAuth is a session's authenticated identity and its refresh.
type sessionAuth struct {
	mu struct {
		sync.Mutex
		id auth.Identity
		// challenged: an AUTH_CHALLENGE is out; the connection closes at
		// deadline unless fresh credentials come back.
		challenged bool
		timer      *time.Timer
		gen        uint64 // bumped by every setIdentity: older timers do nothing
	}
	canRefresh bool // the client announced supports_auth_refresh
}

// role is the session's authenticated role ("" without authentication).
func (s *session) role() string {
	s.auth.mu.Lock()
	defer s.auth.mu.Unlock()
	return s.auth.mu.id.Role
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

// authenticateConnect checks CONNECT's credentials; an error closes the
// connection after the ERROR went out.
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
	s.setIdentity(id)
	s.log = s.log.With("role", id.Role)
	return nil
}

// refuseAuth answers an authentication failure and counts it.
func (s *session) refuseAuth(err error) error {
	s.srv.metrics.authFailures.WithLabelValues(auth.Reason(err)).Inc()
	err = fmt.Errorf("%w: %w", ErrAuthentication, err)
	s.log.Info("authentication refused", "reason", auth.Reason(err))
	s.sendFinal(protocol.Error(0, pb.ServerError_AuthenticationError, err.Error()))
	return fmt.Errorf("%w: %w", errRefused, err)
}

// setIdentity records id and arms the expiry check.
func (s *session) setIdentity(id auth.Identity) {
	s.auth.mu.Lock()
	defer s.auth.mu.Unlock()
	s.auth.mu.id = id
	s.auth.mu.challenged = false
	s.auth.mu.gen++
	if s.auth.mu.timer != nil {
		s.auth.mu.timer.Stop()
		s.auth.mu.timer = nil
	}
	if id.Expires.IsZero() {
		return
	}
	gen := s.auth.mu.gen
	s.auth.mu.timer = time.AfterFunc(max(time.Until(id.Expires), 0), func() { s.credentialsExpired(gen) })
}

// credentialsExpired runs when the session's credentials expire: it
// challenges the client, or closes the connection of one that cannot
// refresh; a challenge unanswered within AuthRefreshGrace closes it too.
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
	closeNow := !s.auth.canRefresh || s.auth.mu.challenged
	method := s.auth.mu.id.Method
	if !closeNow {
		s.auth.mu.challenged = true
		s.auth.mu.timer = time.AfterFunc(s.srv.cfg.AuthRefreshGrace, func() { s.credentialsExpired(gen) })
	}
	s.auth.mu.Unlock()
	if closeNow {
		s.srv.metrics.authFailures.WithLabelValues("expired").Inc()
		s.log.Info("closing a connection whose credentials expired")
		s.close()
		return
	}
	s.send(protocol.AuthChallenge(s.srv.cfg.ServerVersion, s.protocolVersion, method, []byte("refresh")))
}

// handleAuthResponse checks fresh credentials: the same role, valid now.
func (s *session) handleAuthResponse(c *pb.CommandAuthResponse) error {
	a := s.srv.cfg.Auth
	if a == nil {
		return nil // nothing was asked
	}
	r := c.GetResponse()
	id, err := a.Authenticate(r.GetAuthMethodName(), r.GetAuthData(), s.tlsState())
	if err != nil {
		return s.refuseAuth(err)
	}
	if old := s.role(); id.Role != old {
		return s.refuseAuth(fmt.Errorf("%w: refreshed credentials are for role %q, the connection's is %q", auth.ErrInvalidCredentials, id.Role, old))
	}
	s.setIdentity(id)
	return nil
}

// stopAuth stops the expiry timer (the session ends).
func (s *session) stopAuth() {
	s.auth.mu.Lock()
	defer s.auth.mu.Unlock()
	if s.auth.mu.timer != nil {
		s.auth.mu.timer.Stop()
	}
}

// checkTopicName checks a topic name a client sent (clientTopicName:
// ErrInvalidTopicName, or ErrNotAllowed for the reserved tenant), then that
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
	if err := s.srv.checkTopic(ctx, s.role(), tn, action); err != nil {
		s.srv.metrics.authFailures.WithLabelValues("unauthorized").Inc()
		return err
	}
	return nil
}
