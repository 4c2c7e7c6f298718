package testissuer

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Options configure an Issuer.
type Options struct {
	// Addr is the listen address. Default "127.0.0.1:0".
	Addr string
	// Alg is the signing algorithm: "RS256" (default) or "ES256".
	Alg string
	// TTL is the lifetime of issued tokens. Default 1 h.
	TTL time.Duration
	// Audience is the "aud" of tokens whose request names none.
	Audience string
	// CertFile and KeyFile, when set, serve HTTPS with this certificate.
	CertFile, KeyFile string
}

// Client is an OAuth2 client the token endpoint knows.
type Client struct {
	ID, Secret string
	// Subject is the tokens' "sub". Default the client id.
	Subject string
	// Claims are extra claims of its tokens (a role claim, groups …).
	Claims map[string]any
}

// signingKey is one key of the issuer.
type signingKey struct {
	kid  string
	priv crypto.Signer
}

// Issuer is a running test issuer. Safe for concurrent use.
type Issuer struct {
	// URL is the issuer: its "iss" and the base of its endpoints.
	URL string

	opts Options
	srv  *http.Server
	ln   net.Listener
	seq  atomic.Int64
	ttl  atomic.Int64 // of issued tokens, ns
	// JWKSFetches counts GET /jwks; TokenRequests counts POST /token.
	jwksFetches, tokenRequests atomic.Int64

	mu struct {
		sync.Mutex
		clients   map[string]Client
		current   signingKey
		published []signingKey // in the JWKS, newest last
	}
}

// Start starts an issuer; Close stops it.
func Start(opts Options) (*Issuer, error) {
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	if opts.Alg == "" {
		opts.Alg = "RS256"
	}
	if opts.Alg != "RS256" && opts.Alg != "ES256" {
		return nil, fmt.Errorf("testissuer: algorithm %q (want RS256 or ES256)", opts.Alg)
	}
	if opts.TTL == 0 {
		opts.TTL = time.Hour
	}
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, err
	}
	scheme := "http"
	if opts.CertFile != "" {
		scheme = "https"
	}
	is := &Issuer{URL: scheme + "://" + ln.Addr().String(), opts: opts, ln: ln}
	is.mu.clients = map[string]Client{}
	is.ttl.Store(int64(opts.TTL))
	if _, err := is.Rotate(); err != nil {
		ln.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", is.discovery)
	mux.HandleFunc("GET /jwks", is.jwks)
	mux.HandleFunc("POST /token", is.token)
	is.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if opts.CertFile != "" {
			is.srv.ServeTLS(ln, opts.CertFile, opts.KeyFile)
		} else {
			is.srv.Serve(ln)
		}
	}()
	return is, nil
}

// Close stops the issuer.
func (is *Issuer) Close() error { return is.srv.Close() }

// SetTTL changes the lifetime of the tokens issued from now on.
func (is *Issuer) SetTTL(d time.Duration) { is.ttl.Store(int64(d)) }

// AddClient registers (or replaces) a client.
func (is *Issuer) AddClient(c Client) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.mu.clients[c.ID] = c
}

// CredentialsJSON is the key file the Pulsar clients read for the client
// credentials flow (Go: privateKey, Java: privateKey/credentialsUrl, C++ and
// Python: private_key).
func (is *Issuer) CredentialsJSON(id string) []byte {
	is.mu.Lock()
	c := is.mu.clients[id]
	is.mu.Unlock()
	b, _ := json.Marshal(map[string]string{
		"type": "client_credentials", "client_id": c.ID, "client_secret": c.Secret, "issuer_url": is.URL,
	})
	return b
}

