package e2e

// A cluster node on a secured external etcd (docs/security.md, "etcd"):
// real etcd member processes serving client TLS with client certificates,
// or with etcd's authentication on; `lakegate serve` processes connecting
// with the etcd.* keys; the Go Pulsar client producing and consuming; and
// nodes with missing or wrong credentials stopped at start with a reason.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/lakegate/lakegate/internal/testcerts"
	"github.com/lakegate/lakegate/internal/testservers"
)

// etcdNodeArgs are the arguments of a serve node on etcd endpoints, its
// data and objects under dir, with extra flags.
func etcdNodeArgs(dir string, endpoints []string, extra ...string) []string {
	return append([]string{"serve",
		"--data-dir", filepath.Join(dir, "data"),
		"--objects", "file://" + filepath.ToSlash(filepath.Join(dir, "objects")),
		"--etcd-endpoints", strings.Join(endpoints, ","),
		"--etcd-prefix", "/lakegate/",
		"--pulsar-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
		"--cluster-session-ttl", clusterSessionTTL.String(),
		"--log-level", "info",
	}, extra...)
}

// produceConsume sends n messages to a new topic through the node and
// receives them.
func produceConsume(t *testing.T, p *lakegateProc, n int) {
	t.Helper()
	cl, err := pulsar.NewClient(pulsar.ClientOptions{URL: p.pulsarURL, OperationTimeout: 30 * time.Second, Logger: plog.DefaultNopLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	topic := fmt.Sprintf("persistent://public/default/etcd-sec-%d", time.Now().UnixNano())
	cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	prod, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	ctx := ctxFor(t, time.Minute)
	for i := range n {
		if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Payload()) != fmt.Sprint(i) {
			t.Fatalf("message %d: %q", i, m.Payload())
		}
		cons.Ack(m)
	}
}

// wantStartRefused runs the binary with args and expects it to exit with
// an error (within a minute) whose output contains every one of want.
func wantStartRefused(t *testing.T, what string, args []string, want ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, lakegateBinary(t), args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LAKEGATE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%s: still running after a minute:\n%s", what, out)
	}
	if err == nil {
		t.Fatalf("%s: exited 0:\n%s", what, out)
	}
	tail := string(out)
	if i := strings.LastIndex(strings.TrimSpace(tail), "\n"); i >= 0 {
		tail = strings.TrimSpace(tail)[i+1:]
	}
	t.Logf("%s: refused after %v: %s", what, time.Since(start).Round(time.Millisecond), tail)
	if strings.Contains(string(out), "panic:") {
		t.Fatalf("%s: panicked:\n%s", what, out)
	}
	for _, w := range want {
		if !strings.Contains(string(out), w) {
			t.Errorf("%s: output lacks %q:\n%s", what, w, out)
		}
	}
}

// TestEtcdClientTLS: etcd members serving client TLS and requiring client
// certificates (--client-cert-auth). A node with the etcd CA and a client
// certificate of it serves producers and consumers; a node without a
// certificate, with a certificate of another CA, or trusting another CA is
// refused at start, saying why.
func TestEtcdClientTLS(t *testing.T) {
	etcd := testservers.StartSecureEtcdCluster(t, 1, testservers.EtcdSecurity{TLS: true, ClientCertAuth: true})
	cert, key, err := etcd.Certs.Client("lakegate", "lakegate")
	if err != nil {
		t.Fatal(err)
	}
	p := startLakegateArgs(t, lakegateBinary(t), etcdNodeArgs(t.TempDir(), etcd.Endpoints,
		"--etcd-tls-ca-file", etcd.CAFile, "--etcd-tls-cert-file", cert, "--etcd-tls-key-file", key))
	produceConsume(t, p, 20)

	other := newOtherCA(t)
	wantStartRefused(t, "no client certificate",
		etcdNodeArgs(t.TempDir(), etcd.Endpoints, "--etcd-tls-ca-file", etcd.CAFile),
		"did not answer", "etcd.tlsCertFile", "certificate required")
	wantStartRefused(t, "a client certificate of another CA",
		etcdNodeArgs(t.TempDir(), etcd.Endpoints, "--etcd-tls-ca-file", etcd.CAFile,
			"--etcd-tls-cert-file", other.cert, "--etcd-tls-key-file", other.key),
		"did not answer", "unknown certificate authority")
	wantStartRefused(t, "trusting another CA",
		etcdNodeArgs(t.TempDir(), etcd.Endpoints, "--etcd-tls-ca-file", other.ca,
			"--etcd-tls-cert-file", cert, "--etcd-tls-key-file", key),
		"did not answer", "certificate signed by unknown authority")
	plain := strings.Replace(etcd.Endpoints[0], "https://", "http://", 1)
	wantStartRefused(t, "plain HTTP to a TLS member", etcdNodeArgs(t.TempDir(), []string{plain}),
		"did not answer", "serves TLS")
}

// otherCA is a certificate authority unrelated to the cluster's, with a
// client certificate.
type otherCA struct{ ca, cert, key string }

func newOtherCA(t *testing.T) otherCA {
	t.Helper()
	certs, err := testcerts.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := certs.Client("rogue", "root")
	if err != nil {
		t.Fatal(err)
	}
	return otherCA{ca: certs.CAFile, cert: cert, key: key}
}

// TestEtcdUserPassword: etcd with its authentication on (and server TLS),
// lakegate's own user whose role covers only the node's prefix. A node
// with that user and its password (from a file) serves producers and
// consumers; a wrong password, no user at all, or a prefix the role does
// not cover is refused at start, naming the keys to check.
func TestEtcdUserPassword(t *testing.T) {
	etcd := testservers.StartSecureEtcdCluster(t, 1, testservers.EtcdSecurity{
		TLS:          true,
		RootPassword: "root-pw",
		Users:        []testservers.EtcdUser{{Name: "lakegate", Password: "lakegate-pw", Prefix: "/lakegate/"}},
	})
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "etcd-password")
	if err := os.WriteFile(pwFile, []byte("lakegate-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	badFile := filepath.Join(dir, "bad-password")
	if err := os.WriteFile(badFile, []byte("guess\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ca := []string{"--etcd-tls-ca-file", etcd.CAFile}
	p := startLakegateArgs(t, lakegateBinary(t), etcdNodeArgs(t.TempDir(), etcd.Endpoints,
		append(ca, "--etcd-username", "lakegate", "--etcd-password-file", pwFile)...))
	produceConsume(t, p, 20)
	// Every key the node wrote is under its prefix (the role allows no
	// other), and a second node with the same user joins the cluster.
	p2 := startLakegateArgs(t, lakegateBinary(t), etcdNodeArgs(t.TempDir(), etcd.Endpoints,
		append(ca, "--etcd-username", "lakegate", "--etcd-password-file", pwFile)...))
	produceConsume(t, p2, 5)

	wantStartRefused(t, "a wrong password",
		etcdNodeArgs(t.TempDir(), etcd.Endpoints, append(ca, "--etcd-username", "lakegate", "--etcd-password-file", badFile)...),
		"etcd refused this node", "etcd.password", "authentication failed")
	wantStartRefused(t, "no credentials", etcdNodeArgs(t.TempDir(), etcd.Endpoints, ca...),
		"etcd refused this node", "user name is empty")
	wantStartRefused(t, "a prefix outside the user's role",
		append(etcdNodeArgs(t.TempDir(), etcd.Endpoints, append(ca, "--etcd-username", "lakegate", "--etcd-password-file", pwFile)...),
			"--etcd-prefix", "/other/"),
		"etcd refused this node", "permission denied")
}
