package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/lakegate/lakegate/internal/testissuer"
)

// oauthNode is a secured node (startSecureNode: TLS, token and tls
// providers) that also accepts the access tokens of a test OpenID Connect
// issuer (provider openid), as Pulsar users deploy AuthenticationOAuth2.
type oauthNode struct {
	*secureNode
	issuer *testissuer.Issuer
	keys   string // directory of the clients' credentials files
}

func startOAuthNode(t *testing.T) *oauthNode {
	t.Helper()
	is, err := testissuer.Start(testissuer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { is.Close() })
	keys := t.TempDir()
	for _, c := range []testissuer.Client{
		{ID: "orders-app", Secret: "s3cret-orders", Subject: "orders"},
		{ID: "ops", Secret: "s3cret-ops", Subject: "admin"},
		{ID: "stranger", Secret: "s3cret-stranger"},
	} {
		is.AddClient(c)
		if err := os.WriteFile(filepath.Join(keys, c.ID+".json"), is.CredentialsJSON(c.ID), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	n := startSecureNode(t, "--auth-providers", "token,openid,tls",
		"--auth-open-id-allowed-token-issuers", is.URL, "--auth-open-id-allowed-audiences", "lakegate",
		// The test issuer serves http on loopback.
		"--auth-open-id-require-issuers-use-https=false",
		"--auth-open-id-key-id-cache-miss-refresh-seconds", "1")
	return &oauthNode{secureNode: n, issuer: is, keys: keys}
}

// accessToken fetches an access token from the issuer's token endpoint, as
// the clients do (client credentials in a form body).
func (n *oauthNode) accessToken(t *testing.T, id, secret, audience string) string {
	t.Helper()
	resp, err := http.PostForm(n.issuer.URL+"/token", url.Values{"grant_type": {"client_credentials"},
		"client_id": {id}, "client_secret": {secret}, "audience": {audience}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tr struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tr); err != nil || resp.StatusCode != http.StatusOK || tr.AccessToken == "" {
		t.Fatalf("token endpoint: %s %v", resp.Status, err)
	}
	return tr.AccessToken
}

// oauth2 is the Go client's AuthenticationOAuth2 for a client of the issuer.
func (n *oauthNode) oauth2(id, audience string) pulsar.Authentication {
	return pulsar.NewAuthenticationOAuth2(map[string]string{
		"type":       "client_credentials",
		"issuerUrl":  n.issuer.URL,
		"audience":   audience,
		"privateKey": "file://" + filepath.Join(n.keys, id+".json"),
	})
}

// TestOAuth2: the Go client's AuthenticationOAuth2 (client credentials
// against an OpenID Connect issuer the test starts) works against a node
// with the openid provider, next to static tokens: the access token's
// subject is the role grants apply to; tokens of another issuer or
// audience, expired ones, "alg: none" and HS256 signed with the public key
// are refused; a rotated key is accepted after the node fetches the JWKS
// again, and a withdrawn one refused.
func TestOAuth2(t *testing.T) {
	n := startOAuthNode(t)
	ctx := ctxFor(t, 3*time.Minute)
	admin := n.admin(t, n.token(t, "admin", time.Hour))
	ns, _ := utils.GetNamespaceName("public/default")
	if err := admin.Namespaces().GrantNamespacePermission(*ns, "orders", []utils.AuthAction{"produce", "consume"}); err != nil {
		t.Fatal(err)
	}
	topic := "persistent://public/default/oauth-orders"

	t.Run("ClientCredentials", func(t *testing.T) {
		cl, err := n.client(t, n.oauth2("orders-app", "lakegate"))
		if err != nil {
			t.Fatal(err)
		}
		p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic})
		if err != nil {
			t.Fatalf("OAuth2 client with a grant produces: %v", err)
		}
		defer p.Close()
		c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
		if err != nil {
			t.Fatalf("OAuth2 client with a grant consumes: %v", err)
		}
		defer c.Close()
		for i := range 10 {
			if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(strconv.Itoa(i))}); err != nil {
				t.Fatal(err)
			}
		}
		for range 10 {
			m, err := c.Receive(ctx)
			if err != nil {
				t.Fatal(err)
			}
			c.Ack(m)
		}

		// The role is the token's subject: a client of the same issuer
		// whose subject has no grant is authenticated but not authorized.
		st, err := n.clientTimeout(t, n.oauth2("stranger", "lakegate"), 2*time.Second)
		if err == nil {
			_, err = st.CreateProducer(pulsar.ProducerOptions{Topic: topic})
		}
		wantRefused(t, "an OAuth2 client without grants", err, "AuthorizationError")

		// The admin API takes the access tokens too, as a bearer token (an
		// access token of the client whose subject is the superuser).
		ops := n.admin(t, n.accessToken(t, "ops", "s3cret-ops", "lakegate"))
		perms, err := ops.Namespaces().GetNamespacePermissions(*ns)
		if err != nil || len(perms["orders"]) != 2 {
			t.Fatalf("superuser over OAuth2 reads the grants: %v %v", perms, err)
		}

		// A wrong client secret: the issuer refuses, the client gets no
		// token and no connection.
		bad := filepath.Join(t.TempDir(), "bad.json")
		os.WriteFile(bad, []byte(strings.Replace(string(n.issuer.CredentialsJSON("orders-app")), "s3cret-orders", "guess", 1)), 0o600)
		badCl, err := n.clientTimeout(t, pulsar.NewAuthenticationOAuth2(map[string]string{"type": "client_credentials",
			"issuerUrl": n.issuer.URL, "audience": "lakegate", "privateKey": "file://" + bad}), time.Second)
		if err == nil {
			_, err = badCl.CreateProducer(pulsar.ProducerOptions{Topic: topic})
		}
		if err == nil {
			t.Fatal("a client with a wrong secret produced")
		}
	})

	t.Run("RefreshOnALiveConnection", func(t *testing.T) {
		// Access tokens that expire: the node challenges the connection, the
		// client fetches a fresh token from the issuer and answers; the
		// connection lives on (no "expired" closure).
		n.issuer.SetTTL(2 * time.Second)
		defer n.issuer.SetTTL(time.Hour)
		expired := func() int {
			m := grepLines(httpGet(t, n.httpURL+"/metrics"), `lakegate_auth_failures_total{reason="expired"}`)
			v, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(m, `lakegate_auth_failures_total{reason="expired"}`)))
			return v
		}
		closedBefore := expired()
		cl, err := n.client(t, n.oauth2("orders-app", "lakegate"))
		if err != nil {
			t.Fatal(err)
		}
		p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		before := n.issuer.TokenRequests()
		waitFor(t, ctx, "two refreshes from the issuer", func() bool { return n.issuer.TokenRequests() >= before+2 })
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("after refresh")}); err != nil {
			t.Fatalf("send after the access token was refreshed: %v", err)
		}
		if got := expired(); got != closedBefore {
			t.Fatalf("%d connections closed for expired credentials, want none", got-closedBefore)
		}
	})

	t.Run("BadTokens", func(t *testing.T) {
		// The access token the issuer gives for another audience.
		wrongAud, err := n.clientTimeout(t, n.oauth2("orders-app", "another-service"), time.Second)
		if err == nil {
			_, err = wrongAud.CreateProducer(pulsar.ProducerOptions{Topic: topic})
		}
		if err == nil {
			t.Fatal("a token for another audience was accepted")
		}
		other, err := testissuer.Start(testissuer.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		good := testissuer.Claims{Subject: "admin", Audience: "lakegate", Expiry: time.Hour}
		with := func(edit func(*testissuer.Claims)) testissuer.Claims {
			c := good
			edit(&c)
			return c
		}
		cases := []struct {
			name   string
			is     *testissuer.Issuer
			claims testissuer.Claims
			opts   testissuer.MintOptions
			reason string
		}{
			{"another issuer", other, good, testissuer.MintOptions{}, "not an allowed issuer"},
			{"another issuer claiming ours", other, with(func(c *testissuer.Claims) { c.Issuer = n.issuer.URL }), testissuer.MintOptions{KID: n.issuer.CurrentKID()}, "signature"},
			{"wrong audience", n.issuer, with(func(c *testissuer.Claims) { c.Audience = "another-service" }), testissuer.MintOptions{}, "audience"},
			{"expired", n.issuer, with(func(c *testissuer.Claims) { c.Expiry = -time.Minute }), testissuer.MintOptions{}, "expired"},
			{"alg none", n.issuer, good, testissuer.MintOptions{Alg: "none"}, "algorithm"},
			{"HS256 with the public key", n.issuer, good, testissuer.MintOptions{Alg: "HS256"}, "algorithm"},
			{"unknown kid", n.issuer, good, testissuer.MintOptions{KID: "no-such-key"}, "no key"},
		}
		for _, tc := range cases {
			tok, err := tc.is.Mint(tc.claims, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			c := rawTLS(t, n.secureNode)
			r := c.connectWith("token", []byte(tok))
			if r.GetType().String() != "ERROR" || r.GetError().GetError().String() != "AuthenticationError" ||
				!strings.Contains(r.GetError().GetMessage(), tc.reason) {
				t.Errorf("%s: %v, want AuthenticationError naming %q", tc.name, r, tc.reason)
				continue
			}
			c.expectClosed()
		}
	})

	t.Run("KeyRotation", func(t *testing.T) {
		oldKID := n.issuer.CurrentKID()
		oldTok, err := n.issuer.Mint(testissuer.Claims{Subject: "orders", Audience: "lakegate", Expiry: time.Hour}, testissuer.MintOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r := rawTLS(t, n.secureNode).connectWith("token", []byte(oldTok)); r.GetType().String() != "CONNECTED" {
			t.Fatalf("a token of the current key: %v", r)
		}
		fetches := n.issuer.JWKSFetches()
		if _, err := n.issuer.Rotate(); err != nil {
			t.Fatal(err)
		}
		n.issuer.Unpublish(oldKID)
		// A new client gets a token of the new key: the node fetches the
		// JWKS again (at most once a second here) and accepts it.
		waitFor(t, ctx, "a token of the rotated key accepted", func() bool {
			cl, err := n.clientTimeout(t, n.oauth2("orders-app", "lakegate"), 2*time.Second)
			if err != nil {
				return false
			}
			defer cl.Close()
			p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic})
			if err != nil {
				return false
			}
			_, err = p.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte("rotated")})
			p.Close()
			return err == nil
		})
		if n.issuer.JWKSFetches() <= fetches {
			t.Fatal("the rotated key was accepted without fetching the JWKS")
		}
		// The withdrawn key is no longer in the JWKS the node holds.
		r := rawTLS(t, n.secureNode).connectWith("token", []byte(oldTok))
		if r.GetType().String() != "ERROR" || !strings.Contains(r.GetError().GetMessage(), "no key") {
			t.Fatalf("a token of the withdrawn key: %v, want AuthenticationError (no key)", r)
		}
	})
}
