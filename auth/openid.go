package auth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// The openid provider verifies JWT access tokens issued by OpenID Connect
// providers, as Pulsar's AuthenticationProviderOpenID does: the clients'
// AuthenticationOAuth2 (client credentials) fetch a token from the issuer
// and send it with auth method "token". Keys are discovered from the
// issuer: {iss}/.well-known/openid-configuration names the jwks_uri, whose
// keys are selected by the token's "kid" (docs/security.md, "OAuth2 and
// OpenID Connect").

// ProviderOpenID is the openid provider's name in Config.Providers. Its
// clients send auth method MethodToken, like those of the token provider.
const ProviderOpenID = "openid"

// ErrIssuerUnavailable: the OpenID discovery document or the JWKS of an
// allowed issuer could not be fetched or read (the issuer is down,
// unreachable, or serves something else). Surfaces like the other
// authentication errors (AuthenticationError, HTTP 401), counted as
// "issuer_unavailable".
var ErrIssuerUnavailable = errors.New("auth: token issuer unavailable")

// Bounds of the openid provider's issuer requests.
const (
	// maxIssuerResponseBytes bounds a discovery document or a JWKS.
	maxIssuerResponseBytes = 1 << 20
	// minKeyIDCacheMissRefresh is the shortest OpenIDConfig.KeyIDCacheMissRefresh.
	minKeyIDCacheMissRefresh = time.Second
	// issuerRetryInterval: an issuer whose keys could not be fetched (and
	// none are cached) is not asked again sooner (nor sooner than
	// KeyIDCacheMissRefresh); tokens of it are refused meanwhile.
	issuerRetryInterval = 5 * time.Second
)

// OpenIDConfig configures the openid provider. The names in parentheses
// are Pulsar's settings (and lakegate's auth.* keys). Zero values take the
// defaults given.
type OpenIDConfig struct {
	// AllowedTokenIssuers are the issuers whose tokens are accepted, exactly
	// as their "iss" claim and discovery document name them
	// (openIDAllowedTokenIssuers). Required.
	AllowedTokenIssuers []string
	// AllowedAudiences: a token's "aud" must hold one of them
	// (openIDAllowedAudiences). Required.
	AllowedAudiences []string
	// RoleClaim holds the role: a string, or a list whose first string is
	// taken (openIDRoleClaim). Default "sub".
	RoleClaim string
	// AcceptedTimeLeeway is the clock skew allowed on "exp", "nbf" and
	// "iat" (openIDAcceptedTimeLeewaySeconds). Default 0.
	AcceptedTimeLeeway time.Duration
	// CacheSize is how many issuers' keys are kept (openIDCacheSize); the
	// least recently used goes first. Default 5.
	CacheSize int
	// CacheRefreshAfterWrite: keys older than this are fetched again when
	// next used; if that fails, the old ones serve until CacheExpiration
	// (openIDCacheRefreshAfterWriteSeconds). Default 18 h.
	CacheRefreshAfterWrite time.Duration
	// CacheExpiration: keys older than this are never used
	// (openIDCacheExpirationSeconds). Default 24 h.
	CacheExpiration time.Duration
	// KeyIDCacheMissRefresh: a token whose kid is not among the cached keys
	// fetches the JWKS again only if the last fetch is at least this old:
	// the bound on how often tokens with made-up kids make the node ask
	// the issuer (openIDKeyIdCacheMissRefreshSeconds). Default 5 min, at
	// least 1 s.
	KeyIDCacheMissRefresh time.Duration
	// HTTPConnectionTimeout bounds connecting to the issuer
	// (openIDHttpConnectionTimeoutMillis). Default 10 s.
	HTTPConnectionTimeout time.Duration
	// HTTPReadTimeout bounds waiting for and reading its answer
	// (openIDHttpReadTimeoutMillis). Default 10 s.
	HTTPReadTimeout time.Duration
	// AllowInsecureIssuers accepts http:// issuers and JWKS URIs (Pulsar's
	// openIDRequireIssuersUseHttps=false): for tests on loopback only.
	AllowInsecureIssuers bool
	// TrustCertsFile is a PEM file of the CAs issuer certificates are
	// checked against (openIDTokenIssuerTrustCertsFilePath). Default the
	// system's.
	TrustCertsFile string
	// Now is the clock tokens and the cache are checked against. Default
	// time.Now.
	Now func() time.Time
}

