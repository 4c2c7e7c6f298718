package auth

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakegate/lakegate/internal/testcerts"
	"github.com/lakegate/lakegate/internal/testissuer"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// newClock starts a few seconds ahead: tokens minted from now on were
// issued in its past.
func newClock() *fakeClock { return &fakeClock{now: time.Now().Add(5 * time.Second)} }

func startIssuer(t *testing.T, o testissuer.Options) *testissuer.Issuer {
	t.Helper()
	is, err := testissuer.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { is.Close() })
	return is
}

// openIDAuth is an Authenticator with the openid provider trusting is.
func openIDAuth(t *testing.T, is *testissuer.Issuer, clock *fakeClock, edit func(*OpenIDConfig)) *Authenticator {
	t.Helper()
	cfg := OpenIDConfig{AllowedTokenIssuers: []string{is.URL}, AllowedAudiences: []string{"lakegate"},
		AllowInsecureIssuers: true, Now: clock.Now}
	if edit != nil {
		edit(&cfg)
	}
	a, err := New(Config{Providers: []string{ProviderOpenID}, OpenID: cfg})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func mint(t *testing.T, is *testissuer.Issuer, c testissuer.Claims, o testissuer.MintOptions) []byte {
	t.Helper()
	tok, err := is.Mint(c, o)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(tok)
}

// A token of an allowed issuer verifies with the key its kid selects from
// the JWKS that discovery names, gives the role claim (a string or the
// first of a list) and its expiry; every other kind of token is refused
// with the right kind, and the ones refused by their header alone never
// make the node ask the issuer.
func TestOpenIDProvider(t *testing.T) {
	for _, alg := range []string{"RS256", "ES256"} {
		t.Run(alg, func(t *testing.T) {
			is := startIssuer(t, testissuer.Options{Alg: alg})
			clock := newClock()
			a := openIDAuth(t, is, clock, nil)
			good := testissuer.Claims{Subject: "svc-orders", Audience: "lakegate", Expiry: time.Hour}
			id, err := a.Authenticate(MethodToken, mint(t, is, good, testissuer.MintOptions{}), nil)
			if err != nil || id.Role != "svc-orders" || id.Method != MethodToken || time.Until(id.Expires) < 59*time.Minute {
				t.Fatalf("good token: %+v %v", id, err)
			}
			listAud := good
			listAud.Audience = []string{"other", "lakegate"}
			if _, err := a.Authenticate(MethodToken, mint(t, is, listAud, testissuer.MintOptions{}), nil); err != nil {
				t.Fatalf("aud a list holding the audience: %v", err)
			}
			fetches := is.JWKSFetches()

			with := func(edit func(*testissuer.Claims)) testissuer.Claims {
				c := good
				edit(&c)
				return c
			}
			for name, tc := range map[string]struct {
				claims testissuer.Claims
				opts   testissuer.MintOptions
				want   error
			}{
				"wrong issuer":                        {with(func(c *testissuer.Claims) { c.Issuer = "https://evil.example" }), testissuer.MintOptions{}, ErrInvalidCredentials},
				"issuer with slash":                   {with(func(c *testissuer.Claims) { c.Issuer = is.URL + "/" }), testissuer.MintOptions{}, ErrInvalidCredentials},
				"no issuer":                           {with(func(c *testissuer.Claims) { c.Issuer = " " }), testissuer.MintOptions{}, ErrInvalidCredentials},
				"wrong audience":                      {with(func(c *testissuer.Claims) { c.Audience = "someone-else" }), testissuer.MintOptions{}, ErrInvalidCredentials},
				"no audience":                         {with(func(c *testissuer.Claims) { c.Audience = nil }), testissuer.MintOptions{}, ErrInvalidCredentials},
				"expired":                             {with(func(c *testissuer.Claims) { c.Expiry = -time.Minute }), testissuer.MintOptions{}, ErrExpired},
				"no exp":                              {with(func(c *testissuer.Claims) { c.Expiry = 0 }), testissuer.MintOptions{}, ErrInvalidCredentials},
				"not valid yet":                       {with(func(c *testissuer.Claims) { c.Extra = map[string]any{"nbf": time.Now().Add(time.Hour).Unix()} }), testissuer.MintOptions{}, ErrInvalidCredentials},
				"issued in future":                    {with(func(c *testissuer.Claims) { c.Extra = map[string]any{"iat": time.Now().Add(time.Hour).Unix()} }), testissuer.MintOptions{}, ErrInvalidCredentials},
				"no role claim":                       {with(func(c *testissuer.Claims) { c.Subject = "" }), testissuer.MintOptions{}, ErrInvalidCredentials},
				"alg none":                            {good, testissuer.MintOptions{Alg: "none"}, ErrInvalidCredentials},
				"HS256 with the public key as secret": {good, testissuer.MintOptions{Alg: "HS256"}, ErrInvalidCredentials},
				"no kid":                              {good, testissuer.MintOptions{NoKID: true}, ErrInvalidCredentials},
			} {
				_, err := a.Authenticate(MethodToken, mint(t, is, tc.claims, tc.opts), nil)
				if !errors.Is(err, tc.want) {
					t.Errorf("%s: %v, want %v", name, err, tc.want)
				}
				if err != nil && strings.Contains(err.Error(), "eyJ") {
					t.Errorf("%s: the error carries the token: %v", name, err)
				}
			}
			if n := is.JWKSFetches(); n != fetches {
				t.Errorf("bad tokens of a cached issuer made %d JWKS fetches, want none", n-fetches)
			}

			// A token of another key under the issuer's kid: bad signature.
			other := startIssuer(t, testissuer.Options{Alg: alg})
			forged := mint(t, other, with(func(c *testissuer.Claims) { c.Issuer = is.URL }), testissuer.MintOptions{KID: is.CurrentKID()})
			_, err = a.Authenticate(MethodToken, forged, nil)
			wantErrIs(t, "signed by another key", err, ErrInvalidCredentials)
			if !strings.Contains(err.Error(), "signature") {
				t.Errorf("signed by another key: %v, want a signature error", err)
			}

			// openIDRoleClaim: a list-valued claim gives its first role.
			b := openIDAuth(t, is, clock, func(c *OpenIDConfig) { c.RoleClaim = "groups" })
			groups := with(func(c *testissuer.Claims) { c.Extra = map[string]any{"groups": []string{"team-a", "team-b"}} })
			if id, err := b.Authenticate(MethodToken, mint(t, is, groups, testissuer.MintOptions{}), nil); err != nil || id.Role != "team-a" {
				t.Fatalf("list-valued role claim: %+v %v", id, err)
			}
		})
	}
}

// Key rotation: a token signed with a new key (unknown kid) makes the node
// fetch the JWKS again — at most once per KeyIDCacheMissRefresh, however
// many such tokens arrive at once — and is accepted; a key the issuer
// withdrew is refused once the JWKS was fetched again.
func TestOpenIDKeyRotation(t *testing.T) {
	is := startIssuer(t, testissuer.Options{})
	clock := newClock()
	a := openIDAuth(t, is, clock, func(c *OpenIDConfig) { c.KeyIDCacheMissRefresh = time.Minute })
	claims := testissuer.Claims{Subject: "app", Audience: "lakegate", Expiry: time.Hour}
	oldKID := is.CurrentKID()
	oldTok := mint(t, is, claims, testissuer.MintOptions{})
	if _, err := a.Authenticate(MethodToken, oldTok, nil); err != nil {
		t.Fatal(err)
	}
	if n := is.JWKSFetches(); n != 1 {
		t.Fatalf("%d JWKS fetches, want 1", n)
	}

	// The issuer rotates and withdraws the old key at once.
	if _, err := is.Rotate(); err != nil {
		t.Fatal(err)
	}
	is.Unpublish(oldKID)
	newTok := mint(t, is, claims, testissuer.MintOptions{})
	_, err := a.Authenticate(MethodToken, newTok, nil)
	wantErrIs(t, "a new kid within KeyIDCacheMissRefresh of the last fetch", err, ErrInvalidCredentials)
	if n := is.JWKSFetches(); n != 1 {
		t.Fatalf("%d JWKS fetches, want 1 (rate-limited)", n)
	}
	if _, err := a.Authenticate(MethodToken, oldTok, nil); err != nil {
		t.Fatalf("the old key still cached: %v", err)
	}

	clock.Advance(time.Minute)
	var wg sync.WaitGroup
	var accepted atomic.Int64
	for range 50 {
		wg.Go(func() {
			if _, err := a.Authenticate(MethodToken, newTok, nil); err == nil {
				accepted.Add(1)
			}
		})
	}
	wg.Wait()
	if accepted.Load() != 50 || is.JWKSFetches() != 2 {
		t.Fatalf("50 tokens of the rotated key: %d accepted, %d JWKS fetches; want 50 and 2", accepted.Load(), is.JWKSFetches())
	}
	_, err = a.Authenticate(MethodToken, oldTok, nil)
	wantErrIs(t, "the withdrawn key", err, ErrInvalidCredentials)
	clock.Advance(time.Minute)
	_, err = a.Authenticate(MethodToken, oldTok, nil)
	wantErrIs(t, "the withdrawn key after another fetch", err, ErrInvalidCredentials)
	if n := is.JWKSFetches(); n != 3 {
		t.Fatalf("%d JWKS fetches, want 3", n)
	}

	// Made-up kids make one fetch per interval, not one per token.
	clock.Advance(time.Minute)
	for i := range 100 {
		tok := mint(t, is, claims, testissuer.MintOptions{KID: fmt.Sprintf("made-up-%d", i)})
		_, err := a.Authenticate(MethodToken, tok, nil)
		wantErrIs(t, "a made-up kid", err, ErrInvalidCredentials)
	}
	if n := is.JWKSFetches(); n != 4 {
		t.Fatalf("100 made-up kids: %d JWKS fetches in all, want 4", n)
	}
}

// Cached keys are fetched again after CacheRefreshAfterWrite; if the issuer
// is down then, they serve until CacheExpiration, after which its tokens
// are refused (issuer_unavailable) and the issuer is asked again at most
// every few seconds.
func TestOpenIDCacheRefreshAndExpiry(t *testing.T) {
	is := startIssuer(t, testissuer.Options{})
	clock := newClock()
	a := openIDAuth(t, is, clock, func(c *OpenIDConfig) {
		c.CacheRefreshAfterWrite, c.CacheExpiration = time.Hour, 2*time.Hour
	})
	tok := mint(t, is, testissuer.Claims{Subject: "app", Audience: "lakegate", Expiry: 10 * time.Hour}, testissuer.MintOptions{})
	for range 3 {
		if _, err := a.Authenticate(MethodToken, tok, nil); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(time.Hour)
	if _, err := a.Authenticate(MethodToken, tok, nil); err != nil || is.JWKSFetches() != 2 {
		t.Fatalf("after the refresh interval: %v, %d fetches (want 2)", err, is.JWKSFetches())
	}
	is.Close()
	clock.Advance(time.Hour + time.Minute)
	if _, err := a.Authenticate(MethodToken, tok, nil); err != nil {
		t.Fatalf("issuer down, keys not yet expired: %v", err)
	}
	clock.Advance(time.Hour)
	_, err := a.Authenticate(MethodToken, tok, nil)
	wantErrIs(t, "issuer down, keys expired", err, ErrIssuerUnavailable)
	if Reason(err) != "issuer_unavailable" {
		t.Fatalf("reason %q", Reason(err))
	}
}

// Discovery: the document must name the issuer exactly and an https
// jwks_uri (unless insecure issuers are allowed); documents and key sets
// are bounded; symmetric keys in a JWKS are ignored; issuers must be https
// unless allowed otherwise.
func TestOpenIDDiscoveryAndJWKSChecks(t *testing.T) {
	var body atomic.Value
	var srvURL string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		doc := body.Load().(func(string) (string, string))
		d, j := doc(srvURL)
		if strings.HasSuffix(r.URL.Path, "/openid-configuration") {
			w.Write([]byte(d))
		} else {
			w.Write([]byte(j))
		}
	}))
	defer srv.Close()
	srvURL = srv.URL
	clock := newClock()
	is := startIssuer(t, testissuer.Options{}) // only to sign tokens claiming srv as issuer
	tok := mint(t, is, testissuer.Claims{Issuer: srv.URL, Subject: "app", Audience: "lakegate", Expiry: time.Hour}, testissuer.MintOptions{})
	for name, doc := range map[string]func(string) (string, string){
		"issuer mismatch": func(u string) (string, string) {
			return `{"issuer":"https://other","jwks_uri":"` + u + `/jwks"}`, `{"keys":[]}`
		},
		"http jwks_uri": func(u string) (string, string) {
			return `{"issuer":"` + u + `","jwks_uri":"ftp://x/jwks"}`, `{"keys":[]}`
		},
		"not json": func(u string) (string, string) { return `<html>`, `` },
		"huge document": func(u string) (string, string) {
			return `{"issuer":"` + u + `","x":"` + strings.Repeat("a", 2<<20) + `"}`, ``
		},
		"too many keys": func(u string) (string, string) {
			return okDoc(u), `{"keys":[` + strings.Repeat(`{"kty":"oct","kid":"x","k":"AA"},`, 100) + `{"kty":"oct"}]}`
		},
		"malformed RSA key": func(u string) (string, string) {
			return okDoc(u), `{"keys":[{"kty":"RSA","kid":"k","n":"AQAB","e":"AQAB"}]}`
		},
	} {
		body.Store(doc)
		a := New2(t, OpenIDConfig{AllowedTokenIssuers: []string{srv.URL}, AllowedAudiences: []string{"lakegate"}, AllowInsecureIssuers: true, Now: clock.Now})
		_, err := a.Authenticate(MethodToken, tok, nil)
		wantErrIs(t, name, err, ErrIssuerUnavailable)
	}
	// An HS key (kty oct) under the token's kid is never used.
	body.Store(func(u string) (string, string) {
		return okDoc(u), `{"keys":[{"kty":"oct","kid":"` + is.CurrentKID() + `","k":"c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"}]}`
	})
	a := New2(t, OpenIDConfig{AllowedTokenIssuers: []string{srv.URL}, AllowedAudiences: []string{"lakegate"}, AllowInsecureIssuers: true, Now: clock.Now})
	_, err := a.Authenticate(MethodToken, tok, nil)
	wantErrIs(t, "a symmetric key in the JWKS", err, ErrInvalidCredentials)

	for name, cfg := range map[string]OpenIDConfig{
		"http issuer":     {AllowedTokenIssuers: []string{"http://idp.example"}, AllowedAudiences: []string{"a"}},
		"no issuers":      {AllowedAudiences: []string{"a"}},
		"no audiences":    {AllowedTokenIssuers: []string{"https://idp.example"}},
		"not a URL":       {AllowedTokenIssuers: []string{"idp.example"}, AllowedAudiences: []string{"a"}},
		"missing CA file": {AllowedTokenIssuers: []string{"https://idp.example"}, AllowedAudiences: []string{"a"}, TrustCertsFile: "/nope/ca.pem"},
		"negative leeway": {AllowedTokenIssuers: []string{"https://idp.example"}, AllowedAudiences: []string{"a"}, AcceptedTimeLeeway: -time.Second},
		"provider twice":  {},
	} {
		providers := []string{ProviderOpenID}
		if name == "provider twice" {
			providers = []string{ProviderOpenID, ProviderOpenID}
			cfg = OpenIDConfig{AllowedTokenIssuers: []string{"https://idp.example"}, AllowedAudiences: []string{"a"}}
		}
		if _, err := New(Config{Providers: providers, OpenID: cfg}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func okDoc(u string) string { return `{"issuer":"` + u + `","jwks_uri":"` + u + `/jwks"}` }

// New2 builds an Authenticator with only the openid provider.
func New2(t *testing.T, cfg OpenIDConfig) *Authenticator {
	t.Helper()
	a, err := New(Config{Providers: []string{ProviderOpenID}, OpenID: cfg})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// An https issuer is trusted through openIDTokenIssuerTrustCertsFilePath;
// without it, its certificate (of a private CA) is not.
func TestOpenIDOverHTTPS(t *testing.T) {
	dir := t.TempDir()
	certs, err := testcerts.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := certs.Server("issuer")
	if err != nil {
		t.Fatal(err)
	}
	is := startIssuer(t, testissuer.Options{CertFile: cert, KeyFile: key})
	if !strings.HasPrefix(is.URL, "https://") {
		t.Fatal(is.URL)
	}
	tok := mint(t, is, testissuer.Claims{Subject: "app", Audience: "lakegate", Expiry: time.Hour}, testissuer.MintOptions{})
	trusted := New2(t, OpenIDConfig{AllowedTokenIssuers: []string{is.URL}, AllowedAudiences: []string{"lakegate"}, TrustCertsFile: certs.CAFile})
	if id, err := trusted.Authenticate(MethodToken, tok, nil); err != nil || id.Role != "app" {
		t.Fatalf("trusted https issuer: %+v %v", id, err)
	}
	untrusted := New2(t, OpenIDConfig{AllowedTokenIssuers: []string{is.URL}, AllowedAudiences: []string{"lakegate"}})
	_, err = untrusted.Authenticate(MethodToken, tok, nil)
	wantErrIs(t, "an issuer certificate of an unknown CA", err, ErrIssuerUnavailable)
}

// The token and openid providers both serve method "token", tried in the
// configured order: each accepts its own tokens, and a refused token gets
// the error of the provider it belongs to.
func TestTokenAndOpenIDProviders(t *testing.T) {
	is := startIssuer(t, testissuer.Options{})
	secret, _ := NewSecretKey()
	clock := newClock()
	for _, order := range [][]string{{MethodToken, ProviderOpenID}, {ProviderOpenID, MethodToken}} {
		a, err := New(Config{Providers: order, Token: TokenConfig{SecretKey: secret},
			OpenID: OpenIDConfig{AllowedTokenIssuers: []string{is.URL}, AllowedAudiences: []string{"lakegate"}, AllowInsecureIssuers: true, Now: clock.Now}})
		if err != nil {
			t.Fatal(err)
		}
		if m := a.Methods(); len(m) != 1 || m[0] != MethodToken {
			t.Fatalf("methods %v", m)
		}
		static := mustToken(t, TokenSpec{Subject: "static-role"}, secret, nil, "")
		if id, err := a.Authenticate(MethodToken, []byte(static), nil); err != nil || id.Role != "static-role" {
			t.Fatalf("%v: static token: %+v %v", order, id, err)
		}
		oidc := mint(t, is, testissuer.Claims{Subject: "oidc-role", Audience: "lakegate", Expiry: time.Hour}, testissuer.MintOptions{})
		if id, err := a.Authenticate(MethodToken, oidc, nil); err != nil || id.Role != "oidc-role" {
			t.Fatalf("%v: issuer token: %+v %v", order, id, err)
		}
		expired := mint(t, is, testissuer.Claims{Subject: "oidc-role", Audience: "lakegate", Expiry: -time.Minute}, testissuer.MintOptions{})
		_, err = a.Authenticate(MethodToken, expired, nil)
		wantErrIs(t, fmt.Sprint(order, ": expired issuer token"), err, ErrExpired)
		expiredStatic := mustToken(t, TokenSpec{Subject: "static-role", Expiry: -time.Minute}, secret, nil, "")
		_, err = a.Authenticate(MethodToken, []byte(expiredStatic), nil)
		wantErrIs(t, fmt.Sprint(order, ": expired static token"), err, ErrExpired)
	}
}

// parseJWKS keeps RSA and EC signature keys by kid and skips the rest.
func TestParseJWKS(t *testing.T) {
	is := startIssuer(t, testissuer.Options{Alg: "ES256"})
	resp, err := http.Get(is.URL + "/jwks")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := parseJWKS(body)
	if err != nil || len(keys) != 1 || !keys[is.CurrentKID()].allows("ES256") || keys[is.CurrentKID()].allows("RS256") {
		t.Fatalf("issuer JWKS: %v %v", keys, err)
	}
	keys, err = parseJWKS([]byte(`{"keys":[{"kty":"oct","kid":"h","k":"AA"},{"kty":"RSA","kid":"e","use":"enc","n":"AA","e":"AQAB"},{"kty":"OKP","kid":"o"},{"kty":"EC","crv":"P-256"}]}`))
	if err != nil || len(keys) != 0 {
		t.Fatalf("unusable keys: %v %v", keys, err)
	}
	for name, doc := range map[string]string{
		"EC point off the curve": `{"keys":[{"kty":"EC","kid":"k","crv":"P-256","x":"` + strings.Repeat("A", 43) + `","y":"` + strings.Repeat("A", 43) + `"}]}`,
		"unknown curve":          `{"keys":[{"kty":"EC","kid":"k","crv":"P-192","x":"AA","y":"AA"}]}`,
		"duplicate kid":          `{"keys":[{"kty":"EC","kid":"k","crv":"P-192"},{"kty":"EC","kid":"k","crv":"P-192"}]}`,
		"not a JWKS":             `[1,2]`,
	} {
		if _, err := parseJWKS([]byte(doc)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