// Rotate makes a new signing key (published alongside the older ones) and
// returns its kid.
func (is *Issuer) Rotate() (string, error) {
	var (
		k   crypto.Signer
		err error
	)
	if is.opts.Alg == "ES256" {
		k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	} else {
		k, err = rsa.GenerateKey(rand.Reader, 2048)
	}
	if err != nil {
		return "", err
	}
	sk := signingKey{kid: fmt.Sprintf("key-%d", is.seq.Add(1)), priv: k}
	is.mu.Lock()
	defer is.mu.Unlock()
	is.mu.current = sk
	is.mu.published = append(is.mu.published, sk)
	return sk.kid, nil
}

// Unpublish removes a key from the JWKS (tokens it signed no longer
// verify once a verifier fetched the JWKS again). Removing the current key
// leaves the issuer signing with a key it does not publish.
func (is *Issuer) Unpublish(kid string) {
	is.mu.Lock()
	defer is.mu.Unlock()
	var keep []signingKey
	for _, k := range is.mu.published {
		if k.kid != kid {
			keep = append(keep, k)
		}
	}
	is.mu.published = keep
}

// CurrentKID is the kid of the signing key.
func (is *Issuer) CurrentKID() string {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.mu.current.kid
}

// JWKSFetches is how many times the JWKS was fetched.
func (is *Issuer) JWKSFetches() int64 { return is.jwksFetches.Load() }

// TokenRequests is how many token requests came in (answered or not).
func (is *Issuer) TokenRequests() int64 { return is.tokenRequests.Load() }

// Claims are the standard claims of a token made with Mint; Extra adds any.
type Claims struct {
	Subject  string
	Audience any           // a string or a list; nil: none
	Issuer   string        // default the issuer's URL
	Expiry   time.Duration // from now; 0: no exp; negative: expired
	Extra    map[string]any
}

// MintOptions choose how Mint signs.
type MintOptions struct {
	// KID is the header's kid; default the signing key's. SignWith picks
	// the key by kid (default the current one).
	KID, SignWith string
	// Alg overrides the algorithm: "none" makes an unsigned token,
	// "HS256" signs with the public key's bytes as an HMAC secret (the
	// key-confusion attack).
	Alg string
	// NoKID leaves kid out of the header.
	NoKID bool
}

// Mint signs a token as the issuer would (or as MintOptions breaks it).
func (is *Issuer) Mint(c Claims, o MintOptions) (string, error) {
	is.mu.Lock()
	key := is.mu.current
	if o.SignWith != "" {
		key = signingKey{}
		for _, k := range is.mu.published {
			if k.kid == o.SignWith {
				key = k
			}
		}
	}
	is.mu.Unlock()
	if key.priv == nil {
		return "", fmt.Errorf("testissuer: no key %q", o.SignWith)
	}
	now := time.Now()
	claims := jwt.MapClaims{"iss": is.URL, "sub": c.Subject, "iat": now.Unix(), "nbf": now.Unix()}
	if c.Issuer != "" {
		claims["iss"] = c.Issuer
	}
	if c.Audience != nil {
		claims["aud"] = c.Audience
	}
	if c.Expiry != 0 {
		claims["exp"] = now.Add(c.Expiry).Unix()
		if c.Expiry < 0 {
			claims["iat"], claims["nbf"] = now.Add(2*c.Expiry).Unix(), now.Add(2*c.Expiry).Unix()
		}
	}
	for k, v := range c.Extra {
		claims[k] = v
	}
	var (
		m      jwt.SigningMethod
		secret any = key.priv
	)
	switch o.Alg {
	case "":
		m = jwt.GetSigningMethod(is.opts.Alg)
	case "none":
		m, secret = jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType
	case "HS256":
		pub, err := publicDER(key.priv)
		if err != nil {
			return "", err
		}
		m, secret = jwt.SigningMethodHS256, pub
	default:
		if m = jwt.GetSigningMethod(o.Alg); m == nil {
			return "", fmt.Errorf("testissuer: algorithm %q", o.Alg)
		}
	}
	t := jwt.NewWithClaims(m, claims)
	switch {
	case o.NoKID:
	case o.KID != "":
		t.Header["kid"] = o.KID
	default:
		t.Header["kid"] = key.kid
	}
	return t.SignedString(secret)
}

