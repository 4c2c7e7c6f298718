package auth

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func mustToken(t *testing.T, spec TokenSpec, secret []byte, privDER []byte, alg string) string {
	t.Helper()
	if privDER != nil {
		k, err := ParsePrivateKey(privDER)
		if err != nil {
			t.Fatal(err)
		}
		tok, err := NewToken(spec, nil, k, alg)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	tok, err := NewToken(spec, secret, nil, alg)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func wantErrIs(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: %v, want %v", what, err, want)
	}
}

// Tokens verify with the key they were made with, give their role and
// expiry, and every kind of bad token is refused with the right kind.
func TestTokenProvider(t *testing.T) {
	secret, _ := NewSecretKey()
	other, _ := NewSecretKey()
	a, err := New(Config{Providers: []string{MethodToken}, Token: TokenConfig{SecretKey: secret}})
	if err != nil {
		t.Fatal(err)
	}
	ok := mustToken(t, TokenSpec{Subject: "alice", Expiry: time.Hour}, secret, nil, "")
	id, err := a.Authenticate(MethodToken, []byte(ok), nil)
	if err != nil || id.Role != "alice" || id.Method != MethodToken || time.Until(id.Expires) < 59*time.Minute {
		t.Fatalf("valid token: %+v %v", id, err)
	}
	never := mustToken(t, TokenSpec{Subject: "bob"}, secret, nil, "")
	if id, err := a.Authenticate(MethodToken, []byte(never), nil); err != nil || !id.Expires.IsZero() {
		t.Fatalf("token without exp: %+v %v", id, err)
	}

	expired := mustToken(t, TokenSpec{Subject: "alice", Expiry: -time.Minute}, secret, nil, "")
	_, err = a.Authenticate(MethodToken, []byte(expired), nil)
	wantErrIs(t, "expired token", err, ErrExpired)

	wrongKey := mustToken(t, TokenSpec{Subject: "alice"}, other, nil, "")
	_, err = a.Authenticate(MethodToken, []byte(wrongKey), nil)
	wantErrIs(t, "token signed with another key", err, ErrInvalidCredentials)

	parts := strings.Split(ok, ".")
	claims, _ := base64.RawURLEncoding.DecodeString(parts[1])
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(claims), "alice", "admin", 1))) + "." + parts[2]
	_, err = a.Authenticate(MethodToken, []byte(tampered), nil)
	wantErrIs(t, "tampered claims", err, ErrInvalidCredentials)

	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." +
		base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"admin"}`)) + "."
	_, err = a.Authenticate(MethodToken, []byte(none), nil)
	wantErrIs(t, "alg none", err, ErrInvalidCredentials)

	unsigned, _ := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"sub": "admin"}).SignedString(jwt.UnsafeAllowNoneSignatureType)
	_, err = a.Authenticate(MethodToken, []byte(unsigned), nil)
	wantErrIs(t, "alg none (library-made)", err, ErrInvalidCredentials)

	noSub := mustToken(t, TokenSpec{Subject: "x", Claim: "role"}, secret, nil, "")
	_, err = a.Authenticate(MethodToken, []byte(noSub), nil)
	wantErrIs(t, "token without the role claim", err, ErrInvalidCredentials)

	for _, bad := range []string{"", "garbage", "a.b.c", strings.Repeat("x", 10000)} {
		_, err = a.Authenticate(MethodToken, []byte(bad), nil)
		if err == nil {
			t.Fatalf("token %.20q accepted", bad)
		}
	}
	_, err = a.Authenticate("basic", []byte("u:p"), nil)
	wantErrIs(t, "unknown method", err, ErrUnknownMethod)
	_, err = a.Authenticate("", nil, nil)
	wantErrIs(t, "no method", err, ErrNoCredentials)

	// Secrets never appear in errors.
	_, err = a.Authenticate(MethodToken, []byte(wrongKey), nil)
	if strings.Contains(err.Error(), wrongKey) || strings.Contains(err.Error(), string(secret)) {
		t.Fatal("an error message carries the token or the key")
	}
}

// Public-key tokens: RS256 and ES256 pairs as `lakegate token
// create-key-pair` writes them (DER), PEM accepted too; a token signed with
// HS256 using the public key's bytes as the secret (the key-confusion
// attack) is refused.
func TestTokenPublicKeys(t *testing.T) {
	for _, alg := range []string{"RS256", "ES256", "ES384"} {
		t.Run(alg, func(t *testing.T) {
			privDER, pubDER, err := NewKeyPair(alg)
			if err != nil {
				t.Fatal(err)
			}
			pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
			for name, b := range map[string][]byte{"DER": pubDER, "PEM": pubPEM} {
				pub, err := ParsePublicKey(b)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				a, err := New(Config{Providers: []string{MethodToken}, Token: TokenConfig{PublicKey: pub}})
				if err != nil {
					t.Fatal(err)
				}
				tok := mustToken(t, TokenSpec{Subject: "carol"}, nil, privDER, "")
				if id, err := a.Authenticate(MethodToken, []byte(tok), nil); err != nil || id.Role != "carol" {
					t.Fatalf("%s %s token: %+v %v", alg, name, id, err)
				}
				confused := mustToken(t, TokenSpec{Subject: "admin"}, pubDER, nil, "")
				_, err = a.Authenticate(MethodToken, []byte(confused), nil)
				wantErrIs(t, "HS256 signed with the public key", err, ErrInvalidCredentials)
			}
		})
	}
}

