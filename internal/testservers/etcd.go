//go:build unix

package testservers

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lakegate/lakegate/internal/testcerts"
)

// Bounds of the etcd cluster helper.
const (
	etcdBuildTimeout   = 10 * time.Minute // a cold build of etcdmember (warm: ~5 s)
	etcdHealthyTimeout = 30 * time.Second // members started until all report healthy
	etcdStopTimeout    = 10 * time.Second
	etcdStartAttempts  = 3 // a start retries with new ports if a member dies at once (port taken)
	etcdHealthPoll     = 50 * time.Millisecond

	// EtcdMaxTxnOps and EtcdMaxRequestBytes are what the members are
	// started with: the settings docs/metadata.md asks of an external
	// cluster.
	EtcdMaxTxnOps       = 1024
	EtcdMaxRequestBytes = 8 << 20
)

// EtcdCluster is a cluster of real etcd member processes (the etcd server
// of go.mod's go.etcd.io/etcd/server/v3, built from
// internal/testservers/etcdmember) on loopback. Members can be stopped
// (SIGKILL) and started again on the same ports and data directories.
type EtcdCluster struct {
	// Endpoints are the client URLs of every member, "http://127.0.0.1:PORT"
	// ("https://…" with EtcdSecurity.TLS).
	Endpoints []string
	Members   []*EtcdMember
	// Security is what the cluster was started with (StartSecureEtcdCluster).
	Security EtcdSecurity
	// With TLS: CAFile is what clients trust, and ClientCertFile and
	// ClientKeyFile a client certificate the members accept (common name
	// "root": with auth on, etcd takes it for user root). Certs is the CA
	// made for the cluster (nil with EtcdSecurity.CAFile): issue more
	// client certificates with Certs.Client.
	CAFile                        string
	Certs                         *testcerts.Set
	ClientCertFile, ClientKeyFile string
	memberCert, memberKey         string

	t   testing.TB
	bin string
}

// EtcdMember is one member of an EtcdCluster.
type EtcdMember struct {
	Name      string
	ClientURL string
	PeerURL   string
	Dir       string // data dir and log of this member

	cluster *EtcdCluster
	started int // starts so far (0 before the first)
	mu      sync.Mutex
	proc    *process // nil while stopped
}

var etcdBuild struct {
	once sync.Once
	bin  string
	err  error
}

// EtcdMemberPath builds internal/testservers/etcdmember once per test
// process into .cache/bin/etcdmember at the repository root (go build is
// incremental, so a later process only relinks) and returns its path.
func EtcdMemberPath() (string, error) {
	etcdBuild.once.Do(func() {
		root, err := RepoRoot()
		if err != nil {
			etcdBuild.err = err
			return
		}
		dir := filepath.Join(root, ".cache", "bin")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			etcdBuild.err = err
			return
		}
		bin := filepath.Join(dir, "etcdmember")
		// Build to a private name and rename: parallel test packages may
		// build at once, and a reader must never see a partial binary.
		tmp := fmt.Sprintf("%s.tmp.%d", bin, os.Getpid())
		cmd := exec.Command("go", "build", "-o", tmp, "./internal/testservers/etcdmember")
		cmd.Dir = root
		out, err := runWithTimeout(cmd, etcdBuildTimeout)
		if err != nil {
			_ = os.Remove(tmp)
			etcdBuild.err = fmt.Errorf("build etcdmember: %w\n%s", err, out)
			return
		}
		if err := os.Rename(tmp, bin); err != nil {
			etcdBuild.err = err
			return
		}
		etcdBuild.bin = bin
	})
	return etcdBuild.bin, etcdBuild.err
}

func runWithTimeout(cmd *exec.Cmd, timeout time.Duration) ([]byte, error) {
	var out strings.Builder
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return []byte(out.String()), err
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
		return []byte(out.String()), fmt.Errorf("timed out after %v", timeout)
	}
}

// StartEtcdCluster starts an n-member etcd cluster (n odd: 1, 3, 5) on free
// loopback ports with data in t.TempDir(), waits until every member reports
// healthy, and kills the members in t's cleanup. Members run with
// --max-txn-ops=EtcdMaxTxnOps, --max-request-bytes=EtcdMaxRequestBytes,
// periodic 5m auto-compaction (docs/metadata.md), election timeout 1 s and
// --unsafe-no-fsync: the tests kill processes, not machines, and a killed
// process's writes are in the page cache.
func StartEtcdCluster(t testing.TB, n int) *EtcdCluster {
	t.Helper()
	return StartSecureEtcdCluster(t, n, EtcdSecurity{})
}