// issuerKeys is the cached discovery and keys of one issuer. Guarded by
// openIDProvider.mu.
type issuerKeys struct {
	jwksURI    string
	discovered time.Time // when jwksURI was read (zero: never)
	keys       map[string]verifyKey
	fetched    time.Time // when keys were fetched (zero: never)
	attempted  time.Time // the last fetch attempt, successful or not
	used       time.Time // the last lookup, for eviction
	// loading is non-nil while a fetch runs; it is closed when it ends.
	// Others wait for it rather than fetching too.
	loading chan struct{}
	err     error // the last fetch's error (nil: it succeeded)
}

// openIDProvider verifies OpenID Connect access tokens. Safe for concurrent
// use.
type openIDProvider struct {
	cfg     OpenIDConfig
	issuers map[string]bool
	client  *http.Client
	mu      struct {
		sync.Mutex
		cache map[string]*issuerKeys // by issuer; at most cfg.CacheSize
	}
}

func newOpenIDProvider(cfg OpenIDConfig) (*openIDProvider, error) {
	if len(cfg.AllowedTokenIssuers) == 0 {
		return nil, errors.New("auth: the openid provider needs its allowed token issuers (openIDAllowedTokenIssuers)")
	}
	if len(cfg.AllowedAudiences) == 0 {
		return nil, errors.New("auth: the openid provider needs its allowed audiences (openIDAllowedAudiences)")
	}
	p := &openIDProvider{issuers: map[string]bool{}}
	for _, iss := range cfg.AllowedTokenIssuers {
		u, err := url.Parse(iss)
		if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
			return nil, fmt.Errorf("auth: token issuer %q is not an http(s) URL", iss)
		}
		if u.Scheme != "https" && !cfg.AllowInsecureIssuers {
			return nil, fmt.Errorf("auth: token issuer %q does not use https (openIDRequireIssuersUseHttps)", iss)
		}
		p.issuers[iss] = true
	}
	if cfg.RoleClaim == "" {
		cfg.RoleClaim = "sub"
	}
	if cfg.AcceptedTimeLeeway < 0 {
		return nil, errors.New("auth: the openid provider's time leeway is negative")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.CacheRefreshAfterWrite, 18*time.Hour)
	def(&cfg.CacheExpiration, 24*time.Hour)
	def(&cfg.KeyIDCacheMissRefresh, 5*time.Minute)
	def(&cfg.HTTPConnectionTimeout, 10*time.Second)
	def(&cfg.HTTPReadTimeout, 10*time.Second)
	cfg.KeyIDCacheMissRefresh = max(cfg.KeyIDCacheMissRefresh, minKeyIDCacheMissRefresh)
	if cfg.CacheSize <= 0 {
		cfg.CacheSize = 5
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.TrustCertsFile != "" {
		b, err := os.ReadFile(cfg.TrustCertsFile)
		if err != nil {
			return nil, fmt.Errorf("auth: reading %s (the token issuers' trust certificates): %v", cfg.TrustCertsFile, errors.Unwrap(err))
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("auth: %s holds no PEM certificate (token issuers' trust certificates)", cfg.TrustCertsFile)
		}
		tlsConf.RootCAs = pool
	}
	dialer := &net.Dialer{Timeout: cfg.HTTPConnectionTimeout}
	p.client = &http.Client{
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           dialer.DialContext,
			TLSClientConfig:       tlsConf,
			TLSHandshakeTimeout:   cfg.HTTPConnectionTimeout,
			ResponseHeaderTimeout: cfg.HTTPReadTimeout,
			MaxIdleConnsPerHost:   2,
			IdleConnTimeout:       time.Minute,
		},
		// Discovery and keys are read where the issuer says, never where a
		// redirect leads (it could leave https).
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	p.cfg = cfg
	p.mu.cache = map[string]*issuerKeys{}
	return p, nil
}

// providerError is a refusal by a provider that knows whether the token
// is its own: the openid provider's token is one of an allowed issuer.
// Among the refusals of every provider of method "token", the one by the
// provider whose token it is tells the client most.
type providerError struct {
	err  error
	mine bool
}

func (e *providerError) Error() string { return e.err.Error() }
func (e *providerError) Unwrap() error { return e.err }

// authenticate verifies an OpenID Connect access token.
func (p *openIDProvider) authenticate(raw string) (Identity, error) {
	id, mine, err := p.verify(raw)
	if err != nil {
		return Identity{}, &providerError{err: err, mine: mine}
	}
	return id, nil
}

