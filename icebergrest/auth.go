package icebergrest

// Authentication of the REST catalog: OAuth2 client credentials exchanged
// at POST /v1/oauth/tokens for a bearer token (what pyiceberg, Spark and
// iceberg-go send when given credential=<id>:<secret>), and any other
// bearer token a Verify function accepts (lakegate's Pulsar tokens, once
// the node has token authentication). The principal a token names — the
// OAuth client's id, or the token's role — is what Options.Authorizer
// decides on: an OAuth client is a role like any other.
// docs/iceberg-catalog.md, "Auth".

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Auth configures authentication. The zero value refuses everything.
type Auth struct {
	// Clients are the OAuth2 clients: client id → secret.
	Clients map[string]string
	// Key signs and checks the tokens the token endpoint issues (HMAC-SHA256);
	// every node of a cluster must have the same key so a token from one
	// node works on all. Required when Clients is not empty.
	Key []byte
	// TokenTTL is the lifetime of an issued token. Default 1 h.
	TokenTTL time.Duration
	// Verify, when set, is asked about a bearer token that is not one of
	// ours; it returns the principal or an error.
	Verify func(token string) (principal string, err error)
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

func (a *Auth) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// tokenClaims is the signed part of an issued token.
type tokenClaims struct {
	Sub string `json:"sub"`
	Exp int64  `json:"exp"` // Unix seconds
}

// Issue returns a token for client id, valid for TokenTTL.
func (a *Auth) Issue(id string) (string, time.Duration) {
	ttl := a.TokenTTL
	if ttl <= 0 {
		ttl = time.Hour
	}
	body, _ := json.Marshal(tokenClaims{Sub: id, Exp: a.now().Add(ttl).Unix()})
	enc := base64.RawURLEncoding.EncodeToString(body)
	return "lg1." + enc + "." + a.sign(enc), ttl
}

func (a *Auth) sign(s string) string {
	m := hmac.New(sha256.New, a.Key)
	m.Write([]byte(s))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

var errUnauthorized = errors.New("icebergrest: not authorized")

// check returns the principal of a bearer token.
func (a *Auth) check(token string) (string, error) {
	if rest, ok := strings.CutPrefix(token, "lg1."); ok && len(a.Key) > 0 {
		enc, sig, ok := strings.Cut(rest, ".")
		if !ok || !hmac.Equal([]byte(sig), []byte(a.sign(enc))) {
			return "", fmt.Errorf("%w: bad token signature", errUnauthorized)
		}
		b, err := base64.RawURLEncoding.DecodeString(enc)
		var c tokenClaims
		if err != nil || json.Unmarshal(b, &c) != nil {
			return "", fmt.Errorf("%w: malformed token", errUnauthorized)
		}
		if a.now().Unix() >= c.Exp {
			return "", fmt.Errorf("%w: token expired", errUnauthorized)
		}
		return c.Sub, nil
	}
	if a.Verify != nil {
		return a.Verify(token)
	}
	return "", fmt.Errorf("%w: unknown token", errUnauthorized)
}

func (a *Auth) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/oauth/tokens" {
			next.ServeHTTP(w, r)
			return
		}
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			writeError(w, http.StatusUnauthorized, "NotAuthorizedException", "a bearer token is required (POST /v1/oauth/tokens)")
			return
		}
		who, err := a.check(strings.TrimSpace(tok))
		if err != nil {
			writeError(w, http.StatusUnauthorized, "NotAuthorizedException", err.Error())
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, who)))
	})
}

// tokens is POST /v1/oauth/tokens: grant_type=client_credentials with the
// client id and secret in the form (client_id, client_secret) or in HTTP
// basic auth.
func (a *Auth) tokens(w http.ResponseWriter, r *http.Request) {
	oauthError := func(code int, e, desc string) {
		writeJSON(w, code, map[string]string{"error": e, "error_description": desc})
	}
	if err := r.ParseForm(); err != nil {
		oauthError(http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	if gt := r.PostForm.Get("grant_type"); gt != "client_credentials" {
		oauthError(http.StatusBadRequest, "unsupported_grant_type", "only client_credentials is supported")
		return
	}
	id, secret := r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	if u, p, ok := r.BasicAuth(); ok && id == "" {
		id, secret = u, p
	}
	want, ok := a.Clients[id]
	if !ok || len(a.Key) == 0 || subtle.ConstantTimeCompare([]byte(want), []byte(secret)) != 1 {
		oauthError(http.StatusUnauthorized, "invalid_client", "unknown client or wrong secret")
		return
	}
	tok, ttl := a.Issue(id)
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token": tok, "token_type": "bearer", "expires_in": int(ttl.Seconds()),
		"issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
	})
}
