package e2e

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/auth"
	"github.com/lakegate/lakegate/internal/testcerts"
	"github.com/lakegate/lakegate/protocol/pb"
)

// secureNode is a `lakegate standalone` with TLS only on the Pulsar port,
// HTTPS (and plain HTTP, for /metrics) for admin, and token + TLS
// authentication with authorization.
type secureNode struct {
	*lakegateProc
	certs  *testcerts.Set
	secret []byte
}

func startSecureNode(t *testing.T, extra ...string) *secureNode {
	t.Helper()
	dir := t.TempDir()
	certs, err := testcerts.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := certs.Server("node")
	if err != nil {
		t.Fatal(err)
	}
	secret, _ := auth.NewSecretKey()
	keyFile := filepath.Join(dir, "secret.key")
	os.WriteFile(keyFile, secret, 0o600)
	args := append([]string{"standalone", "--data-dir", filepath.Join(dir, "data"),
		"--pulsar-addr=", "--pulsar-tls-addr", "127.0.0.1:0",
		"--http-addr", "127.0.0.1:0", "--http-tls-addr", "127.0.0.1:0",
		"--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-file", certs.CAFile,
		"--auth-enabled", "--auth-providers", "token,tls", "--auth-token-secret-key", "file://" + keyFile,
		"--auth-super-user-roles", "admin", "--auth-refresh-grace", "1s",
	}, extra...)
	p := startLakegateArgs(t, lakegateBinary(t), args)
	if p.pulsarURL != "" || p.pulsarTLSURL == "" || p.httpsURL == "" {
		t.Fatalf("want a TLS-only Pulsar listener and HTTPS: %q %q %q", p.pulsarURL, p.pulsarTLSURL, p.httpsURL)
	}
	return &secureNode{lakegateProc: p, certs: certs, secret: secret}
}

