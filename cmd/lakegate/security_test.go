package main

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lakegate/lakegate/auth"
)

// securityFrom loads a standalone configuration from flags and builds its
// security as the node does.
func securityFrom(t *testing.T, args ...string) (*security, error) {
	t.Helper()
	c, err := loadConfig("standalone", args, nil)
	if err != nil {
		return nil, err
	}
	return newSecurity(c)
}

// writeSecret writes a secret key of n bytes and returns its file:// URL.
func writeSecret(t *testing.T, key []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "secret.key")
	if err := os.WriteFile(path, key, 0o600); err != nil {
		t.Fatal(err)
	}
	return "file://" + path
}

// An HS key shorter than 256 bits stops the node at start, naming the key;
// `lakegate token create-secret-key` makes 256-bit ones (raw and base64).
func TestShortSecretKeyRefusedAtStart(t *testing.T) {
	for _, n := range []int{8, 16, 31} {
		_, err := securityFrom(t, "--auth-enabled", "--auth-token-secret-key", writeSecret(t, make([]byte, n)))
		if err == nil || !strings.Contains(err.Error(), "auth.tokenSecretKey") || !strings.Contains(err.Error(), "256 bits") {
			t.Fatalf("%d-byte key: %v, want an error naming auth.tokenSecretKey and 256 bits", n, err)
		}
	}
	var raw, b64 bytes.Buffer
	if err := runToken([]string{"create-secret-key"}, &raw); err != nil || raw.Len() != 32 {
		t.Fatalf("create-secret-key: %d bytes, %v; want 32", raw.Len(), err)
	}
	if err := runToken([]string{"create-secret-key", "--base64"}, &b64); err != nil {
		t.Fatal(err)
	}
	if k, err := base64.StdEncoding.DecodeString(b64.String()); err != nil || len(k) != 32 {
		t.Fatalf("create-secret-key --base64: %d bytes, %v; want 32", len(k), err)
	}
	sec, err := securityFrom(t, "--auth-enabled", "--auth-token-secret-key", writeSecret(t, raw.Bytes()))
	if err != nil || sec.authn == nil {
		t.Fatalf("a key from create-secret-key: %v", err)
	}
}

// auth.tokenAudienceClaim / auth.tokenAudience are Pulsar's
// tokenAudienceClaim / tokenAudience: the named claim (a string or a list)
// must hold the audience.
func TestTokenAudienceClaim(t *testing.T) {
	key, _ := auth.NewSecretKey()
	url := writeSecret(t, key)
	sign := func(claims jwt.MapClaims) []byte {
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return []byte(s)
	}
	sec, err := securityFrom(t, "--auth-enabled", "--auth-token-secret-key", url,
		"--auth-token-audience-claim", "x-aud", "--auth-token-audience", "lakegate")
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		claims jwt.MapClaims
		ok     bool
	}{
		"claim holds the audience":         {jwt.MapClaims{"sub": "a", "x-aud": "lakegate"}, true},
		"claim lists the audience":         {jwt.MapClaims{"sub": "a", "x-aud": []string{"other", "lakegate"}}, true},
		"claim holds another audience":     {jwt.MapClaims{"sub": "a", "x-aud": "other"}, false},
		"audience only in aud":             {jwt.MapClaims{"sub": "a", "aud": "lakegate"}, false},
		"no audience":                      {jwt.MapClaims{"sub": "a"}, false},
		"claim is not a string or strings": {jwt.MapClaims{"sub": "a", "x-aud": 7}, false},
	} {
		id, err := sec.authn.Authenticate(auth.MethodToken, sign(tc.claims), nil)
		if tc.ok != (err == nil) || (tc.ok && id.Role != "a") {
			t.Errorf("%s: %+v %v, want ok=%v", name, id, err, tc.ok)
		}
	}

	// The default claim is aud, as today's auth.tokenAudience checked.
	sec, err = securityFrom(t, "--auth-enabled", "--auth-token-secret-key", url, "--auth-token-audience", "lakegate")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sec.authn.Authenticate(auth.MethodToken, sign(jwt.MapClaims{"sub": "a", "aud": []string{"lakegate"}}), nil); err != nil {
		t.Errorf("aud holds the audience: %v", err)
	}
	if _, err := sec.authn.Authenticate(auth.MethodToken, sign(jwt.MapClaims{"sub": "a", "aud": "other"}), nil); err == nil {
		t.Error("a token for another audience accepted")
	}

	// A claim without an audience to find in it is a mistake (Pulsar refuses
	// to start too).
	_, err = securityFrom(t, "--auth-enabled", "--auth-token-secret-key", url, "--auth-token-audience-claim", "x-aud")
	if err == nil || !strings.Contains(err.Error(), "auth.tokenAudience") {
		t.Fatalf("tokenAudienceClaim without tokenAudience: %v, want an error naming auth.tokenAudience", err)
	}
}

// The openid provider's keys keep Pulsar's names (auth.openID*), and a
// configuration it cannot work with stops the node naming the key.
func TestOpenIDConfig(t *testing.T) {
	base := []string{"--auth-enabled", "--auth-providers", "openid"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "auth.openIDAllowedTokenIssuers"},
		{[]string{"--auth-open-id-allowed-token-issuers", "https://idp.example"}, "auth.openIDAllowedAudiences"},
		{[]string{"--auth-open-id-allowed-token-issuers", "http://idp.example", "--auth-open-id-allowed-audiences", "lakegate"}, "https"},
		{[]string{"--auth-open-id-allowed-token-issuers", "https://idp.example", "--auth-open-id-allowed-audiences", "lakegate",
			"--auth-open-id-key-id-cache-miss-refresh-seconds", "0"}, "auth.openIDKeyIdCacheMissRefreshSeconds"},
		{[]string{"--auth-providers", "openidd"}, "openidd"},
	} {
		_, err := securityFrom(t, append(append([]string(nil), base...), tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error naming %s", tc.args, err, tc.want)
		}
	}
	c, err := loadConfig("standalone", nil, []string{"LAKEGATE_AUTH_ENABLED=true", "LAKEGATE_AUTH_PROVIDERS=openid",
		"LAKEGATE_AUTH_OPEN_ID_ALLOWED_TOKEN_ISSUERS=https://idp.example/realms/a, https://idp.example/realms/b",
		"LAKEGATE_AUTH_OPEN_ID_ALLOWED_AUDIENCES=lakegate", "LAKEGATE_AUTH_OPEN_ID_ROLE_CLAIM=groups",
		"LAKEGATE_AUTH_OPEN_ID_ACCEPTED_TIME_LEEWAY_SECONDS=30"})
	if err != nil {
		t.Fatal(err)
	}
	oc := openIDConfig(c)
	if len(oc.AllowedTokenIssuers) != 2 || oc.RoleClaim != "groups" || oc.AcceptedTimeLeeway != 30*time.Second ||
		oc.KeyIDCacheMissRefresh != 5*time.Minute || oc.CacheExpiration != 24*time.Hour || oc.HTTPReadTimeout != 10*time.Second ||
		oc.AllowInsecureIssuers || oc.CacheSize != 5 {
		t.Fatalf("openid configuration from the environment and defaults: %+v", oc)
	}
	if sec, err := newSecurity(c); err != nil || sec.authn.Methods()[0] != auth.MethodToken {
		t.Fatalf("openid provider: %v", err)
	}
}