// StartSecureEtcdCluster is StartEtcdCluster with the client side secured
// as sec says: TLS, client certificates, authentication with users.
func StartSecureEtcdCluster(t testing.TB, n int, sec EtcdSecurity) *EtcdCluster {
	t.Helper()
	if n < 1 || n%2 == 0 {
		t.Fatalf("etcd cluster: %d members: want an odd count", n)
	}
	if (sec.ClientCertAuth || sec.CAFile != "") && !sec.TLS {
		t.Fatal("etcd cluster: ClientCertAuth and CAFile need TLS")
	}
	if len(sec.Users) > 0 && sec.RootPassword == "" {
		t.Fatal("etcd cluster: Users need RootPassword (authentication on)")
	}
	bin, err := EtcdMemberPath()
	if err != nil {
		t.Fatalf("etcd cluster: %v", err)
	}
	var errs []error
	for range etcdStartAttempts {
		c, err := startEtcdCluster(t, bin, n, sec)
		if err == nil {
			return c
		}
		errs = append(errs, err)
		t.Logf("etcd cluster: start failed, retrying with new ports: %v", err)
	}
	t.Fatalf("etcd cluster: could not start: %v", errors.Join(errs...))
	return nil
}

func startEtcdCluster(t testing.TB, bin string, n int, sec EtcdSecurity) (*EtcdCluster, error) {
	ports, err := freePorts(2 * n)
	if err != nil {
		return nil, err
	}
	base := t.TempDir()
	c := &EtcdCluster{t: t, bin: bin, Security: sec}
	scheme := "http"
	if sec.TLS {
		scheme = "https"
		if err := c.makeCerts(filepath.Join(base, "certs")); err != nil {
			return nil, err
		}
	}
	var initial []string
	for i := range n {
		m := &EtcdMember{
			Name:      "m" + strconv.Itoa(i),
			ClientURL: scheme + "://127.0.0.1:" + strconv.Itoa(ports[2*i]),
			PeerURL:   "http://127.0.0.1:" + strconv.Itoa(ports[2*i+1]),
			Dir:       filepath.Join(base, "m"+strconv.Itoa(i)),
			cluster:   c,
		}
		if err := os.MkdirAll(m.Dir, 0o755); err != nil {
			return nil, err
		}
		c.Members = append(c.Members, m)
		c.Endpoints = append(c.Endpoints, m.ClientURL)
		initial = append(initial, m.Name+"="+m.PeerURL)
	}
	stopAll := func() {
		for _, m := range c.Members {
			m.kill()
		}
	}
	for _, m := range c.Members {
		if err := m.start(strings.Join(initial, ",")); err != nil {
			stopAll()
			return nil, err
		}
	}
	if err := c.waitHealthy(c.Members, time.Now().Add(etcdHealthyTimeout)); err != nil {
		stopAll()
		return nil, err
	}
	if sec.RootPassword != "" {
		if err := c.enableAuth(); err != nil {
			stopAll()
			return nil, err
		}
	}
	t.Cleanup(stopAll)
	return c, nil
}