func (n *secureNode) token(t *testing.T, role string, expiry time.Duration) string {
	t.Helper()
	tok, err := auth.NewToken(auth.TokenSpec{Subject: role, Expiry: expiry}, n.secret, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (n *secureNode) client(t *testing.T, a pulsar.Authentication) (pulsar.Client, error) {
	return n.clientTimeout(t, a, 5*time.Second)
}

// clientTimeout is client with another operation timeout: a refused client
// retries until it passes.
func (n *secureNode) clientTimeout(t *testing.T, a pulsar.Authentication, op time.Duration) (pulsar.Client, error) {
	t.Helper()
	cl, err := pulsar.NewClient(pulsar.ClientOptions{
		URL: n.pulsarTLSURL, TLSTrustCertsFilePath: n.certs.CAFile, Authentication: a,
		OperationTimeout: op, ConnectionTimeout: 5 * time.Second,
		Logger: plog.DefaultNopLogger(),
	})
	if err == nil {
		t.Cleanup(cl.Close)
	}
	return cl, err
}

func (n *secureNode) admin(t *testing.T, token string) pulsaradmin.Client {
	t.Helper()
	a, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: n.httpsURL, TLSTrustCertsFilePath: n.certs.CAFile, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// wantRefused checks err is a refusal naming want (AuthenticationError,
// AuthorizationError, …).
func wantRefused(t *testing.T, what string, err error, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("%s: %v, want %s", what, err, want)
	}
}

// TestSecurity: TLS with token and mTLS authentication and Pulsar's
// authorization, with the Go client and pulsaradmin: grants allow exactly
// what they say, and every bad credential is refused with a reason.
func TestSecurity(t *testing.T) {
	n := startSecureNode(t)
	ctx := ctxFor(t, 2*time.Minute)
	admin := n.admin(t, n.token(t, "admin", time.Hour))

	// The superuser sets up a tenant with an admin role, a namespace and
	// grants.
	if err := admin.Tenants().Create(utils.TenantData{Name: "acme", AdminRoles: []string{"acme-admin"}, AllowedClusters: []string{"standalone"}}); err != nil {
		t.Fatal(err)
	}
	tenantAdmin := n.admin(t, n.token(t, "acme-admin", time.Hour))
	ns, _ := utils.GetNamespaceName("acme/ns")
	if err := tenantAdmin.Namespaces().CreateNamespace("acme/ns"); err != nil {
		t.Fatalf("tenant admin creates a namespace: %v", err)
	}
	if err := tenantAdmin.Namespaces().GrantNamespacePermission(*ns, "writer", []utils.AuthAction{"produce"}); err != nil {
		t.Fatal(err)
	}
	if err := tenantAdmin.Namespaces().GrantNamespacePermission(*ns, "reader", []utils.AuthAction{"consume"}); err != nil {
		t.Fatal(err)
	}
	perms, err := admin.Namespaces().GetNamespacePermissions(*ns)
	if err != nil || len(perms["writer"]) != 1 || len(perms["reader"]) != 1 {
		t.Fatalf("namespace permissions: %v %v", perms, err)
	}
	const topic = "persistent://acme/ns/orders"
	if err := tenantAdmin.Topics().Create(admTopic(t, topic), 0); err != nil {
		t.Fatal(err)
	}

	t.Run("TokenGrants", func(t *testing.T) {
		writer, err := n.client(t, pulsar.NewAuthenticationToken(n.token(t, "writer", time.Hour)))
		if err != nil {
			t.Fatal(err)
		}
		p, err := writer.CreateProducer(pulsar.ProducerOptions{Topic: topic})
		if err != nil {
			t.Fatalf("writer produces: %v", err)
		}
		defer p.Close()
		for i := range 10 {
			if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(strconv.Itoa(i))}); err != nil {
				t.Fatal(err)
			}
		}
		_, err = writer.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "w"})
		wantRefused(t, "writer consumes", err, "AuthorizationError")

		reader, err := n.client(t, pulsar.NewAuthenticationToken(n.token(t, "reader", time.Hour)))
		if err != nil {
			t.Fatal(err)
		}
		c, err := reader.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "r", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
		if err != nil {
			t.Fatalf("reader consumes: %v", err)
		}
		defer c.Close()
		for range 10 {
			m, err := c.Receive(ctx)
			if err != nil {
				t.Fatal(err)
			}
			c.Ack(m)
		}
		_, err = reader.CreateProducer(pulsar.ProducerOptions{Topic: topic})
		wantRefused(t, "reader produces", err, "AuthorizationError")

		stranger, err := n.client(t, pulsar.NewAuthenticationToken(n.token(t, "stranger", time.Hour)))
		if err != nil {
			t.Fatal(err)
		}
		_, err = stranger.CreateProducer(pulsar.ProducerOptions{Topic: topic})
		wantRefused(t, "a role without grants", err, "AuthorizationError")
	})

	t.Run("BadCredentials", func(t *testing.T) {
		other, _ := auth.NewSecretKey()
		wrongKey, _ := auth.NewToken(auth.TokenSpec{Subject: "admin"}, other, nil, "")
		good := n.token(t, "writer", time.Hour)
		parts := strings.Split(good, ".")
		tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"admin"}`)) + "." + parts[2]
		none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`)) + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"admin"}`)) + "."
		cases := map[string]pulsar.Authentication{
			"wrong key":      pulsar.NewAuthenticationToken(wrongKey),
			"tampered":       pulsar.NewAuthenticationToken(tampered),
			"alg none":       pulsar.NewAuthenticationToken(none),
			"expired":        pulsar.NewAuthenticationToken(n.token(t, "writer", -time.Minute)),
			"no credentials": nil,
		}
		for name, a := range cases {
			cl, err := n.clientTimeout(t, a, time.Second)
			if err == nil {
				_, err = cl.CreateProducer(pulsar.ProducerOptions{Topic: topic})
			}
			wantRefused(t, name, err, "") // refused, one way or another
			if err == nil {
				t.Fatalf("%s: accepted", name)
			}
		}
		// Over the raw protocol the refusal is AuthenticationError with a
		// reason, and the connection closes.
		c := rawTLS(t, n)
		r := c.connectWith("token", []byte(wrongKey))
		if r.GetType().String() != "ERROR" || r.GetError().GetError().String() != "AuthenticationError" || r.GetError().GetMessage() == "" {
			t.Fatalf("raw CONNECT with a bad token: %v", r)
		}
		c.expectClosed()
		// A plain client on the TLS-only port fails at once.
		plain, err := pulsar.NewClient(pulsar.ClientOptions{URL: strings.Replace(n.pulsarTLSURL, "pulsar+ssl", "pulsar", 1),
			OperationTimeout: 3 * time.Second, ConnectionTimeout: 3 * time.Second, Logger: plog.DefaultNopLogger()})
		if err == nil {
			defer plain.Close()
			_, err = plain.CreateProducer(pulsar.ProducerOptions{Topic: topic})
		}
		if err == nil {
			t.Fatal("a plain client was served on the TLS port")
		}
	})

	t.Run("MutualTLS", func(t *testing.T) {
		cert, key, err := n.certs.Client("reader-cert", "reader")
		if err != nil {
			t.Fatal(err)
		}
		cl, err := n.client(t, pulsar.NewAuthenticationTLS(cert, key))
		if err != nil {
			t.Fatal(err)
		}
		c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "mtls", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
		if err != nil {
			t.Fatalf("mTLS reader consumes: %v", err)
		}
		c.Close()
		_, err = cl.CreateProducer(pulsar.ProducerOptions{Topic: topic})
		wantRefused(t, "mTLS reader produces", err, "AuthorizationError")
		// A certificate from another CA does not pass the handshake.
		otherCA, _ := testcerts.New(t.TempDir())
		bcert, bkey, _ := otherCA.Client("rogue", "admin")
		rogue, err := n.clientTimeout(t, pulsar.NewAuthenticationTLS(bcert, bkey), time.Second)
		if err == nil {
			_, err = rogue.CreateProducer(pulsar.ProducerOptions{Topic: topic})
		}
		if err == nil {
			t.Fatal("a certificate of another CA was accepted")
		}
	})

	t.Run("Admin", func(t *testing.T) {
		anon := n.admin(t, "")
		_, err := anon.Tenants().List()
		wantCode(t, "no token", err, http.StatusUnauthorized)
		_, err = n.admin(t, n.token(t, "reader", time.Hour)).Tenants().List()
		wantCode(t, "a non-superuser lists tenants", err, http.StatusForbidden)
		err = n.admin(t, n.token(t, "reader", time.Hour)).Topics().Create(admTopic(t, "persistent://acme/ns/new"), 0)
		wantCode(t, "a reader creates a topic", err, http.StatusForbidden)
		if _, err := n.admin(t, n.token(t, "reader", time.Hour)).Topics().GetStats(admTopic(t, topic)); err != nil {
			t.Fatalf("a reader reads stats: %v", err)
		}
		if _, err := n.admin(t, n.token(t, "acme-admin", time.Hour)).Namespaces().GetNamespaces("acme"); err != nil {
			t.Fatalf("the tenant admin lists its namespaces: %v", err)
		}
		_, err = n.admin(t, n.token(t, "acme-admin", time.Hour)).Namespaces().GetNamespaces("public")
		wantCode(t, "a tenant admin in another tenant", err, http.StatusForbidden)
		// The health check appends to the node's heartbeat log: superusers
		// only, as Pulsar's brokers healthcheck.
		err = n.admin(t, n.token(t, "reader", time.Hour)).Brokers().HealthCheck()
		wantCode(t, "a reader runs the health check", err, http.StatusForbidden)
		if err := admin.Brokers().HealthCheck(); err != nil {
			t.Fatalf("a superuser runs the health check: %v", err)
		}
		// Revoked: refused again.
		tenantAdmin := n.admin(t, n.token(t, "acme-admin", time.Hour))
		ns, _ := utils.GetNamespaceName("acme/ns")
		if err := tenantAdmin.Namespaces().RevokeNamespacePermission(*ns, "writer"); err != nil {
			t.Fatal(err)
		}
		writer, _ := n.client(t, pulsar.NewAuthenticationToken(n.token(t, "writer", time.Hour)))
		_, err = writer.CreateProducer(pulsar.ProducerOptions{Topic: topic})
		wantRefused(t, "revoked writer", err, "AuthorizationError")
		// Failures are counted by reason, without credentials.
		metrics := httpGet(t, n.httpURL+"/metrics")
		for _, want := range []string{`lakegate_auth_failures_total{reason="unauthorized"}`, `lakegate_auth_failures_total{reason="no_credentials"}`, `lakegate_auth_failures_total{reason="invalid"}`} {
			if !strings.Contains(metrics, want) {
				t.Fatalf("metrics lack %s:\n%s", want, grepLines(metrics, "auth_failures"))
			}
		}
		if strings.Contains(metrics, n.token(t, "writer", time.Hour)[:20]) {
			t.Fatal("a token in the metrics")
		}
	})

	t.Run("IcebergCatalogAuthenticates", func(t *testing.T) {
		// On a node with authentication the Iceberg REST catalog takes the
		// node's tokens; what a role then sees follows its grants
		// (TestIcebergCatalogGrants).
		status := func(token string) int {
			req, _ := http.NewRequest(http.MethodGet, n.httpURL+"/iceberg/v1/config", nil)
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		for _, c := range []struct {
			who, token string
			want       int
		}{
			{"anonymous", "", http.StatusUnauthorized},
			{"a garbage token", "not-a-jwt", http.StatusUnauthorized},
			{"a non-superuser", n.token(t, "writer", time.Hour), http.StatusOK},
			{"the superuser", n.token(t, "admin", time.Hour), http.StatusOK},
		} {
			if got := status(c.token); got != c.want {
				t.Errorf("%s: GET /iceberg/v1/config = %d, want %d", c.who, got, c.want)
			}
		}
	})

	t.Run("ExpiryOnALiveConnection", func(t *testing.T) {
		// A client whose token expires gets AUTH_CHALLENGE and answers with a
		// fresh one: the connection lives on.
		var calls atomic.Int32
		fresh := pulsar.NewAuthenticationTokenFromSupplier(func() (string, error) {
			calls.Add(1)
			return n.token(t, "admin", 2*time.Second), nil
		})
		cl, err := n.client(t, fresh)
		if err != nil {
			t.Fatal(err)
		}
		p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		before := calls.Load()
		waitFor(t, ctx, "a refresh", func() bool { return calls.Load() > before+1 })
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("after refresh")}); err != nil {
			t.Fatalf("send after the token was refreshed: %v", err)
		}
		// A client that keeps sending the expired token is disconnected.
		stale := n.token(t, "admin", 2*time.Second)
		scl, err := n.client(t, pulsar.NewAuthenticationTokenFromSupplier(func() (string, error) { return stale, nil }))
		if err != nil {
			t.Fatal(err)
		}
		sp, err := scl.CreateProducer(pulsar.ProducerOptions{Topic: topic, SendTimeout: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer sp.Close()
		expired := func() int {
			m := grepLines(httpGet(t, n.httpURL+"/metrics"), `lakegate_auth_failures_total{reason="expired"}`)
			v, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(m, `lakegate_auth_failures_total{reason="expired"}`)))
			return v
		}
		before = int32(expired())
		waitFor(t, ctx, "the stale client's disconnection", func() bool { return int32(expired()) > before })
		if _, err := sp.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("stale")}); err == nil {
			t.Fatal("a client with an expired token still sends")
		}
	})
}

func wantCode(t *testing.T, what string, err error, code int) {
	t.Helper()
	t.Logf("%s:", what)
	admWantCode(t, err, code)
}

// rawTLS opens a raw protocol connection to the node's TLS port.
func rawTLS(t *testing.T, n *secureNode) *rawConn {
	t.Helper()
	pool, err := loadPool(n.certs.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(n.pulsarTLSURL, "pulsar+ssl://")
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{RootCAs: pool, ServerName: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	return &rawConn{t: t, c: conn, br: bufio.NewReader(conn)}
}

func loadPool(caFile string) (*x509.CertPool, error) {
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("no certificate in %s", caFile)
	}
	return pool, nil
}

// connectWith sends CONNECT with credentials and returns the answer.
func (r *rawConn) connectWith(method string, data []byte) *pb.BaseCommand {
	r.t.Helper()
	r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: &pb.CommandConnect{
		ClientVersion: proto.String("raw-test"), ProtocolVersion: proto.Int32(21),
		AuthMethodName: proto.String(method), AuthData: data,
	}})
	return r.read()
}

// TestSecurityCluster: three nodes with TLS-only Pulsar listeners, HTTPS and
// token authentication. Lookups send clients to owners' pulsar+ssl URLs,
// admin requests forwarded between members carry the nodes' own token, and
// proxy mode relays over TLS.
func TestSecurityCluster(t *testing.T) {
	for _, proxy := range []bool{false, true} {
		t.Run(map[bool]string{false: "Redirect", true: "Proxy"}[proxy], func(t *testing.T) {
			dir := t.TempDir()
			certs, err := testcerts.New(dir)
			if err != nil {
				t.Fatal(err)
			}
			cert, key, _ := certs.Server("node")
			secret, _ := auth.NewSecretKey()
			keyFile := filepath.Join(dir, "secret.key")
			os.WriteFile(keyFile, secret, 0o600)
			tok := func(role string) string {
				s, _ := auth.NewToken(auth.TokenSpec{Subject: role}, secret, nil, "")
				return s
			}
			flags := []string{"--pulsar-addr=", "--pulsar-tls-addr", "127.0.0.1:0", "--http-tls-addr", "127.0.0.1:0",
				"--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-file", certs.CAFile,
				"--auth-enabled", "--auth-token-secret-key", "file://" + keyFile, "--auth-super-user-roles", "admin,lakegate-node",
				"--auth-broker-client-token", tok("lakegate-node"), "--auth-proxy-roles", "lakegate-node",
				fmt.Sprintf("--cluster-proxy-lookups=%v", proxy)}
			c := startLGCluster(t, 3, "file://"+filepath.ToSlash(t.TempDir()), flags...)
			ctx := ctxFor(t, 2*time.Minute)
			const topic = "persistent://public/default/secure-cluster"
			adm, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: c.nodes[0].httpsURL, TLSTrustCertsFilePath: certs.CAFile, Token: tok("admin")})
			if err != nil {
				t.Fatal(err)
			}
			if err := adm.Topics().Create(admTopic(t, topic), 6); err != nil {
				t.Fatal(err)
			}
			ns, _ := utils.GetNamespaceName("public/default")
			if err := adm.Namespaces().GrantNamespacePermission(*ns, "app", []utils.AuthAction{"produce", "consume"}); err != nil {
				t.Fatal(err)
			}
			url := c.nodes[0].pulsarTLSURL // proxy mode: the only address the client knows
			if !proxy {
				// A node that is not in proxy mode relays nothing.
				pool, _ := loadPool(certs.CAFile)
				conn, err := tls.Dial("tcp", strings.TrimPrefix(c.nodes[0].pulsarTLSURL, "pulsar+ssl://"), &tls.Config{RootCAs: pool, ServerName: "localhost"})
				if err != nil {
					t.Fatal(err)
				}
				conn.SetDeadline(time.Now().Add(20 * time.Second))
				r := &rawConn{t: t, c: conn, br: bufio.NewReader(conn)}
				r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: &pb.CommandConnect{
					ClientVersion: proto.String("raw-test"), ProtocolVersion: proto.Int32(21),
					AuthMethodName: proto.String("token"), AuthData: []byte(tok("app")),
					ProxyToBrokerUrl: proto.String(c.nodes[1].pulsarTLSURL)}})
				if got := r.read(); got.GetType() != pb.BaseCommand_ERROR || got.GetError().GetError() != pb.ServerError_NotAllowedError {
					t.Fatalf("a CONNECT naming another member, without proxy mode: %v", got)
				}
				conn.Close()
			}
			if !proxy {
				var hosts []string
				for _, n := range c.nodes {
					hosts = append(hosts, strings.TrimPrefix(n.pulsarTLSURL, "pulsar+ssl://"))
				}
				url = "pulsar+ssl://" + strings.Join(hosts, ",")
			}
			cl, err := pulsar.NewClient(pulsar.ClientOptions{URL: url, TLSTrustCertsFilePath: certs.CAFile,
				Authentication: pulsar.NewAuthenticationToken(tok("app")), OperationTimeout: 30 * time.Second, Logger: plog.DefaultNopLogger()})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared,
				SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
			if err != nil {
				t.Fatal(err)
			}
			defer cons.Close()
			p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			for i := range 120 {
				if _, err := p.Send(ctx, &pulsar.ProducerMessage{Key: strconv.Itoa(i), Payload: []byte(strconv.Itoa(i))}); err != nil {
					t.Fatal(err)
				}
			}
			parts := map[int32]bool{}
			for range 120 {
				m, err := cons.Receive(ctx)
				if err != nil {
					t.Fatal(err)
				}
				parts[m.ID().PartitionIdx()] = true
				cons.Ack(m)
			}
			if len(parts) != 6 {
				t.Fatalf("messages from %d partitions, want 6", len(parts))
			}
			// Through another node, with the app's own token: the partitions
			// owned elsewhere are reached with the nodes' token.
			appAdm, _ := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: c.nodes[1].httpsURL, TLSTrustCertsFilePath: certs.CAFile, Token: tok("app")})
			st, err := appAdm.Topics().GetPartitionedStats(admTopic(t, topic), true)
			if err != nil || len(st.Partitions) != 6 || len(st.Subscriptions["s"].Consumers) != 6 {
				t.Fatalf("partitioned stats through node 1: %v (%d partitions)", err, len(st.Partitions))
			}
		})
	}
}
