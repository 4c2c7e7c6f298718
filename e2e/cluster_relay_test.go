package e2e

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

// TestClusterRelayIdentity: a secured three-node cluster in proxy mode (TLS
// only, token and mTLS authentication, authorization; the nodes' certificate
// is of a superuser role, lakegate-node, which is also their proxy role).
//
//   - A client holding a CA-signed certificate of a role with no grants,
//     relayed by a node that does not own the topic, stays itself at the
//     owner: refused on produce and consume (it used to become the relaying
//     node's role, a superuser). Naming a principal itself is refused.
//   - Clients with grants (a certificate, a token) produce and consume
//     through the relay.
//   - Members reach each other over HTTPS: their plain admin listener is
//     advertised where nothing listens, and forwarded admin requests and a
//     hand-over still work.
//   - The CA is rotated (the CA file gets a new CA, the nodes a certificate
//     of the new one): a new relayed connection, and a forwarded admin
//     request, trust it without a restart.
func TestClusterRelayIdentity(t *testing.T) {
	dir := t.TempDir()
	certs, err := testcerts.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := certs.Server("lakegate-node")
	if err != nil {
		t.Fatal(err)
	}
	secret, _ := auth.NewSecretKey()
	keyFile := filepath.Join(dir, "secret.key")
	os.WriteFile(keyFile, secret, 0o600)
	tok := func(role string) string {
		s, _ := auth.NewToken(auth.TokenSpec{Subject: role}, secret, nil, "")
		return s
	}
	flags := []string{"--pulsar-addr=", "--pulsar-tls-addr", "127.0.0.1:0", "--http-tls-addr", "127.0.0.1:0",
		// Where nothing listens: members must use each other's HTTPS.
		"--http-advertised-addr", freeAddr(t),
		"--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-file", certs.CAFile,
		"--auth-enabled", "--auth-providers", "token,tls", "--auth-token-secret-key", "file://" + keyFile,
		"--auth-super-user-roles", "admin,lakegate-node", "--auth-proxy-roles", "lakegate-node",
		"--cluster-proxy-lookups", "--cluster-rebalance-interval", "0"}
	c := startLGCluster(t, 3, "file://"+filepath.ToSlash(t.TempDir()), flags...)
	ctx := ctxFor(t, 3*time.Minute)
	const topic = "persistent://public/default/relay-identity"
	adm, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: c.nodes[0].httpsURL, TLSTrustCertsFilePath: certs.CAFile, Token: tok("admin")})
	if err != nil {
		t.Fatal(err)
	}
	if err := adm.Topics().Create(admTopic(t, topic), 0); err != nil {
		t.Fatal(err)
	}
	ns, _ := utils.GetNamespaceName("public/default")
	if err := adm.Namespaces().GrantNamespacePermission(*ns, "app", []utils.AuthAction{"produce", "consume"}); err != nil {
		t.Fatal(err)
	}
	https := httpsClient(t, certs.CAFile)
	owner := func(via *lakegateProc) *lakegateProc {
		t.Helper()
		var ld struct {
			BrokerURLTLS string `json:"brokerUrlTls"`
		}
		path := strings.Replace(topic, "persistent://", "/lookup/v2/topic/persistent/", 1)
		if code := https.do(t, http.MethodGet, via.httpsURL+path, tok("admin"), &ld); code != http.StatusOK {
			t.Fatalf("lookup %s: HTTP %d", topic, code)
		}
		for _, n := range c.nodes {
			if n.pulsarTLSURL == ld.BrokerURLTLS {
				return n
			}
		}
		t.Fatalf("no node serves %s", ld.BrokerURLTLS)
		return nil
	}
	own := owner(c.nodes[0])
	entry := c.nodes[0]
	if entry == own {
		entry = c.nodes[1]
	}
	t.Logf("owner %s, entry %s", own.name, entry.name)

	strangerCert, strangerKey, _ := certs.Client("stranger", "stranger")
	t.Run("NoGrantsThroughTheRelay", func(t *testing.T) {
		r := rawMTLS(t, entry.pulsarTLSURL, certs.CAFile, strangerCert, strangerKey)
		r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: &pb.CommandConnect{
			ClientVersion: proto.String("hostile"), ProtocolVersion: proto.Int32(21),
			AuthMethodName: proto.String("tls"), ProxyToBrokerUrl: proto.String(own.pulsarTLSURL),
		}})
		if got := r.read(); got.GetType() != pb.BaseCommand_CONNECTED {
			t.Fatalf("relayed CONNECT: %v", got)
		}
		r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: &pb.CommandProducer{
			Topic: proto.String(topic), ProducerId: proto.Uint64(1), RequestId: proto.Uint64(1)}})
		if got := r.read(); got.GetType() != pb.BaseCommand_ERROR || got.GetError().GetError() != pb.ServerError_AuthorizationError {
			t.Fatalf("a role without grants produces through the relay: %v", got)
		}
		r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_SUBSCRIBE.Enum(), Subscribe: &pb.CommandSubscribe{
			Topic: proto.String(topic), Subscription: proto.String("s"), SubType: pb.CommandSubscribe_Exclusive.Enum(),
			ConsumerId: proto.Uint64(1), RequestId: proto.Uint64(2)}})
		if got := r.read(); got.GetType() != pb.BaseCommand_ERROR || got.GetError().GetError() != pb.ServerError_AuthorizationError {
			t.Fatalf("a role without grants consumes through the relay: %v", got)
		}
		// Naming a principal is for proxy roles only.
		d := rawMTLS(t, own.pulsarTLSURL, certs.CAFile, strangerCert, strangerKey)
		d.cmd(&pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: &pb.CommandConnect{
			ClientVersion: proto.String("hostile"), ProtocolVersion: proto.Int32(21),
			AuthMethodName: proto.String("tls"), OriginalPrincipal: proto.String("admin"),
		}})
		if got := d.read(); got.GetType() != pb.BaseCommand_ERROR || got.GetError().GetError() != pb.ServerError_AuthorizationError {
			t.Fatalf("a client names a principal: %v", got)
		}
	})

	appCert, appKey, _ := certs.Client("app", "app")
	roundTrip := func(t *testing.T, a pulsar.Authentication, sub string, n int) {
		t.Helper()
		cl, err := pulsar.NewClient(pulsar.ClientOptions{URL: entry.pulsarTLSURL, TLSTrustCertsFilePath: certs.CAFile,
			Authentication: a, OperationTimeout: 30 * time.Second, Logger: plog.DefaultNopLogger()})
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: sub, SubscriptionInitialPosition: pulsar.SubscriptionPositionLatest})
		if err != nil {
			t.Fatalf("subscribe through the relay: %v", err)
		}
		defer cons.Close()
		p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic})
		if err != nil {
			t.Fatalf("produce through the relay: %v", err)
		}
		defer p.Close()
		for i := range n {
			if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(strconv.Itoa(i))}); err != nil {
				t.Fatal(err)
			}
		}
		for i := range n {
			m, err := cons.Receive(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if string(m.Payload()) != strconv.Itoa(i) {
				t.Fatalf("message %d: %q", i, m.Payload())
			}
			cons.Ack(m)
		}
	}
	t.Run("GrantsThroughTheRelay", func(t *testing.T) {
		roundTrip(t, pulsar.NewAuthenticationTLS(appCert, appKey), "app-cert", 20)
		roundTrip(t, pulsar.NewAuthenticationToken(tok("app")), "app-token", 20)
		metrics := httpsGetText(t, https, entry.httpURL+"/metrics")
		if strings.Contains(metrics, "lakegate_proxied_connections_total 0\n") {
			t.Fatalf("the entry node relayed nothing:\n%s", grepLines(metrics, "proxied"))
		}
	})

	t.Run("PeersOverHTTPS", func(t *testing.T) {
		// A forwarded admin request (the owner serves the stats) and a
		// hand-over to a chosen member, both through a node that does not
		// own the topic.
		appAdm, _ := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: entry.httpsURL, TLSTrustCertsFilePath: certs.CAFile, Token: tok("app")})
		if _, err := appAdm.Topics().GetStats(admTopic(t, topic)); err != nil {
			t.Fatalf("stats forwarded to the owner: %v", err)
		}
		var dest *lakegateProc
		for _, n := range c.nodes {
			if n != own && n != entry {
				dest = n
			}
		}
		u := entry.httpsURL + "/admin/v2/persistent/public/default/relay-identity/unload?destinationBroker=" + dest.name
		if code := https.do(t, http.MethodPut, u, tok("admin"), nil); code/100 != 2 {
			t.Fatalf("unload to %s: HTTP %d", dest.name, code)
		}
		waitFor(t, ctx, "the hand-over to "+dest.name, func() bool { return owner(entry) == dest })
		own = dest
	})

	t.Run("RotatedCA", func(t *testing.T) {
		next, err := testcerts.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		oldCA, _ := os.ReadFile(certs.CAFile)
		newCA, _ := os.ReadFile(next.CAFile)
		ncert, nkey, err := next.Server("lakegate-node")
		if err != nil {
			t.Fatal(err)
		}
		later := time.Now().Add(2 * time.Second)
		bundle := filepath.Join(dir, "bundle.pem")
		os.WriteFile(bundle, append(append([]byte{}, oldCA...), newCA...), 0o600)
		for _, f := range []string{bundle, ncert, nkey} {
			os.Chtimes(f, later, later)
		}
		// As a Secret update does: each file replaced at once.
		for from, to := range map[string]string{bundle: certs.CAFile, ncert: cert, nkey: key} {
			if err := os.Rename(from, to); err != nil {
				t.Fatal(err)
			}
		}
		onlyNew := filepath.Join(t.TempDir(), "new-ca.pem")
		os.WriteFile(onlyNew, newCA, 0o600)
		for _, n := range c.nodes {
			waitFor(t, ctx, n.name+" serving the new certificate", func() bool {
				conn, err := tls.Dial("tcp", strings.TrimPrefix(n.pulsarTLSURL, "pulsar+ssl://"), &tls.Config{RootCAs: mustPool(t, onlyNew), ServerName: "localhost"})
				if err == nil {
					conn.Close()
				}
				return err == nil
			})
		}
		// The relaying node dials the owner afresh: it must trust the new CA.
		roundTrip(t, pulsar.NewAuthenticationToken(tok("app")), "after-rotation", 5)
		appAdm, _ := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: entry.httpsURL, TLSTrustCertsFilePath: certs.CAFile, Token: tok("app")})
		if _, err := appAdm.Topics().GetStats(admTopic(t, topic)); err != nil {
			t.Fatalf("stats forwarded to the owner after the rotation: %v", err)
		}
	})
}

