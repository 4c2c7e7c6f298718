package auth

import (
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// HS keys shorter than 256 bits are refused when the provider is built
// (RFC 7518 §3.2; Pulsar's jjwt refuses them too), and a key verifies only
// the HS algorithms its length allows.
func TestSecretKeyLength(t *testing.T) {
	for _, n := range []int{1, 16, 31} {
		_, err := New(Config{Providers: []string{MethodToken}, Token: TokenConfig{SecretKey: make([]byte, n)}})
		wantErrIs(t, "short secret key", err, ErrKey)
		if !strings.Contains(err.Error(), "256 bits") {
			t.Fatalf("%d-byte key: %v, want the error to name 256 bits", n, err)
		}
	}
	key32, _ := NewSecretKey()
	if len(key32) != 32 {
		t.Fatalf("NewSecretKey: %d bytes, want 32", len(key32))
	}
	a, err := New(Config{Providers: []string{MethodToken}, Token: TokenConfig{SecretKey: key32}})
	if err != nil {
		t.Fatalf("a 256-bit key: %v", err)
	}
	hs512, _ := jwt.NewWithClaims(jwt.SigningMethodHS512, jwt.MapClaims{"sub": "alice"}).SignedString(key32)
	_, err = a.Authenticate(MethodToken, []byte(hs512), nil)
	wantErrIs(t, "HS512 with a 256-bit key", err, ErrInvalidCredentials)
	if _, err := NewToken(TokenSpec{Subject: "alice"}, make([]byte, 16), nil, ""); err == nil {
		t.Fatal("NewToken signed with a 128-bit key")
	}
	key64 := append(append([]byte(nil), key32...), key32...)
	b, _ := New(Config{Providers: []string{MethodToken}, Token: TokenConfig{SecretKey: key64}})
	hs512, _ = jwt.NewWithClaims(jwt.SigningMethodHS512, jwt.MapClaims{"sub": "alice"}).SignedString(key64)
	if id, err := b.Authenticate(MethodToken, []byte(hs512), nil); err != nil || id.Role != "alice" {
		t.Fatalf("HS512 with a 512-bit key: %+v %v", id, err)
	}
}