// verify verifies a token; mine reports that it is one of an allowed
// issuer.
func (p *openIDProvider) verify(raw string) (id Identity, mine bool, err error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return Identity{}, false, fmt.Errorf("%w: empty token", ErrNoCredentials)
	}
	// The unverified header and claims only choose the issuer and the key;
	// nothing is trusted before the signature is checked.
	unverified := jwt.MapClaims{}
	tok, _, err := jwt.NewParser().ParseUnverified(raw, unverified)
	if err != nil {
		return Identity{}, false, fmt.Errorf("%w: malformed token", ErrInvalidCredentials)
	}
	iss, _ := unverified["iss"].(string)
	switch {
	case iss == "":
		return Identity{}, false, fmt.Errorf("%w: the token names no issuer (iss)", ErrInvalidCredentials)
	case !p.issuers[iss]:
		return Identity{}, false, fmt.Errorf("%w: the token's issuer %q is not an allowed issuer", ErrInvalidCredentials, iss)
	}
	alg, _ := tok.Header["alg"].(string)
	if !slices.Contains(openIDAlgorithms, alg) {
		return Identity{}, true, fmt.Errorf("%w: token algorithm %q not accepted (issuer tokens are verified with %s)",
			ErrInvalidCredentials, alg, strings.Join(openIDAlgorithms, ", "))
	}
	kid, _ := tok.Header["kid"].(string)
	if kid == "" {
		return Identity{}, true, fmt.Errorf("%w: the token has no kid", ErrInvalidCredentials)
	}
	key, err := p.key(iss, kid)
	if err != nil {
		return Identity{}, true, err
	}
	if !key.allows(alg) {
		return Identity{}, true, fmt.Errorf("%w: key %q does not verify %s", ErrInvalidCredentials, kid, alg)
	}
	claims := jwt.MapClaims{}
	_, err = jwt.ParseWithClaims(raw, claims, func(*jwt.Token) (any, error) { return key.pub, nil },
		jwt.WithValidMethods([]string{alg}),
		jwt.WithTimeFunc(p.cfg.Now),
		jwt.WithLeeway(p.cfg.AcceptedTimeLeeway),
		jwt.WithIssuer(iss),
		jwt.WithAudience(p.cfg.AllowedAudiences...),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
	)
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return Identity{}, true, fmt.Errorf("%w: the token expired", ErrExpired)
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return Identity{}, true, fmt.Errorf("%w: bad token signature", ErrInvalidCredentials)
	case errors.Is(err, jwt.ErrTokenInvalidAudience), errors.Is(err, jwt.ErrTokenRequiredClaimMissing) && !hasAud(claims):
		return Identity{}, true, fmt.Errorf("%w: the token's audience is not one of %s", ErrInvalidCredentials,
			strings.Join(p.cfg.AllowedAudiences, ", "))
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return Identity{}, true, fmt.Errorf("%w: the token has no exp", ErrInvalidCredentials)
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return Identity{}, true, fmt.Errorf("%w: token not valid yet", ErrInvalidCredentials)
	case err != nil:
		return Identity{}, true, fmt.Errorf("%w: invalid token", ErrInvalidCredentials)
	}
	role := claimRole(claims[p.cfg.RoleClaim])
	if role == "" {
		return Identity{}, true, fmt.Errorf("%w: the token has no %q claim", ErrInvalidCredentials, p.cfg.RoleClaim)
	}
	id = Identity{Role: role, Method: MethodToken}
	if exp, err := claims.GetExpirationTime(); err == nil && exp != nil {
		id.Expires = exp.Time
	}
	return id, true, nil
}

func hasAud(c jwt.MapClaims) bool {
	aud, err := c.GetAudience()
	return err == nil && len(aud) > 0
}

// key returns the issuer's key kid. The issuer's keys are fetched when
// none are cached (or they expired), when they are due for a refresh, and
// when kid is unknown — then at most once per KeyIDCacheMissRefresh. A
// failed fetch is not retried for issuerRetryInterval. Concurrent lookups
// wait for one fetch rather than making their own.
func (p *openIDProvider) key(iss, kid string) (verifyKey, error) {
	waited := false
	for {
		p.mu.Lock()
		e := p.entryLocked(iss)
		if e.loading != nil {
			ch := e.loading
			p.mu.Unlock()
			<-ch
			waited = true
			continue
		}
		now := p.cfg.Now()
		age := now.Sub(e.fetched)
		fresh := !e.fetched.IsZero() && age < p.cfg.CacheExpiration
		due := !fresh || age >= p.cfg.CacheRefreshAfterWrite
		sinceAttempt := now.Sub(e.attempted)
		k, known := e.keys[kid]
		switch {
		case fresh && known && (!due || waited || sinceAttempt < p.cfg.KeyIDCacheMissRefresh):
			p.mu.Unlock()
			return k, nil
		case fresh && (waited || sinceAttempt < p.cfg.KeyIDCacheMissRefresh):
			p.mu.Unlock()
			return verifyKey{}, fmt.Errorf("%w: the issuer has no key %q", ErrInvalidCredentials, kid)
		case !fresh && e.err != nil && (waited || sinceAttempt < min(issuerRetryInterval, p.cfg.KeyIDCacheMissRefresh)):
			err := e.err
			p.mu.Unlock()
			return verifyKey{}, err
		}
		ch := make(chan struct{})
		e.loading, e.attempted = ch, now
		rediscover := e.jwksURI == "" || now.Sub(e.discovered) >= p.cfg.CacheRefreshAfterWrite
		jwksURI := e.jwksURI
		p.mu.Unlock()

		keys, newURI, err := p.fetch(iss, jwksURI, rediscover)

		p.mu.Lock()
		if err == nil {
			e.keys, e.fetched, e.err = keys, p.cfg.Now(), nil
		} else {
			e.err = err
			keys = e.keys // a failed refresh keeps serving the cached keys
		}
		if newURI != "" {
			e.jwksURI, e.discovered = newURI, p.cfg.Now()
		}
		fresh = !e.fetched.IsZero() && p.cfg.Now().Sub(e.fetched) < p.cfg.CacheExpiration
		e.loading = nil
		close(ch)
		p.mu.Unlock()
		switch k, known := keys[kid]; {
		case fresh && known:
			return k, nil
		case err != nil:
			return verifyKey{}, err
		}
		return verifyKey{}, fmt.Errorf("%w: the issuer has no key %q", ErrInvalidCredentials, kid)
	}
}

