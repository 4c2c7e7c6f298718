package auth

import (
	"crypto/ecdsa"
	"crypto/rsa"
	"io"
	"net/http"
	"testing"

	"github.com/lakegate/lakegate/internal/testissuer"
)

// FuzzParseJWKS: whatever an issuer serves, parseJWKS returns an error or
// keys that are RSA of at least 2048 bits or EC points on their curve, each
// with the algorithms it may verify — never a panic. Seeded with the test
// issuer's real key sets (RSA and EC) and broken ones.
func FuzzParseJWKS(f *testing.F) {
	for _, alg := range []string{"RS256", "ES256"} {
		is, err := testissuer.Start(testissuer.Options{Alg: alg})
		if err != nil {
			f.Fatal(err)
		}
		is.Rotate()
		resp, err := http.Get(is.URL + "/jwks")
		if err != nil {
			f.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		is.Close()
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	for _, s := range []string{`{"keys":[]}`, `{"keys":null}`, `{}`, `[]`, `{"keys":[{"kty":"RSA","kid":"a","n":"","e":""}]}`,
		`{"keys":[{"kty":"EC","kid":"a","crv":"P-521","x":"AA","y":"AA","alg":"RS256"}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		keys, err := parseJWKS(b)
		if err != nil {
			return
		}
		if len(keys) > maxJWKSKeys {
			t.Fatalf("%d keys", len(keys))
		}
		for kid, k := range keys {
			if kid == "" || len(k.algs) == 0 {
				t.Fatalf("key %q: algorithms %v", kid, k.algs)
			}
			switch p := k.pub.(type) {
			case *rsa.PublicKey:
				if p.N.BitLen() < minRSABits || p.E < 3 {
					t.Fatalf("key %q: RSA %d bits, e %d", kid, p.N.BitLen(), p.E)
				}
			case *ecdsa.PublicKey:
				if _, err := p.ECDH(); err != nil {
					t.Fatalf("key %q: not a valid EC point: %v", kid, err)
				}
			default:
				t.Fatalf("key %q: type %T", kid, p)
			}
		}
	})
}
