package kafka

// Authentication and authorization (docs/kafka.md, "Security"). With an
// authenticator configured, a connection must authenticate with SASL
// (SaslHandshake v1, then SaslAuthenticate) before any request but
// ApiVersions: PLAIN carries a lakegate token as its password (the user
// name is not read), OAUTHBEARER the token itself — the same tokens, and
// so the same roles, as the Pulsar listener's token auth. A session
// lifetime (KIP-368) makes the client authenticate again before its token
// expires. Requests are then checked against the same grants as Pulsar
// clients' (broker/authz.go).

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/lakegate/lakegate/auth"
	"github.com/lakegate/lakegate/broker"
)

// SASL mechanisms.
const (
	mechPlain       = "PLAIN"
	mechOAuthBearer = "OAUTHBEARER"
)

// connAuth is a connection's authentication state (under conn.auth's
// lock: the reader writes it, handlers read the role).
type connAuth struct {
	// mechanism is the one SaslHandshake chose ("" before).
	mechanism string
	role      string
	expires   time.Time
	ok        bool
}

// authRequired reports whether the listener authenticates connections.
func (s *Server) authRequired() bool { return s.cfg.Auth != nil }

// preAuth reports whether request key may come before authentication.
func preAuth(key int16) bool {
	return key == apiVersionsKey || key == saslHandshakeKey || key == saslAuthenticateKey
}

const (
	saslHandshakeKey    = 17
	saslAuthenticateKey = 36
)

func handleSaslHandshake(c *conn, req kmsg.Request, a *answer) {
	r := req.(*kmsg.SASLHandshakeRequest)
	resp := r.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms = []string{mechPlain, mechOAuthBearer}
	switch {
	case !c.srv.authRequired():
		resp.ErrorCode = kerr.IllegalSaslState.Code // this listener has no SASL
	case r.Mechanism != mechPlain && r.Mechanism != mechOAuthBearer:
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
	default:
		c.auth.Lock()
		c.auth.mechanism = r.Mechanism
		c.auth.Unlock()
	}
	a.set(resp)
}

func handleSaslAuthenticate(c *conn, req kmsg.Request, a *answer) {
	r := req.(*kmsg.SASLAuthenticateRequest)
	resp := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	c.auth.Lock()
	mech := c.auth.mechanism
	c.auth.Unlock()
	fail := func(code int16, err error) {
		resp.ErrorCode = code
		resp.ErrorMessage = kmsg.StringPtr(err.Error())
		a.set(resp)
		c.srv.log.Warn("kafka authentication failed", "client", c.nc.RemoteAddr().String(), "err", err)
		// Kafka closes the connection after a failed authentication, once
		// the answer is out.
		c.closeAfter = true
		c.srv.metrics.authFailures.Inc()
	}
	if mech == "" {
		fail(kerr.IllegalSaslState.Code, errors.New("SaslAuthenticate before SaslHandshake"))
		return
	}
	token, err := saslToken(mech, r.SASLAuthBytes)
	if err != nil {
		fail(kerr.SaslAuthenticationFailed.Code, err)
		return
	}
	var state *tls.ConnectionState
	if tc, ok := c.nc.(*tls.Conn); ok {
		st := tc.ConnectionState()
		state = &st
	}
	id, err := c.srv.cfg.Auth.Authenticate(auth.MethodToken, []byte(token), state)
	if err != nil {
		fail(kerr.SaslAuthenticationFailed.Code, fmt.Errorf("authentication failed: %v", err))
		return
	}
	c.auth.Lock()
	c.auth.role, c.auth.expires, c.auth.ok = id.Role, id.Expires, true
	c.auth.mechanism = "" // a re-authentication starts with a handshake
	c.auth.Unlock()
	if !id.Expires.IsZero() {
		resp.SessionLifetimeMillis = max(time.Until(id.Expires).Milliseconds(), 1)
	}
	a.set(resp)
}

