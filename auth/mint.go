package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// NewSecretKey returns a random HS256 key: 32 bytes, as `pulsar tokens
// create-secret-key` makes (written raw, or base64 with --base64).
func NewSecretKey() ([]byte, error) {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	return k, nil
}

// NewKeyPair returns a key pair for alg (RS256, RS384, RS512, ES256, ES384,
// ES512) as `pulsar tokens create-key-pair` writes it: the private key in
// PKCS#8 DER, the public key in X.509 SubjectPublicKeyInfo DER.
func NewKeyPair(alg string) (private, public []byte, err error) {
	var k crypto.Signer
	switch alg {
	case "RS256", "RS384", "RS512":
		k, err = rsa.GenerateKey(rand.Reader, 2048)
	case "ES256":
		k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "ES384":
		k, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case "ES512":
		k, err = ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	default:
		return nil, nil, fmt.Errorf("auth: algorithm %q (want RS256, RS384, RS512, ES256, ES384 or ES512)", alg)
	}
	if err != nil {
		return nil, nil, err
	}
	if private, err = x509.MarshalPKCS8PrivateKey(k); err != nil {
		return nil, nil, err
	}
	if public, err = x509.MarshalPKIXPublicKey(k.Public()); err != nil {
		return nil, nil, err
	}
	return private, public, nil
}

// TokenSpec is what a new token says.
type TokenSpec struct {
	Subject string
	// Claim holds the subject (default "sub").
	Claim string
	// Expiry, when not 0, sets "exp" that far from now (a negative one
	// makes an expired token: tests).
	Expiry time.Duration
	// Audience, when set, is the "aud" claim.
	Audience string
	// Headers are extra JWT headers (e.g. "kid").
	Headers map[string]string
}

// NewToken signs a token with a secret key (HS256) or a private key (alg
// from the key: RS256 for RSA, ES256/384/512 for the ECDSA curve; algOverride
// may pick RS384/RS512/PS256…).
func NewToken(spec TokenSpec, secret []byte, private crypto.Signer, algOverride string) (string, error) {
	if spec.Subject == "" {
		return "", fmt.Errorf("auth: a token needs a subject")
	}
	claim := spec.Claim
	if claim == "" {
		claim = "sub"
	}
	claims := jwt.MapClaims{claim: spec.Subject}
	if spec.Expiry != 0 {
		claims["exp"] = time.Now().Add(spec.Expiry).Unix()
	}
	if spec.Audience != "" {
		claims["aud"] = spec.Audience
	}
	var (
		m   jwt.SigningMethod
		key any
	)
	switch k := private.(type) {
	case nil:
		if len(secret) == 0 {
			return "", fmt.Errorf("auth: a token needs a secret key or a private key")
		}
		if err := CheckSecretKey(secret); err != nil {
			return "", err
		}
		m, key = jwt.SigningMethodHS256, secret
	case *rsa.PrivateKey:
		m, key = jwt.SigningMethodRS256, k
	case *ecdsa.PrivateKey:
		key = k
		switch k.Curve {
		case elliptic.P384():
			m = jwt.SigningMethodES384
		case elliptic.P521():
			m = jwt.SigningMethodES512
		default:
			m = jwt.SigningMethodES256
		}
	default:
		return "", fmt.Errorf("auth: private key type %T", k)
	}
	if algOverride != "" {
		if m = jwt.GetSigningMethod(algOverride); m == nil {
			return "", fmt.Errorf("auth: unknown algorithm %q", algOverride)
		}
	}
	t := jwt.NewWithClaims(m, claims)
	for k, v := range spec.Headers {
		t.Header[k] = v
	}
	return t.SignedString(key)
}