// makeCerts makes the cluster's CA, the members' server certificate and a
// client certificate for user root — or takes EtcdSecurity's files.
func (c *EtcdCluster) makeCerts(dir string) error {
	if sec := c.Security; sec.CAFile != "" {
		c.CAFile, c.memberCert, c.memberKey = sec.CAFile, sec.MemberCertFile, sec.MemberKeyFile
		c.ClientCertFile, c.ClientKeyFile = sec.MemberCertFile, sec.MemberKeyFile
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	certs, err := testcerts.New(dir)
	if err != nil {
		return err
	}
	c.Certs, c.CAFile = certs, certs.CAFile
	if c.memberCert, c.memberKey, err = certs.Server("member"); err != nil {
		return err
	}
	c.ClientCertFile, c.ClientKeyFile, err = certs.Client("root-client", "root")
	return err
}

// ClientTLS is a TLS configuration that trusts the cluster's CA and
// presents its root client certificate (nil without TLS).
func (c *EtcdCluster) ClientTLS() (*tls.Config, error) {
	if !c.Security.TLS {
		return nil, nil
	}
	b, err := os.ReadFile(c.CAFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("no certificate in %s", c.CAFile)
	}
	cert, err := tls.LoadX509KeyPair(c.ClientCertFile, c.ClientKeyFile)
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// Client returns an etcd client of the cluster as user root (its
// certificate and password, when the cluster has them); the caller closes
// it.
func (c *EtcdCluster) Client() (*clientv3.Client, error) {
	cfg, err := c.ClientTLS()
	if err != nil {
		return nil, err
	}
	cc := clientv3.Config{Endpoints: c.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop(), TLS: cfg}
	if c.Security.RootPassword != "" && !c.Security.ClientCertAuth {
		cc.Username, cc.Password = "root", c.Security.RootPassword
	}
	return clientv3.New(cc)
}

// enableAuth adds user root and the Users with their roles, then turns
// authentication on.
func (c *EtcdCluster) enableAuth() error {
	cli, err := c.Client()
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), etcdHealthyTimeout)
	defer cancel()
	if _, err := cli.UserAdd(ctx, "root", c.Security.RootPassword); err != nil {
		return fmt.Errorf("etcd user root: %w", err)
	}
	if _, err := cli.UserGrantRole(ctx, "root", "root"); err != nil {
		return fmt.Errorf("etcd user root: %w", err)
	}
	for _, u := range c.Security.Users {
		end := clientv3.GetPrefixRangeEnd(u.Prefix)
		key := u.Prefix
		if key == "" {
			key, end = "\x00", "\x00" // every key
		}
		steps := []func() error{
			func() error { _, err := cli.RoleAdd(ctx, u.Name); return err },
			func() error {
				_, err := cli.RoleGrantPermission(ctx, u.Name, key, end, clientv3.PermissionType(clientv3.PermReadWrite))
				return err
			},
			func() error { _, err := cli.UserAdd(ctx, u.Name, u.Password); return err },
			func() error { _, err := cli.UserGrantRole(ctx, u.Name, u.Name); return err },
		}
		for _, step := range steps {
			if err := step(); err != nil {
				return fmt.Errorf("etcd user %s: %w", u.Name, err)
			}
		}
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		return fmt.Errorf("etcd auth enable: %w", err)
	}
	return nil
}

// initialCluster is the --initial-cluster value of c.
func (c *EtcdCluster) initialCluster() string {
	var s []string
	for _, m := range c.Members {
		s = append(s, m.Name+"="+m.PeerURL)
	}
	return strings.Join(s, ",")
}

func (m *EtcdMember) start(initial string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc != nil {
		return fmt.Errorf("etcd member %s is running", m.Name)
	}
	args := []string{
		"--name=" + m.Name,
		"--data-dir=" + filepath.Join(m.Dir, "data"),
		"--listen-client-urls=" + m.ClientURL,
		"--advertise-client-urls=" + m.ClientURL,
		"--listen-peer-urls=" + m.PeerURL,
		"--initial-advertise-peer-urls=" + m.PeerURL,
		"--initial-cluster=" + initial,
		"--initial-cluster-state=new", // ignored once the data dir holds a member
		"--initial-cluster-token=lakegate-test",
		"--max-txn-ops=" + strconv.Itoa(EtcdMaxTxnOps),
		"--max-request-bytes=" + strconv.Itoa(EtcdMaxRequestBytes),
		"--auto-compaction-mode=periodic", "--auto-compaction-retention=5m",
		"--heartbeat-interval=100", "--election-timeout=1000",
		"--unsafe-no-fsync",
		"--log-level=warn",
	}
	if sec := m.cluster.Security; sec.TLS {
		args = append(args, "--cert-file="+m.cluster.memberCert, "--key-file="+m.cluster.memberKey)
		if sec.ClientCertAuth {
			args = append(args, "--client-cert-auth", "--trusted-ca-file="+m.cluster.CAFile)
		}
	}
	m.started++
	logPath := filepath.Join(m.Dir, "etcd-"+strconv.Itoa(m.started)+".log")
	p, err := startProcess(m.cluster.bin, args, logPath, regexp.MustCompile(`ready to serve client requests`))
	if err != nil {
		return err
	}
	m.proc = p
	return nil
}

