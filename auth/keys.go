package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
)

// ErrKey is returned for a key that cannot be read or parsed. Its message
// names the source (a path, or "inline data"), never the key.
var ErrKey = errors.New("auth: bad key")

// ReadKeyData reads a key given as Pulsar's configuration gives it:
// "file:///path", "data:;base64,<base64>", or a plain path.
func ReadKeyData(spec string) ([]byte, error) {
	switch {
	case spec == "":
		return nil, fmt.Errorf("%w: no key given", ErrKey)
	case strings.HasPrefix(spec, "data:"):
		_, b64, ok := strings.Cut(spec, ",")
		if !ok {
			return nil, fmt.Errorf("%w: inline data without a comma", ErrKey)
		}
		b, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return nil, fmt.Errorf("%w: inline data is not base64", ErrKey)
		}
		return b, nil
	case strings.HasPrefix(spec, "file:"):
		u, err := url.Parse(spec)
		if err != nil {
			return nil, fmt.Errorf("%w: %q is not a file URL", ErrKey, spec)
		}
		return readKeyFile(u.Path)
	}
	return readKeyFile(spec)
}

func readKeyFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: reading %s: %v", ErrKey, path, errors.Unwrap(err))
	}
	return b, nil
}

// ParsePublicKey parses a public key in PEM ("PUBLIC KEY", "RSA PUBLIC
// KEY", or a "CERTIFICATE") or in DER (X.509 SubjectPublicKeyInfo, as
// `pulsar tokens create-key-pair` writes it). RSA and ECDSA keys only.
func ParsePublicKey(b []byte) (crypto.PublicKey, error) {
	der := b
	if blk, _ := pem.Decode(b); blk != nil {
		der = blk.Bytes
		switch blk.Type {
		case "RSA PUBLIC KEY":
			k, err := x509.ParsePKCS1PublicKey(der)
			if err != nil {
				return nil, fmt.Errorf("%w: RSA public key: %v", ErrKey, err)
			}
			return k, nil
		case "CERTIFICATE":
			c, err := x509.ParseCertificate(der)
			if err != nil {
				return nil, fmt.Errorf("%w: certificate: %v", ErrKey, err)
			}
			return checkPublic(c.PublicKey)
		}
	}
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("%w: not a PEM or DER public key", ErrKey)
	}
	return checkPublic(k)
}

func checkPublic(k any) (crypto.PublicKey, error) {
	switch k := k.(type) {
	case *rsa.PublicKey, *ecdsa.PublicKey:
		return k, nil
	}
	return nil, fmt.Errorf("%w: public key type %T (want RSA or ECDSA)", ErrKey, k)
}

// ParsePrivateKey parses a private key in PEM or DER (PKCS#8, as `pulsar
// tokens create-key-pair` writes it; PKCS#1 RSA and SEC 1 EC are accepted).
func ParsePrivateKey(b []byte) (crypto.Signer, error) {
	der := b
	if blk, _ := pem.Decode(b); blk != nil {
		der = blk.Bytes
	}
	if k, err := x509.ParsePKCS8PrivateKey(der); err == nil {
		if s, ok := k.(crypto.Signer); ok {
			switch s.(type) {
			case *rsa.PrivateKey, *ecdsa.PrivateKey:
				return s, nil
			}
		}
		return nil, fmt.Errorf("%w: private key type %T (want RSA or ECDSA)", ErrKey, k)
	}
	if k, err := x509.ParsePKCS1PrivateKey(der); err == nil {
		return k, nil
	}
	if k, err := x509.ParseECPrivateKey(der); err == nil {
		return k, nil
	}
	return nil, fmt.Errorf("%w: not a PEM or DER private key", ErrKey)
}
