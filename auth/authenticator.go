package auth

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Method names, as clients send them in CONNECT's auth_method_name.
const (
	MethodToken = "token"
	MethodTLS   = "tls"
)

// Errors of authentication. They surface as Pulsar's AuthenticationError
// (binary protocol) and HTTP 401 (admin); each is counted by kind
// (Reason).
var (
	// ErrNoCredentials: the client sent none (no method, no token, no client
	// certificate).
	ErrNoCredentials = errors.New("auth: no credentials")
	// ErrInvalidCredentials: a token that does not verify (signature, key,
	// algorithm, audience, claims) or a certificate without a common name.
	ErrInvalidCredentials = errors.New("auth: invalid credentials")
	// ErrExpired: a token past its "exp".
	ErrExpired = errors.New("auth: credentials expired")
	// ErrUnknownMethod: an auth_method_name no configured provider serves.
	ErrUnknownMethod = errors.New("auth: unknown authentication method")
)

// Reason names the kind of an authentication failure, for metrics.
func Reason(err error) string {
	switch {
	case errors.Is(err, ErrNoCredentials):
		return "no_credentials"
	case errors.Is(err, ErrExpired):
		return "expired"
	case errors.Is(err, ErrUnknownMethod):
		return "unknown_method"
	case errors.Is(err, ErrIssuerUnavailable):
		return "issuer_unavailable"
	case errors.Is(err, ErrInvalidCredentials):
		return "invalid"
	}
	return "error"
}

// Identity is who a client is.
type Identity struct {
	Role   string
	Method string // MethodToken (token and openid providers) or MethodTLS
	// Expires is when the credentials stop being valid (zero: never): a
	// connection is challenged then (Refreshable) or closed.
	Expires time.Time
}

// Refreshable reports whether a live connection can renew these
// credentials through AUTH_CHALLENGE / AUTH_RESPONSE: a token can (the
// client sends a fresh one), a client certificate cannot (it is part of the
// connection's TLS handshake; a renewed certificate needs a new
// connection).
func (id Identity) Refreshable() bool { return id.Method == MethodToken }

// Config configures an Authenticator.
type Config struct {
	// Providers are the enabled providers: MethodToken, ProviderOpenID
	// and/or MethodTLS. The token and openid providers both serve method
	// "token"; a token is tried with each in the order given here.
	Providers []string
	// Token configures the token provider.
	Token TokenConfig
	// OpenID configures the openid provider.
	OpenID OpenIDConfig
}

// tokenVerifier is a provider of method "token".
type tokenVerifier interface {
	authenticate(token string) (Identity, error)
}

// Authenticator checks credentials with the configured providers. Safe for
// concurrent use.
type Authenticator struct {
	// tokens are the providers of method "token" in the configured order
	// (as Pulsar's AuthenticationProviderList tries the providers of one
	// method): the first that accepts a token gives its identity.
	tokens []tokenVerifier
	tls    bool
}

// New returns an Authenticator for cfg.
func New(cfg Config) (*Authenticator, error) {
	a := &Authenticator{}
	if len(cfg.Providers) == 0 {
		return nil, errors.New("auth: no authentication provider configured")
	}
	seen := map[string]bool{}
	for _, p := range cfg.Providers {
		if seen[p] {
			return nil, fmt.Errorf("auth: provider %q given twice", p)
		}
		seen[p] = true
		switch p {
		case MethodToken:
			t, err := newTokenProvider(cfg.Token)
			if err != nil {
				return nil, err
			}
			a.tokens = append(a.tokens, t)
		case ProviderOpenID:
			o, err := newOpenIDProvider(cfg.OpenID)
			if err != nil {
				return nil, err
			}
			a.tokens = append(a.tokens, o)
		case MethodTLS:
			a.tls = true
		default:
			return nil, fmt.Errorf("auth: unknown provider %q (want %s, %s or %s)", p, MethodToken, ProviderOpenID, MethodTLS)
		}
	}
	return a, nil
}