func (m *EtcdMember) kill() {
	m.mu.Lock()
	p := m.proc
	m.proc = nil
	m.mu.Unlock()
	if p != nil {
		p.kill(etcdStopTimeout)
	}
}

// Stop kills member i (SIGKILL) and waits until its process has exited.
func (c *EtcdCluster) Stop(i int) {
	c.t.Helper()
	c.Members[i].kill()
}

// Start starts the stopped member i again on its ports and data dir. It
// does not wait for health (a member alone cannot be healthy when a
// majority is down); see WaitHealthy.
func (c *EtcdCluster) Start(i int) {
	c.t.Helper()
	if err := c.Members[i].start(c.initialCluster()); err != nil {
		c.t.Fatalf("etcd cluster: start %s: %v", c.Members[i].Name, err)
	}
}

// WaitHealthy waits until every running member reports healthy (it has a
// leader and serves a linearizable read), failing the test after 30 s.
func (c *EtcdCluster) WaitHealthy() {
	c.t.Helper()
	var running []*EtcdMember
	for _, m := range c.Members {
		if m.running() {
			running = append(running, m)
		}
	}
	if err := c.waitHealthy(running, time.Now().Add(etcdHealthyTimeout)); err != nil {
		c.t.Fatalf("etcd cluster: %v", err)
	}
}

func (m *EtcdMember) running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.proc != nil
}

// Running reports whether member i's process is running (started and not
// stopped).
func (c *EtcdCluster) Running(i int) bool { return c.Members[i].running() }

// Healthy reports whether member i answers /health with "true".
func (c *EtcdCluster) Healthy(i int) bool {
	return c.Members[i].health() == nil
}

func (c *EtcdCluster) waitHealthy(ms []*EtcdMember, deadline time.Time) error {
	for _, m := range ms {
		for {
			err := m.health()
			if err == nil {
				break
			}
			m.mu.Lock()
			p := m.proc
			m.mu.Unlock()
			if p == nil {
				return fmt.Errorf("member %s is stopped", m.Name)
			}
			select {
			case <-p.exited:
				return fmt.Errorf("member %s exited: %v\n%s", m.Name, p.exitErr, p.tail())
			default:
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("member %s not healthy: %v\n%s", m.Name, err, p.tail())
			}
			select {
			case <-p.exited:
			case <-time.After(etcdHealthPoll):
			}
		}
	}
	return nil
}

var etcdHealthClient = &http.Client{Timeout: 2 * time.Second}

// health asks GET /health, which etcd answers {"health":"true"} when the
// member has a leader and a linearizable read succeeds (with
// authentication on too: the read needs no user).
func (m *EtcdMember) health() error {
	hc := etcdHealthClient
	if m.cluster.Security.TLS {
		cfg, err := m.cluster.ClientTLS()
		if err != nil {
			return err
		}
		hc = &http.Client{Timeout: etcdHealthClient.Timeout, Transport: &http.Transport{TLSClientConfig: cfg}}
		defer hc.CloseIdleConnections()
	}
	resp, err := hc.Get(m.ClientURL + "/health")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return err
	}
	var h struct {
		Health string `json:"health"`
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal(body, &h); err != nil {
		return fmt.Errorf("/health: %s: %q", resp.Status, body)
	}
	if h.Health != "true" {
		return fmt.Errorf("/health: %s %s", h.Health, h.Reason)
	}
	return nil
}

// Leader returns the index of the member that is the leader, as seen by
// the running members, or -1 if none answers within 5 s.
func (c *EtcdCluster) Leader() int {
	c.t.Helper()
	cli, err := c.Client()
	if err != nil {
		return -1
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i, m := range c.Members {
		if !m.running() {
			continue
		}
		st, err := cli.Status(ctx, m.ClientURL)
		if err != nil || st.Leader == 0 {
			continue
		}
		if st.Leader == st.Header.MemberId {
			return i
		}
		for j, o := range c.Members {
			if j == i || !o.running() {
				continue
			}
			if st2, err := cli.Status(ctx, o.ClientURL); err == nil && st2.Header.MemberId == st.Leader {
				return j
			}
		}
	}
	return -1
}
