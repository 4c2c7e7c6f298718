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
	// SecretKey verifies HS256 tokens (and HS384, HS512 with a key as long
	// as their hash): the raw key bytes (ReadKeyData reads Pulsar's
	// tokenSecretKey forms), at least MinSecretKeyBytes.
	SecretKey []byte
	// PublicKey verifies RS*, PS* (RSA) or ES* (ECDSA) tokens.
	PublicKey crypto.PublicKey
	// RoleClaim is the claim holding the role. Default "sub" (Pulsar's
	// tokenAuthClaim).
	RoleClaim string
	// Audience, when set, must be in the token's AudienceClaim: that claim
	// is the audience or a list holding it (Pulsar's tokenAudience).
	Audience string
	// AudienceClaim is the claim Audience is looked for in. Default "aud"
	// (Pulsar's tokenAudienceClaim, which has no default there and leaves
	// the audience unchecked without one). Set without Audience it is an
	// error, as in Pulsar.
	AudienceClaim string
	// Now is the clock "exp" and "nbf" are checked against. Default
	// time.Now.
	Now func() time.Time
}

// MinSecretKeyBytes is the shortest HS key accepted: 256 bits, the HS256
// hash size (RFC 7518 §3.2; `lakegate token create-secret-key` and `pulsar
// tokens create-secret-key` make keys this long). HS384 and HS512 need
// keys of 384 and 512 bits.
const MinSecretKeyBytes = 32

// hsMethods are the HS algorithms a secret key of n bytes may verify.
func hsMethods(n int) []string {
	var m []string
	for _, a := range []struct {
		alg   string
		bytes int
	}{{"HS256", 32}, {"HS384", 48}, {"HS512", 64}} {
		if n >= a.bytes {
			m = append(m, a.alg)
		}
	}
	return m
}

// CheckSecretKey refuses a secret key shorter than MinSecretKeyBytes.
func CheckSecretKey(k []byte) error {
	if len(k) < MinSecretKeyBytes {
		return fmt.Errorf("%w: the secret key is %d bits; HS256 needs at least 256 bits (make one with `lakegate token create-secret-key`)", ErrKey, 8*len(k))
	}
	return nil
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
	switch {
	case cfg.AudienceClaim != "" && cfg.AudienceClaim != "aud" && cfg.Audience == "":
		return nil, fmt.Errorf("auth: the token audience claim %q is set but no audience to find in it (tokenAudience)", cfg.AudienceClaim)
	case cfg.AudienceClaim == "":
		cfg.AudienceClaim = "aud"
	}
	p := &tokenProvider{cfg: cfg}
	switch k := cfg.PublicKey.(type) {
	case nil:
		if len(cfg.SecretKey) == 0 {
			return nil, fmt.Errorf("%w: the token provider needs a secret key or a public key", ErrKey)
		}
		if err := CheckSecretKey(cfg.SecretKey); err != nil {
			return nil, err
		}
		p.key, p.methods = cfg.SecretKey, hsMethods(len(cfg.SecretKey))
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
	if p.cfg.Audience != "" && p.cfg.AudienceClaim == "aud" {
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
	if p.cfg.Audience != "" && p.cfg.AudienceClaim != "aud" && !claimHolds(claims[p.cfg.AudienceClaim], p.cfg.Audience) {
		return Identity{}, fmt.Errorf("%w: the token's %q claim does not hold the audience %q", ErrInvalidCredentials, p.cfg.AudienceClaim, p.cfg.Audience)
	}
	role := claimRole(claims[p.cfg.RoleClaim])
	if role == "" {
		return Identity{}, fmt.Errorf("%w: the token has no %q claim", ErrInvalidCredentials, p.cfg.RoleClaim)
	}
	id := Identity{Role: role, Method: MethodToken}
	if exp, err := claims.GetExpirationTime(); err == nil && exp != nil {
		id.Expires = exp.Time
	}
	return id, nil
}

// claimHolds reports whether a claim's value is want or a list holding it
// (Pulsar's audience check: a string or a list of strings).
func claimHolds(v any, want string) bool {
	switch v := v.(type) {
	case string:
		return v == want
	case []any:
		for _, e := range v {
			if s, ok := e.(string); ok && s == want {
				return true
			}
		}
	}
	return false
}

// claimRole is the role a claim names: a string, or the first string of a
// list (as Pulsar's token and OpenID providers read a list-valued role
// claim). "" when it names none.
func claimRole(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []any:
		if len(v) > 0 {
			s, _ := v[0].(string)
			return s
		}
	}
	return ""
}