// entryLocked returns iss's cache entry, making one (and evicting the least
// recently used idle entry beyond CacheSize).
func (p *openIDProvider) entryLocked(iss string) *issuerKeys {
	e := p.mu.cache[iss]
	if e == nil {
		if len(p.mu.cache) >= p.cfg.CacheSize {
			var oldest string
			for k, v := range p.mu.cache {
				if v.loading == nil && (oldest == "" || v.used.Before(p.mu.cache[oldest].used)) {
					oldest = k
				}
			}
			if oldest != "" {
				delete(p.mu.cache, oldest)
			}
		}
		e = &issuerKeys{}
		p.mu.cache[iss] = e
	}
	e.used = p.cfg.Now()
	return e
}

// fetch reads the issuer's discovery document (when rediscover or no
// jwksURI is known) and its JWKS. It returns the keys and the jwks_uri it
// discovered ("" if it did not).
func (p *openIDProvider) fetch(iss, jwksURI string, rediscover bool) (map[string]verifyKey, string, error) {
	var discovered string
	if rediscover {
		uri, err := p.discover(iss)
		if err != nil && jwksURI == "" {
			return nil, "", err
		}
		if err == nil {
			jwksURI, discovered = uri, uri
		}
	}
	b, err := p.get(jwksURI)
	if err != nil {
		return nil, discovered, fmt.Errorf("%w: %s's JWKS: %v", ErrIssuerUnavailable, iss, err)
	}
	keys, err := parseJWKS(b)
	if err != nil {
		return nil, discovered, fmt.Errorf("%w: %s's JWKS: %v", ErrIssuerUnavailable, iss, err)
	}
	return keys, discovered, nil
}

// discover reads iss's OpenID discovery document and returns its jwks_uri.
// The document must name iss exactly as its issuer (OpenID Connect
// Discovery §4.3).
func (p *openIDProvider) discover(iss string) (string, error) {
	b, err := p.get(strings.TrimSuffix(iss, "/") + "/.well-known/openid-configuration")
	if err != nil {
		return "", fmt.Errorf("%w: %s's discovery document: %v", ErrIssuerUnavailable, iss, err)
	}
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return "", fmt.Errorf("%w: %s's discovery document is not JSON", ErrIssuerUnavailable, iss)
	}
	if doc.Issuer != iss {
		return "", fmt.Errorf("%w: %s's discovery document names issuer %q", ErrIssuerUnavailable, iss, doc.Issuer)
	}
	u, err := url.Parse(doc.JWKSURI)
	if err != nil || u.Host == "" || (u.Scheme != "https" && (u.Scheme != "http" || !p.cfg.AllowInsecureIssuers)) {
		return "", fmt.Errorf("%w: %s's jwks_uri %q is not an https URL", ErrIssuerUnavailable, iss, doc.JWKSURI)
	}
	return doc.JWKSURI, nil
}

// get fetches an issuer URL: 200 and at most maxIssuerResponseBytes.
func (p *openIDProvider) get(u string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.HTTPConnectionTimeout+p.cfg.HTTPReadTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, errors.Unwrap(err) // the url.Error repeats the URL
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxIssuerResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %v", u, err)
	}
	if len(b) > maxIssuerResponseBytes {
		return nil, fmt.Errorf("GET %s: more than %d bytes", u, maxIssuerResponseBytes)
	}
	return b, nil
}
