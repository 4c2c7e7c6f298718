package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
)

// JSON Web Key Sets (RFC 7517) as OpenID providers publish them at their
// jwks_uri: only the public signature keys lakegate can verify are kept.

// Bounds on what an issuer's JWKS may hold.
const (
	// maxJWKSKeys is the most keys one JWKS may hold (issuers publish a
	// handful: the current key and those being rotated in or out).
	maxJWKSKeys = 100
	// minRSABits is the shortest RSA key accepted (RFC 7518 §3.3 asks for
	// 2048 bits).
	minRSABits = 2048
)

// jwk is one key of a JWKS, the fields lakegate reads.
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
	N   string `json:"n"`
	E   string `json:"e"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

// verifyKey is a public key from a JWKS and the algorithms it may verify.
type verifyKey struct {
	pub  crypto.PublicKey // *rsa.PublicKey or *ecdsa.PublicKey
	algs []string
}

// allows reports whether the key may verify a token signed with alg.
func (k verifyKey) allows(alg string) bool {
	for _, a := range k.algs {
		if a == alg {
			return true
		}
	}
	return false
}

// openIDAlgorithms are the algorithms the openid provider accepts: RSA and
// ECDSA signatures. HS* (a shared secret) and "none" never are.
var openIDAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512"}

// parseJWKS parses a JWKS document into its usable keys by kid. Keys that
// are not for signatures ("use" other than "sig"), of another type than
// RSA or EC (symmetric "oct" keys included), or without a kid are skipped;
// a malformed RSA or EC key, a duplicate kid, or more than maxJWKSKeys keys
// make the document an error.
func parseJWKS(b []byte) (map[string]verifyKey, error) {
	var doc struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("not a JWKS: %v", err)
	}
	if len(doc.Keys) > maxJWKSKeys {
		return nil, fmt.Errorf("the JWKS holds %d keys (at most %d)", len(doc.Keys), maxJWKSKeys)
	}
	keys := make(map[string]verifyKey, len(doc.Keys))
	for _, k := range doc.Keys {
		if k.Kid == "" || (k.Use != "" && k.Use != "sig") || (k.Kty != "RSA" && k.Kty != "EC") {
			continue
		}
		if _, dup := keys[k.Kid]; dup {
			return nil, fmt.Errorf("the JWKS holds kid %q twice", k.Kid)
		}
		vk, err := k.parse()
		if err != nil {
			return nil, fmt.Errorf("key %q: %v", k.Kid, err)
		}
		if k.Alg != "" {
			if !vk.allows(k.Alg) {
				return nil, fmt.Errorf("key %q: alg %q does not fit a %s key", k.Kid, k.Alg, k.Kty)
			}
			vk.algs = []string{k.Alg}
		}
		keys[k.Kid] = vk
	}
	return keys, nil
}

// parse turns an RSA or EC JWK into a public key.
func (k jwk) parse() (verifyKey, error) {
	switch k.Kty {
	case "RSA":
		n, err := b64Int(k.N)
		if err != nil {
			return verifyKey{}, fmt.Errorf("n: %v", err)
		}
		e, err := b64Int(k.E)
		if err != nil {
			return verifyKey{}, fmt.Errorf("e: %v", err)
		}
		if n.BitLen() < minRSABits {
			return verifyKey{}, fmt.Errorf("RSA key of %d bits (at least %d)", n.BitLen(), minRSABits)
		}
		if !e.IsInt64() || e.Int64() < 3 || e.Int64() > 1<<31-1 || e.Bit(0) == 0 {
			return verifyKey{}, fmt.Errorf("RSA exponent out of range")
		}
		return verifyKey{pub: &rsa.PublicKey{N: n, E: int(e.Int64())},
			algs: []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}}, nil
	case "EC":
		var (
			curve elliptic.Curve
			alg   string
		)
		switch k.Crv {
		case "P-256":
			curve, alg = elliptic.P256(), "ES256"
		case "P-384":
			curve, alg = elliptic.P384(), "ES384"
		case "P-521":
			curve, alg = elliptic.P521(), "ES512"
		default:
			return verifyKey{}, fmt.Errorf("curve %q (want P-256, P-384 or P-521)", k.Crv)
		}
		size := (curve.Params().BitSize + 7) / 8
		x, errX := b64Bytes(k.X)
		y, errY := b64Bytes(k.Y)
		if errX != nil || errY != nil || len(x) != size || len(y) != size {
			return verifyKey{}, fmt.Errorf("x and y must be %d bytes of base64url", size)
		}
		point := append(append([]byte{4}, x...), y...)
		pub, err := ecdsa.ParseUncompressedPublicKey(curve, point)
		if err != nil {
			return verifyKey{}, fmt.Errorf("not a point of %s", k.Crv)
		}
		return verifyKey{pub: pub, algs: []string{alg}}, nil
	}
	return verifyKey{}, fmt.Errorf("key type %q", k.Kty)
}

// b64Bytes decodes base64url without padding (RFC 7515 §2), tolerating
// padding some issuers add.
func b64Bytes(s string) ([]byte, error) {
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}

// b64Int decodes a base64url big-endian unsigned integer.
func b64Int(s string) (*big.Int, error) {
	b, err := b64Bytes(s)
	if err != nil || len(b) == 0 {
		return nil, fmt.Errorf("not base64url")
	}
	return new(big.Int).SetBytes(b), nil
}