// authenticateToken tries a token with each provider of method "token".
// When all refuse it, the refusal reported is the one of the provider the
// token belongs to (the openid provider's, for a token of an allowed
// issuer), else every provider's.
func (a *Authenticator) authenticateToken(token string) (Identity, error) {
	var errs []error
	for _, v := range a.tokens {
		id, err := v.authenticate(token)
		if err == nil {
			return id, nil
		}
		if pe := (*providerError)(nil); errors.As(err, &pe) && pe.mine {
			return Identity{}, err
		}
		errs = append(errs, err)
	}
	if len(errs) == 1 {
		return Identity{}, errs[0]
	}
	return Identity{}, fmt.Errorf("%w; %w", errs[0], errs[1])
}

// Methods lists the enabled methods.
func (a *Authenticator) Methods() []string {
	var out []string
	if len(a.tokens) > 0 {
		out = append(out, MethodToken)
	}
	if a.tls {
		out = append(out, MethodTLS)
	}
	return out
}

// Authenticate checks what a client sent with CONNECT (or AUTH_RESPONSE):
// the method name, its data, and the connection's TLS state (nil for a
// plain connection).
func (a *Authenticator) Authenticate(method string, data []byte, state *tls.ConnectionState) (Identity, error) {
	switch method {
	case MethodToken:
		if len(a.tokens) == 0 {
			break
		}
		return a.authenticateToken(string(data))
	case MethodTLS:
		if !a.tls {
			break
		}
		return tlsIdentity(state)
	case "", "none":
		if a.tls && state != nil && len(state.PeerCertificates) > 0 {
			return tlsIdentity(state) // a client certificate speaks for itself
		}
		return Identity{}, fmt.Errorf("%w: this node requires authentication (%s)", ErrNoCredentials, strings.Join(a.Methods(), " or "))
	}
	return Identity{}, fmt.Errorf("%w: %q (this node accepts %s)", ErrUnknownMethod, method, strings.Join(a.Methods(), ", "))
}

// AuthenticateHTTP checks an admin request: "Authorization: Bearer <token>"
// (token), else the verified client certificate (tls).
func (a *Authenticator) AuthenticateHTTP(r *http.Request) (Identity, error) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, token, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return Identity{}, fmt.Errorf("%w: the Authorization header must be \"Bearer <token>\"", ErrInvalidCredentials)
		}
		return a.Authenticate(MethodToken, []byte(token), r.TLS)
	}
	if a.tls && r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		return tlsIdentity(r.TLS)
	}
	return Identity{}, fmt.Errorf("%w: send \"Authorization: Bearer <token>\"%s", ErrNoCredentials,
		map[bool]string{true: " or a client certificate", false: ""}[a.tls])
}

// tlsIdentity is the role of a verified client certificate: its subject
// common name.
func tlsIdentity(state *tls.ConnectionState) (Identity, error) {
	if state == nil {
		return Identity{}, fmt.Errorf("%w: TLS authentication needs a TLS connection", ErrNoCredentials)
	}
	if len(state.VerifiedChains) == 0 || len(state.PeerCertificates) == 0 {
		return Identity{}, fmt.Errorf("%w: no verified client certificate", ErrNoCredentials)
	}
	cert := state.PeerCertificates[0]
	if cert.Subject.CommonName == "" {
		return Identity{}, fmt.Errorf("%w: the client certificate has no common name", ErrInvalidCredentials)
	}
	// The handshake checked the validity; a long-lived connection asked
	// again (AUTH_RESPONSE) may hold a certificate expired since.
	if !time.Now().Before(cert.NotAfter) {
		return Identity{}, fmt.Errorf("%w: the client certificate expired at %s", ErrExpired, cert.NotAfter.UTC().Format(time.RFC3339))
	}
	return Identity{Role: cert.Subject.CommonName, Method: MethodTLS, Expires: cert.NotAfter}, nil
}

// IsProxyRole reports whether role is one of proxyRoles (Pulsar's
// proxyRoles): a role that may connect on behalf of another client, named
// in CONNECT's original_principal.
func IsProxyRole(role string, proxyRoles []string) bool {
	return role != "" && slices.Contains(proxyRoles, role)
}

// IsSuperUser reports whether role is one of superUsers.
func IsSuperUser(role string, superUsers []string) bool {
	return role != "" && slices.Contains(superUsers, role)
}