// saslToken reads the token of a SASL client message: PLAIN's password
// ([authzid] NUL user NUL password), OAUTHBEARER's bearer token (RFC 7628:
// "n,,\x01auth=Bearer <token>\x01...\x01\x01").
func saslToken(mech string, msg []byte) (string, error) {
	switch mech {
	case mechPlain:
		parts := bytes.Split(msg, []byte{0})
		if len(parts) != 3 || len(parts[2]) == 0 {
			return "", errors.New("SASL/PLAIN: expected [authzid] NUL user NUL password (the password is a lakegate token)")
		}
		return string(parts[2]), nil
	case mechOAuthBearer:
		for _, kv := range strings.Split(string(msg), "\x01") {
			if v, ok := strings.CutPrefix(kv, "auth="); ok {
				if tok, ok := strings.CutPrefix(v, "Bearer "); ok && tok != "" {
					return tok, nil
				}
			}
		}
		return "", errors.New("SASL/OAUTHBEARER: no \"auth=Bearer <token>\" in the client's message")
	}
	return "", fmt.Errorf("SASL mechanism %q", mech)
}

// preAuthRequestBytes bounds a request read before the connection
// authenticated (Kafka's sasl.server.max.receive.size): an anonymous client
// cannot make the node hold more.
const preAuthRequestBytes = 512 << 10

// unauthenticated reports whether the listener requires authentication
// and the connection has not authenticated.
func (c *conn) unauthenticated() bool {
	if !c.srv.authRequired() {
		return false
	}
	c.auth.Lock()
	defer c.auth.Unlock()
	return !c.auth.ok
}

// checkAuthenticated refuses a request of an unauthenticated or expired
// connection (the connection is then closed, as Kafka does).
func (c *conn) checkAuthenticated(key int16) error {
	if !c.srv.authRequired() || preAuth(key) {
		return nil
	}
	c.auth.Lock()
	defer c.auth.Unlock()
	if !c.auth.ok {
		return fmt.Errorf("request %s before SASL authentication", kmsg.NameForKey(key))
	}
	if !c.auth.expires.IsZero() && time.Now().After(c.auth.expires) {
		return errors.New("the connection's token expired and it did not authenticate again")
	}
	return nil
}

// role is the connection's authenticated role ("" without auth).
func (c *conn) role() string {
	c.auth.Lock()
	defer c.auth.Unlock()
	return c.auth.role
}

// authorize checks the connection's role may do action on a Kafka topic;
// kerr.TopicAuthorizationFailed (wrapped with the reason) when not.
func (c *conn) authorize(ctx context.Context, topic, action string) error {
	return c.checkTopic(topic, kerr.TopicAuthorizationFailed, func(b *broker.Broker, tn broker.TopicName) error {
		return b.CheckTopic(ctx, c.role(), tn, action)
	})
}

// authorizeGroup checks the connection's role may commit and read a
// group's offsets of a topic: consume the group's subscription of it.
func (c *conn) authorizeGroup(ctx context.Context, group, topic string) error {
	return c.checkTopic(topic, kerr.GroupAuthorizationFailed, func(b *broker.Broker, tn broker.TopicName) error {
		return b.CheckSubscription(ctx, c.role(), tn, group)
	})
}

// checkTopic runs a broker check of a Kafka topic when authorization is
// on; a refusal becomes deny, wrapped with the reason.
func (c *conn) checkTopic(topic string, deny *kerr.Error, check func(*broker.Broker, broker.TopicName) error) error {
	b := c.srv.cfg.Broker
	if !b.AuthzOn() {
		return nil
	}
	tn, err := broker.ParseTopicName(c.srv.pulsarName(topic))
	if err != nil {
		return kerr.InvalidTopicException
	}
	if err := check(b, tn); err != nil {
		if errors.Is(err, broker.ErrAuthorization) {
			return fmt.Errorf("%w: %v", deny, err)
		}
		return err
	}
	return nil
}

// authorizeAdmin checks the connection's role administers the Kafka
// namespace's tenant (creating, growing and deleting topics).
func (c *conn) authorizeAdmin(ctx context.Context) error {
	b := c.srv.cfg.Broker
	if !b.AuthzOn() {
		return nil
	}
	tenant, _, _ := strings.Cut(c.srv.cfg.Namespace, "/")
	if err := b.CheckSuperOrTenantAdmin(ctx, c.role(), tenant); err != nil {
		if errors.Is(err, broker.ErrAuthorization) {
			return fmt.Errorf("%w: %v", kerr.TopicAuthorizationFailed, err)
		}
		return err
	}
	return nil
}
