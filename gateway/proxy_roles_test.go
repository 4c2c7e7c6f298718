package gateway

// Proxies (Config.ProxyRoles, auth.go): who may name an original principal,
// whose grants count, and how the forwarded credentials expire; and a
// client certificate's expiry on a live connection.

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/auth"
	"github.com/lakegate/lakegate/engine"
	"github.com/lakegate/lakegate/engine/catalog"
	"github.com/lakegate/lakegate/internal/testcerts"
	"github.com/lakegate/lakegate/meta"
	"github.com/lakegate/lakegate/objstore"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

// startTLSGateway is startMemGateway serving a TLS listener only.
func startTLSGateway(t *testing.T, tlsLn net.Listener, tweak func(*Config)) *Server {
	t.Helper()
	store, err := objstore.Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	ms := meta.NewMem(meta.MemOptions{})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	e, err := engine.New(store, ms, engine.Options{Linger: time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	cat := catalog.New(ms, e, catalog.Options{})
	cfg := Config{Catalog: cat, Logger: quiet, IdleTimeout: time.Minute, Membership: engineMember(t, e, "node", nil, tlsLn)}
	tweak(&cfg)
	srv, err := Serve(nil, cfg, tlsLn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Close()
		cat.Close()
		e.Close()
		ms.Close()
		store.Close()
	})
	return srv
}

// proxyConnect is a CONNECT as a proxy sends it: its own token, and the
// client it speaks for.
func proxyConnect(token, principal, origMethod, origData string) *pb.CommandConnect {
	c := &pb.CommandConnect{ClientVersion: proto.String("proxy-test"), ProtocolVersion: proto.Int32(21),
		AuthMethodName: proto.String(auth.MethodToken), AuthData: []byte(token),
		FeatureFlags: &pb.FeatureFlags{SupportsAuthRefresh: proto.Bool(true)}}
	if principal != "" {
		c.OriginalPrincipal = proto.String(principal)
	}
	if origMethod != "" {
		c.OriginalAuthMethod, c.OriginalAuthData = proto.String(origMethod), proto.String(origData)
	}
	return c
}

type testConn struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dialTest(t *testing.T, c net.Conn) *testConn {
	t.Helper()
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	return &testConn{t: t, c: c, br: bufio.NewReader(c)}
}

func (c *testConn) write(f protocol.Frame) {
	c.t.Helper()
	if _, err := c.c.Write(frameBytes(c.t, f)); err != nil {
		c.t.Fatal(err)
	}
}

// read is the next command other than PING.
func (c *testConn) read() *pb.BaseCommand {
	c.t.Helper()
	for {
		cmd := readCmd(c.t, c.br)
		if cmd.GetType() != pb.BaseCommand_PING {
			return cmd
		}
	}
}

func (c *testConn) connect(cc *pb.CommandConnect) *pb.BaseCommand {
	c.t.Helper()
	c.write(cmdFrame(pb.BaseCommand_CONNECT, func(b *pb.BaseCommand) { b.Connect = cc }))
	return c.read()
}

func TestProxyRoles(t *testing.T) {
	secret, err := auth.NewSecretKey()
	if err != nil {
		t.Fatal(err)
	}
	a, err := auth.New(auth.Config{Providers: []string{auth.MethodToken}, Token: auth.TokenConfig{SecretKey: secret}})
	if err != nil {
		t.Fatal(err)
	}
	srv := startMemGateway(t, func(c *Config) {
		c.Auth, c.Authorization = a, true
		c.SuperUserRoles = []string{"admin", "proxy"}
		c.ProxyRoles = []string{"proxy"}
		c.AuthRefreshGrace = 5 * time.Second
	})
	if err := srv.cfg.Catalog.SetNamespaceProperties(context.Background(), "public/default", map[string]string{permPrefix + "app": "produce,consume"}); err != nil {
		t.Fatal(err)
	}
	tok := func(role string, expiry time.Duration) string {
		s, err := auth.NewToken(auth.TokenSpec{Subject: role, Expiry: expiry}, secret, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	other, _ := auth.NewSecretKey()
	forged, _ := auth.NewToken(auth.TokenSpec{Subject: "app"}, other, nil, "")
	dial := func() *testConn {
		c, err := net.Dial("tcp", srv.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		return dialTest(t, c)
	}
	const topic = "persistent://public/default/proxied"

	// Refused at CONNECT: the roles do not go together.
	for name, tc := range map[string]struct {
		connect *pb.CommandConnect
		want    pb.ServerError
	}{
		"a non-proxy role names a principal": {proxyConnect(tok("app", time.Hour), "admin", "", ""), pb.ServerError_AuthorizationError},
		"a non-proxy role sends proxy_version": {func() *pb.CommandConnect {
			c := proxyConnect(tok("app", time.Hour), "", "", "")
			c.ProxyVersion = proto.String("x")
			return c
		}(), pb.ServerError_AuthorizationError},
		"a proxy role names nobody":       {proxyConnect(tok("proxy", time.Hour), "", "", ""), pb.ServerError_AuthorizationError},
		"the principal is a proxy role":   {proxyConnect(tok("proxy", time.Hour), "proxy", "", ""), pb.ServerError_AuthorizationError},
		"forwarded token of another role": {proxyConnect(tok("proxy", time.Hour), "admin", auth.MethodToken, tok("app", time.Hour)), pb.ServerError_AuthenticationError},
		"forged forwarded token":          {proxyConnect(tok("proxy", time.Hour), "app", auth.MethodToken, forged), pb.ServerError_AuthenticationError},
		"expired forwarded token":         {proxyConnect(tok("proxy", time.Hour), "app", auth.MethodToken, tok("app", -time.Minute)), pb.ServerError_AuthenticationError},
	} {
		c := dial()
		r := c.connect(tc.connect)
		if r.GetType() != pb.BaseCommand_ERROR || r.GetError().GetError() != tc.want {
			t.Errorf("%s: %v, want ERROR %s", name, r, tc.want)
		}
	}

	// Accepted: both the proxy's and the client's grants count.
	produce := func(c *testConn, id uint64) *pb.BaseCommand {
		c.write(producerFrame(topic, id, id))
		return c.read()
	}
	app := dial()
	if r := app.connect(proxyConnect(tok("proxy", time.Hour), "app", auth.MethodToken, tok("app", time.Hour))); r.GetType() != pb.BaseCommand_CONNECTED {
		t.Fatalf("proxy for app: %v", r)
	}
	if r := produce(app, 1); r.GetType() != pb.BaseCommand_PRODUCER_SUCCESS {
		t.Fatalf("app produces through the proxy: %v", r)
	}
	stranger := dial()
	if r := stranger.connect(proxyConnect(tok("proxy", time.Hour), "stranger", auth.MethodToken, tok("stranger", time.Hour))); r.GetType() != pb.BaseCommand_CONNECTED {
		t.Fatalf("proxy for stranger: %v", r)
	}
	if r := produce(stranger, 1); r.GetType() != pb.BaseCommand_ERROR || r.GetError().GetError() != pb.ServerError_AuthorizationError {
		t.Fatalf("a role without grants produces through a superuser proxy: %v", r)
	}
	// A principal without credentials is taken on the proxy's word (a
	// certificate cannot be forwarded).
	byWord := dial()
	if r := byWord.connect(proxyConnect(tok("proxy", time.Hour), "app", "", "")); r.GetType() != pb.BaseCommand_CONNECTED {
		t.Fatalf("proxy for app without its credentials: %v", r)
	}
	if r := produce(byWord, 1); r.GetType() != pb.BaseCommand_PRODUCER_SUCCESS {
		t.Fatalf("app produces through the proxy, without credentials: %v", r)
	}

	// The forwarded token expires: the challenge goes (through the proxy)
	// to the client, which answers with a fresh token of its own role; a
	// token of another role ends the connection.
	short := dial()
	if r := short.connect(proxyConnect(tok("proxy", time.Hour), "app", auth.MethodToken, tok("app", time.Second))); r.GetType() != pb.BaseCommand_CONNECTED {
		t.Fatalf("proxy for app (short token): %v", r)
	}
	if r := short.read(); r.GetType() != pb.BaseCommand_AUTH_CHALLENGE {
		t.Fatalf("after the forwarded token expired: %v, want AUTH_CHALLENGE", r)
	}
	short.write(authResponse(auth.MethodToken, []byte(tok("app", time.Second))))
	if r := short.read(); r.GetType() != pb.BaseCommand_AUTH_CHALLENGE {
		t.Fatalf("after the refreshed token expired: %v, want AUTH_CHALLENGE", r)
	}
	short.write(authResponse(auth.MethodToken, []byte(tok("admin", time.Hour))))
	if r := short.read(); r.GetType() != pb.BaseCommand_ERROR || r.GetError().GetError() != pb.ServerError_AuthenticationError {
		t.Fatalf("a refresh as another role: %v", r)
	}
	expectClosed(t, short)

	// The proxy's own token expires: nothing can refresh it through the
	// connection, which closes (no challenge).
	proxyShort := dial()
	if r := proxyShort.connect(proxyConnect(tok("proxy", time.Second), "app", auth.MethodToken, tok("app", time.Hour))); r.GetType() != pb.BaseCommand_CONNECTED {
		t.Fatalf("proxy with a short token: %v", r)
	}
	expectClosed(t, proxyShort)
}

// expectClosed reads until the connection closes; any command but PING
// fails the test.
func expectClosed(t *testing.T, c *testConn) {
	t.Helper()
	for {
		f, err := protocol.ReadFrame(c.br, 0)
		if err == nil {
			if f.Cmd.GetType() == pb.BaseCommand_PING {
				continue
			}
			t.Fatalf("want the connection closed, got %v", f.Cmd)
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("connection not closed: %v", err)
		}
		if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, net.ErrClosed) {
			t.Logf("closed: %v", err)
		}
		return
	}
}

// A client certificate that expires on a live connection closes it at its
// NotAfter, without AUTH_CHALLENGE: no AUTH_RESPONSE can renew a
// certificate (the Go client answers with the same one, which made an
// endless challenge loop).
func TestClientCertificateExpiryCloses(t *testing.T) {
	dir := t.TempDir()
	certs, err := testcerts.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := certs.Server("node")
	if err != nil {
		t.Fatal(err)
	}
	r, err := auth.NewReloader(auth.TLSFiles{CertFile: cert, KeyFile: key, CAFile: certs.CAFile})
	if err != nil {
		t.Fatal(err)
	}
	a, err := auth.New(auth.Config{Providers: []string{auth.MethodTLS}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tlsLn := tls.NewListener(ln, r.ServerConfig(true))
	startTLSGateway(t, tlsLn, func(c *Config) {
		c.Auth, c.Authorization, c.SuperUserRoles = a, true, []string{"app"}
	})
	notAfter := time.Now().Add(3 * time.Second).Truncate(time.Second) // certificates count whole seconds
	ccert, ckey, err := certs.ClientUntil("short", "app", notAfter)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(ccert, ckey)
	if err != nil {
		t.Fatal(err)
	}
	cfg := r.ClientConfig()
	cfg.ServerName = "localhost"
	cfg.Certificates = []tls.Certificate{pair}
	cfg.GetClientCertificate = nil
	conn, err := tls.Dial("tcp", tlsLn.Addr().String(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := dialTest(t, conn)
	cc := &pb.CommandConnect{ClientVersion: proto.String("mtls-test"), ProtocolVersion: proto.Int32(21),
		AuthMethodName: proto.String(auth.MethodTLS), FeatureFlags: &pb.FeatureFlags{SupportsAuthRefresh: proto.Bool(true)}}
	if r := c.connect(cc); r.GetType() != pb.BaseCommand_CONNECTED {
		t.Fatalf("CONNECT with a client certificate: %v", r)
	}
	// The connection closes at NotAfter, with no challenge.
	for {
		f, err := protocol.ReadFrame(c.br, 0)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("the connection outlived its certificate: %v", err)
			}
			break
		}
		switch f.Cmd.GetType() {
		case pb.BaseCommand_PING:
		case pb.BaseCommand_AUTH_CHALLENGE:
			// The clients answer with the same certificate, which used to
			// be challenged again at once, forever.
			t.Fatalf("AUTH_CHALLENGE for a client certificate")
		default:
			t.Fatalf("unexpected %v", f.Cmd)
		}
	}
	if early := time.Until(notAfter); early > 100*time.Millisecond {
		t.Fatalf("closed %v before the certificate's NotAfter", early)
	}
}

// Admin requests: a proxy role naming its client in X-Original-Principal
// (Apache Pulsar's proxy does) is authorized with the client's grants too;
// no other role may name one.
func TestAdminOriginalPrincipal(t *testing.T) {
	secret, _ := auth.NewSecretKey()
	a, err := auth.New(auth.Config{Providers: []string{auth.MethodToken}, Token: auth.TokenConfig{SecretKey: secret}})
	if err != nil {
		t.Fatal(err)
	}
	srv := startMemGateway(t, func(c *Config) {
		c.Auth, c.Authorization = a, true
		c.SuperUserRoles = []string{"admin"}
		c.ProxyRoles = []string{"proxy"}
	})
	ctx := context.Background()
	if err := srv.cfg.Catalog.SetNamespaceProperties(ctx, "public/default", map[string]string{
		permPrefix + "app": "produce,consume", permPrefix + "proxy": "produce,consume"}); err != nil {
		t.Fatal(err)
	}
	h := adminHandler(srv)
	status := func(role, orig string) int {
		tok, _ := auth.NewToken(auth.TokenSpec{Subject: role}, secret, nil, "")
		req := httptest.NewRequest(http.MethodGet, "/admin/v2/namespaces/public/default/topics", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		if orig != "" {
			req.Header.Set("X-Original-Principal", orig)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	for _, c := range []struct {
		role, orig string
		want       int
	}{
		{"proxy", "app", http.StatusOK},
		{"proxy", "", http.StatusOK},
		{"proxy", "stranger", http.StatusForbidden}, // the client has no grant
		{"proxy", "proxy", http.StatusOK},           // itself: no other principal
		{"app", "admin", http.StatusForbidden},      // not a proxy role
		{"stranger", "", http.StatusForbidden},
	} {
		if got := status(c.role, c.orig); got != c.want {
			t.Errorf("%s for %q: HTTP %d, want %d", c.role, c.orig, got, c.want)
		}
	}
}
