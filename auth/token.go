package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TokenConfig configures the token provider. Exactly one of SecretKey and
// PublicKey is set.
type TokenConfig struct {
	// SecretKey verifies HS256 (and HS384, HS512) tokens: the raw key bytes
	// (ReadKeyData reads Pulsar's tokenSecretKey forms).
	SecretKey []byte
	// PublicKey verifies RS*, PS* (RSA) or ES* (ECDSA) tokens.
	PublicKey crypto.PublicKey
	// RoleClaim is the claim holding the role. Default "sub" (Pulsar's
	// tokenAuthClaim).
	RoleClaim string
	// Audience, when set, must be in the token's "aud" (Pulsar's
	// tokenAudience with tokenAudienceClaim "aud").
	Audience string
	// Now is the clock "exp" and "nbf" are checked against. Default
	// time.Now.
	Now func() time.Time
}

// tokenProvider verifies Pulsar tokens.
type tokenProvider struct {
	cfg     TokenConfig
	methods []string // the algorithms the key can verify
	key     any
}

func newTokenProvider(cfg TokenConfig) (*tokenProvider, error) {
	if cfg.RoleClaim == "" {
		cfg.RoleClaim = "sub"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	p := &tokenProvider{cfg: cfg}
	switch k := cfg.PublicKey.(type) {
	case nil:
		if len(cfg.SecretKey) == 0 {
			return nil, fmt.Errorf("%w: the token provider needs a secret key or a public key", ErrKey)
		}
		p.key, p.methods = cfg.SecretKey, []string{"HS256", "HS384", "HS512"}
	case *rsa.PublicKey:
		p.key, p.methods = k, []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}
	case *ecdsa.PublicKey:
		p.key, p.methods = k, []string{"ES256", "ES384", "ES512"}
	default:
		return nil, fmt.Errorf("%w: public key type %T", ErrKey, k)
	}
	if cfg.PublicKey != nil && len(cfg.SecretKey) > 0 {
		return nil, fmt.Errorf("%w: give the token provider a secret key or a public key, not both", ErrKey)
	}
	return p, nil
}

// authenticate verifies a token and returns its role and expiry (zero:
// none).
func (p *tokenProvider) authenticate(token string) (Identity, error) {
	token = strings.TrimSpace(token)
	if token == "" {
		return Identity{}, fmt.Errorf("%w: empty token", ErrNoCredentials)
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(p.methods), // refuses "none" and any other algorithm
		jwt.WithTimeFunc(p.cfg.Now),
	}
	if p.cfg.Audience != "" {
		opts = append(opts, jwt.WithAudience(p.cfg.Audience))
	}
	claims := jwt.MapClaims{}
	_, err := jwt.ParseWithClaims(token, claims, func(*jwt.Token) (any, error) { return p.key, nil }, opts...)
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return Identity{}, fmt.Errorf("%w: the token expired", ErrExpired)
	case errors.Is(err, jwt.ErrTokenMalformed):
		return Identity{}, fmt.Errorf("%w: malformed token", ErrInvalidCredentials)
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return Identity{}, fmt.Errorf("%w: bad token signature (signed with another key?)", ErrInvalidCredentials)
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		return Identity{}, fmt.Errorf("%w: token algorithm not accepted (this node verifies %s)", ErrInvalidCredentials, strings.Join(p.methods, ", "))
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return Identity{}, fmt.Errorf("%w: token audience is not %q", ErrInvalidCredentials, p.cfg.Audience)
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return Identity{}, fmt.Errorf("%w: token not valid yet", ErrInvalidCredentials)
	case err != nil:
		return Identity{}, fmt.Errorf("%w: invalid token", ErrInvalidCredentials)
	}
	role, _ := claims[p.cfg.RoleClaim].(string)
	if role == "" {
		return Identity{}, fmt.Errorf("%w: the token has no %q claim", ErrInvalidCredentials, p.cfg.RoleClaim)
	}
	id := Identity{Role: role, Method: MethodToken}
	if exp, err := claims.GetExpirationTime(); err == nil && exp != nil {
		id.Expires = exp.Time
	}
	return id, nil
}