func TestReadKeyData(t *testing.T) {
	dir := t.TempDir()
	key := []byte{0, 1, 2, 255}
	path := filepath.Join(dir, "k")
	os.WriteFile(path, key, 0o600)
	for _, spec := range []string{"file://" + path, path, "data:;base64," + base64.StdEncoding.EncodeToString(key)} {
		b, err := ReadKeyData(spec)
		if err != nil || string(b) != string(key) {
			t.Fatalf("%s: %v %v", spec, b, err)
		}
	}
	for _, bad := range []string{"", "file:///nope/nope", "data:;base64,!!!", "data:nocomma"} {
		if _, err := ReadKeyData(bad); !errors.Is(err, ErrKey) {
			t.Fatalf("%q: %v, want ErrKey", bad, err)
		}
	}
}

// The role of a client certificate is its common name; HTTP requests
// authenticate with a bearer token or the certificate.
func TestTLSAndHTTPIdentity(t *testing.T) {
	secret, _ := NewSecretKey()
	a, err := New(Config{Providers: []string{MethodToken, MethodTLS}, Token: TokenConfig{SecretKey: secret}})
	if err != nil {
		t.Fatal(err)
	}
	cert := &x509.Certificate{Subject: pkix.Name{CommonName: "svc-a"}, NotAfter: time.Now().Add(time.Hour)}
	state := &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}, VerifiedChains: [][]*x509.Certificate{{cert}}}
	if id, err := a.Authenticate(MethodTLS, nil, state); err != nil || id.Role != "svc-a" {
		t.Fatalf("tls: %+v %v", id, err)
	}
	if id, err := a.Authenticate("", nil, state); err != nil || id.Role != "svc-a" {
		t.Fatalf("no method, a client certificate: %+v %v", id, err)
	}
	_, err = a.Authenticate(MethodTLS, nil, nil)
	wantErrIs(t, "tls without TLS", err, ErrNoCredentials)
	unverified := &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}
	_, err = a.Authenticate(MethodTLS, nil, unverified)
	wantErrIs(t, "unverified certificate", err, ErrNoCredentials)

	r := httptest.NewRequest("GET", "/admin/v2/tenants", nil)
	_, err = a.AuthenticateHTTP(r)
	wantErrIs(t, "no credentials over HTTP", err, ErrNoCredentials)
	r.Header.Set("Authorization", "Bearer "+mustToken(t, TokenSpec{Subject: "dave"}, secret, nil, ""))
	if id, err := a.AuthenticateHTTP(r); err != nil || id.Role != "dave" {
		t.Fatalf("bearer: %+v %v", id, err)
	}
	r.Header.Set("Authorization", "Basic abc")
	_, err = a.AuthenticateHTTP(r)
	wantErrIs(t, "basic auth", err, ErrInvalidCredentials)
	r.Header.Del("Authorization")
	r.TLS = state
	if id, err := a.AuthenticateHTTP(r); err != nil || id.Role != "svc-a" {
		t.Fatalf("client certificate over HTTPS: %+v %v", id, err)
	}
}