// publicDER is the DER (SubjectPublicKeyInfo) of a key's public half: what
// a key-confusion attacker signs an HS256 token with.
func publicDER(k crypto.Signer) ([]byte, error) {
	return x509.MarshalPKIXPublicKey(k.Public())
}

func (is *Issuer) discovery(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                is.URL,
		"jwks_uri":                              is.URL + "/jwks",
		"token_endpoint":                        is.URL + "/token",
		"grant_types_supported":                 []string{"client_credentials"},
		"token_endpoint_auth_methods_supported": []string{"client_secret_post", "client_secret_basic"},
		"id_token_signing_alg_values_supported": []string{is.opts.Alg},
		"response_types_supported":              []string{"token"},
		"subject_types_supported":               []string{"public"},
	})
}

func (is *Issuer) jwks(w http.ResponseWriter, _ *http.Request) {
	is.jwksFetches.Add(1)
	is.mu.Lock()
	keys := make([]map[string]string, 0, len(is.mu.published))
	for _, k := range is.mu.published {
		keys = append(keys, jwkOf(k, is.opts.Alg))
	}
	is.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"keys": keys})
}

// jwkOf is a key's public JWK.
func jwkOf(k signingKey, alg string) map[string]string {
	b64 := base64.RawURLEncoding.EncodeToString
	switch p := k.priv.Public().(type) {
	case *rsa.PublicKey:
		return map[string]string{"kty": "RSA", "kid": k.kid, "use": "sig", "alg": alg,
			"n": b64(p.N.Bytes()), "e": b64(big.NewInt(int64(p.E)).Bytes())}
	case *ecdsa.PublicKey:
		b, _ := p.Bytes() // 0x04 || x || y
		n := (len(b) - 1) / 2
		return map[string]string{"kty": "EC", "kid": k.kid, "use": "sig", "alg": alg, "crv": "P-256",
			"x": b64(b[1 : 1+n]), "y": b64(b[1+n:])}
	}
	return nil
}

// token is the client credentials grant.
func (is *Issuer) token(w http.ResponseWriter, r *http.Request) {
	is.tokenRequests.Add(1)
	params, err := tokenParams(r)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request", "error_description": err.Error()})
		return
	}
	if params.Get("grant_type") != "client_credentials" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "unsupported_grant_type"})
		return
	}
	id, secret := params.Get("client_id"), params.Get("client_secret")
	if u, p, ok := r.BasicAuth(); ok {
		id, secret = u, p
	}
	is.mu.Lock()
	c, known := is.mu.clients[id]
	is.mu.Unlock()
	if !known || subtle.ConstantTimeCompare([]byte(c.Secret), []byte(secret)) != 1 {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client", "error_description": "unknown client or wrong secret"})
		return
	}
	sub := c.Subject
	if sub == "" {
		sub = c.ID
	}
	aud := params.Get("audience")
	if aud == "" {
		aud = is.opts.Audience
	}
	extra := map[string]any{"client_id": c.ID}
	for k, v := range c.Claims {
		extra[k] = v
	}
	ttl := time.Duration(is.ttl.Load())
	claims := Claims{Subject: sub, Expiry: ttl, Extra: extra}
	if aud != "" {
		claims.Audience = aud
	}
	tok, err := is.Mint(claims, MintOptions{})
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "server_error"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token": tok, "token_type": "Bearer", "expires_in": int(ttl / time.Second),
	})
}

// tokenParams reads a token request's parameters from a form or JSON body
// (64 KiB at most).
func tokenParams(r *http.Request) (url.Values, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err != nil {
		return nil, err
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct == "application/json" {
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			return nil, errors.New("the body is not JSON")
		}
		v := url.Values{}
		for k, x := range m {
			if s, ok := x.(string); ok {
				v.Set(k, s)
			}
		}
		return v, nil
	}
	return url.ParseQuery(strings.TrimSpace(string(body)))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