// rawMTLS opens a raw protocol connection over TLS to a pulsar+ssl URL,
// presenting a client certificate.
func rawMTLS(t *testing.T, url, caFile, certFile, keyFile string) *rawConn {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", strings.TrimPrefix(url, "pulsar+ssl://"),
		&tls.Config{RootCAs: mustPool(t, caFile), ServerName: "localhost", Certificates: []tls.Certificate{pair}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	return &rawConn{t: t, c: conn, br: bufio.NewReader(conn)}
}

func mustPool(t *testing.T, caFile string) *x509.CertPool {
	t.Helper()
	p, err := loadPool(caFile)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// httpsAdmin is an HTTPS client trusting the test CA.
type httpsAdmin struct{ c *http.Client }

func httpsClient(t *testing.T, caFile string) *httpsAdmin {
	return &httpsAdmin{c: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: mustPool(t, caFile)}}}}
}

// do sends a request with a bearer token and decodes a 2xx JSON answer
// into out; it returns the status.
func (h *httpsAdmin) do(t *testing.T, method, url, token string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, url, http.NoBody)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := h.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Logf("%s %s: HTTP %d: %s", method, url, resp.StatusCode, b)
	}
	if out != nil && resp.StatusCode/100 == 2 && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, url, err, b)
		}
	}
	return resp.StatusCode
}

// httpsGetText fetches a URL (plain or HTTPS) as text.
func httpsGetText(t *testing.T, h *httpsAdmin, url string) string {
	t.Helper()
	resp, err := h.c.Get(url)
	if err != nil {
		t.Fatal(fmt.Errorf("GET %s: %w", url, err))
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
