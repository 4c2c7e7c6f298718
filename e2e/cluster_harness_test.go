package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/sirupsen/logrus"

	"github.com/lakegate/lakegate/internal/testservers"
)

// lgCluster is several `lakegate serve` processes on one real etcd (a
// member process) and one shared object store: the configuration a user
// deploys.
type lgCluster struct {
	t       *testing.T
	bin     string
	etcd    *testservers.EtcdCluster
	objects string // object store URL
	flags   []string
	dir     string // the nodes' data dirs
	nodes   []*lakegateProc
	// fixedPorts: each node keeps the ports of its first start across
	// restarts (a client's multi-host service URL stays valid).
	fixedPorts bool
	ports      map[int][]string // node index → pulsar, http addresses
	procs      []*lakegateProc  // every node process started, killed at cleanup
}

// clusterSessionTTL is the nodes' session TTL in tests: etcd's minimum (its
// lease TTL floor is 1.5 × the election timeout, 1 s here).
const clusterSessionTTL = 2 * time.Second

// startLGCluster starts n serve nodes on objects (a file:// or s3:// URL)
// with flags added to each command line.
// keepAllFlags turn the nodes' default retention (Pulsar's 0/0: what
// every subscription acknowledged and the table holds is trimmed) off,
// for tests that read back, from the earliest message, everything that
// was ever acknowledged to a producer: they check durability, not
// retention.
var keepAllFlags = []string{"--policies-default-retention-time-in-minutes=-1", "--policies-default-retention-size-in-mb=-1"}

func startLGCluster(t *testing.T, n int, objects string, flags ...string) *lgCluster {
	t.Helper()
	return startLGClusterOn(t, testservers.StartEtcdCluster(t, 1), n, objects, flags...)
}

// startLGClusterOn is startLGCluster on the etcd cluster etcd.
func startLGClusterOn(t *testing.T, etcd *testservers.EtcdCluster, n int, objects string, flags ...string) *lgCluster {
	t.Helper()
	c := &lgCluster{t: t, bin: lakegateBinary(t), etcd: etcd, objects: objects, flags: flags, dir: t.TempDir()}
	// Every node the cluster ever started is killed in one cleanup,
	// registered before any client of the test: cleanups run last first, so
	// the clients close while the nodes (restarted ones too) still answer,
	// instead of reconnecting to nodes already gone until their operation
	// timeout.
	t.Cleanup(func() {
		for _, p := range c.procs {
			p.kill(t)
		}
	})
	for range n {
		c.addNode()
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range c.nodes {
				t.Logf("---- %s log (last lines) ----\n%s", n.name, strings.Join(n.logTail(60), "\n"))
			}
		}
	})
	return c
}

// addNode starts one more serve node.
func (c *lgCluster) addNode() *lakegateProc {
	c.t.Helper()
	p := c.startNode(len(c.nodes))
	c.nodes = append(c.nodes, p)
	return p
}

// restart starts a killed node again (same id and data dir; new ports
// unless fixedPorts):
// it ends its earlier session at once.
func (c *lgCluster) restart(p *lakegateProc) {
	c.t.Helper()
	i := slices.Index(c.nodes, p)
	c.nodes[i] = c.startNode(i)
}

func (c *lgCluster) startNode(i int) *lakegateProc {
	c.t.Helper()
	args := []string{"serve",
		"--data-dir", filepath.Join(c.dir, fmt.Sprintf("node%d", i)),
		"--objects", c.objects,
		"--etcd-endpoints", strings.Join(c.etcd.Endpoints, ","),
		"--pulsar-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
		"--cluster-session-ttl", clusterSessionTTL.String(),
		"--engine-node-id", fmt.Sprintf("node%d", i),
		"--log-level", "info",
	}
	if c.fixedPorts {
		if c.ports == nil {
			c.ports = map[int][]string{}
		}
		if c.ports[i] == nil {
			c.ports[i] = []string{freeAddr(c.t), freeAddr(c.t)}
		}
		args = append(args, "--pulsar-addr", c.ports[i][0], "--http-addr", c.ports[i][1])
	}
	p := startLakegateTracked(c.t, c.bin, append(args, c.flags...), func(p *lakegateProc) { c.procs = append(c.procs, p) })
	p.name = fmt.Sprintf("node%d", i)
	return p
}

// serviceURL lists every node, as a client configured for the cluster
// does (the client picks one for lookups, and moves on when it is down).
func (c *lgCluster) serviceURL() string {
	hosts := make([]string, 0, len(c.nodes))
	for _, n := range c.nodes {
		hosts = append(hosts, strings.TrimPrefix(n.pulsarURL, "pulsar://"))
	}
	return "pulsar://" + strings.Join(hosts, ",")
}

// client returns a Pulsar client on url (one node's, or serviceURL).
func (c *lgCluster) client(url string) pulsar.Client { return c.clientTimeout(url, 30*time.Second) }

// clientTimeout is client with another operation timeout (how long a
// lookup, a subscribe or a producer creation may take).
func (c *lgCluster) clientTimeout(url string, op time.Duration) pulsar.Client {
	c.t.Helper()
	logger := plog.DefaultNopLogger()
	if os.Getenv("LAKEGATE_E2E_DEBUG") != "" {
		logger = plog.NewLoggerWithLogrus(logrus.StandardLogger())
	}
	cl, err := pulsar.NewClient(pulsar.ClientOptions{
		URL: url, OperationTimeout: op, ConnectionTimeout: 2 * time.Second,
		Logger: logger,
	})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// lookup asks node's admin API who serves topic (what `pulsar-admin topics
// lookup` does) and returns the owner's pulsar URL.
func (c *lgCluster) lookup(node *lakegateProc, topic string) string {
	c.t.Helper()
	path := strings.Replace(topic, "persistent://", "/lookup/v2/topic/persistent/", 1)
	var ld struct {
		BrokerURL string `json:"brokerUrl"`
	}
	if code := httpJSON(c.t, "GET", node.httpURL+path, &ld); code != http.StatusOK {
		c.t.Fatalf("lookup %s: HTTP %d", topic, code)
	}
	return ld.BrokerURL
}

// nodeByURL is the node whose pulsar URL is url.
func (c *lgCluster) nodeByURL(url string) *lakegateProc {
	for _, n := range c.nodes {
		if n.pulsarURL == url {
			return n
		}
	}
	c.t.Fatalf("no node serves %s", url)
	return nil
}

func httpJSON(t *testing.T, method, url string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, url, http.NoBody)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode/100 == 2 && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, url, err, b)
		}
	}
	return resp.StatusCode
}

var lakegateBin struct {
	once sync.Once
	path string
	dir  string
	err  error
}

// lakegateBinary builds ./cmd/lakegate once per test process, into a
// directory of its own (removed by TestMain): test runs of other checkouts
// on the same machine never swap the binary under each other.
func lakegateBinary(t *testing.T) string {
	t.Helper()
	lakegateBin.once.Do(func() {
		root, err := testservers.RepoRoot()
		if err != nil {
			lakegateBin.err = err
			return
		}
		dir, err := os.MkdirTemp("", "lakegate-e2e-")
		if err != nil {
			lakegateBin.err = err
			return
		}
		lakegateBin.dir = dir
		bin := filepath.Join(dir, "lakegate")
		cmd := exec.Command("go", "build", "-o", bin, "./cmd/lakegate")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			lakegateBin.err = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		lakegateBin.path = bin
	})
	if lakegateBin.err != nil {
		t.Fatal(lakegateBin.err)
	}
	return lakegateBin.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if lakegateBin.dir != "" {
		os.RemoveAll(lakegateBin.dir)
	}
	os.Exit(code)
}

// signal sends sig to the node's process.
func (p *lakegateProc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatalf("signal %v: %v", sig, err)
	}
}

// waitExit waits for the process to end (after SIGTERM).
func (p *lakegateProc) waitExit(t *testing.T, within time.Duration) {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(within):
		t.Fatalf("%s did not exit within %v", p.name, within)
	}
}

// startLakegateArgs runs the binary with args and returns once it logged
// "lakegate node ready" (whose pulsar_url and http attributes give the
// addresses). The process is killed at cleanup; its log lines are kept for
// diagnostics and can be waited for (waitLog).
func startLakegateArgs(t *testing.T, bin string, args []string) *lakegateProc {
	t.Helper()
	return startLakegateTracked(t, bin, args, func(p *lakegateProc) { t.Cleanup(func() { p.kill(t) }) })
}

// startLakegateTracked is startLakegateArgs with the process handed to track
// as soon as it runs (before it is ready): track arranges its kill.
func startLakegateTracked(t *testing.T, bin string, args []string, track func(*lakegateProc)) *lakegateProc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LAKEGATE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	logs, err := cmd.StdoutPipe() // the node logs to stderr: both go here
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &lakegateProc{cmd: cmd, exited: make(chan struct{}), logLine: make(chan struct{})}
	track(p)
	ready := make(chan struct{})
	go func() {
		defer close(p.exited)
		sc := bufio.NewScanner(logs)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.logMu.Lock()
			p.logs = append(p.logs, line)
			if len(p.logs) > 5000 {
				p.logs = p.logs[len(p.logs)-4000:]
			}
			close(p.logLine)
			p.logLine = make(chan struct{})
			p.logMu.Unlock()
			if !p.ready && strings.Contains(line, "lakegate node ready") {
				p.ready = true
				p.pulsarURL = logAttr(line, "pulsar_url")
				p.pulsarTLSURL = logAttr(line, "pulsar_tls_url")
				p.kafkaAddr = logAttr(line, "kafka")
				if a := logAttr(line, "http"); a != "" {
					p.httpURL = "http://" + a
				}
				if a := logAttr(line, "https"); a != "" {
					p.httpsURL = "https://" + a
				}
				close(ready)
			}
		}
		cmd.Wait()
	}()
	select {
	case <-ready:
	case <-p.exited:
		t.Fatalf("lakegate exited before it was ready:\n%s", strings.Join(p.logTail(40), "\n"))
	}
	if (p.pulsarURL == "" && p.pulsarTLSURL == "") || (p.httpURL == "" && p.httpsURL == "") {
		t.Fatalf("no addresses in the ready line: %v", p.logTail(1))
	}
	return p
}

// logTail returns the last n log lines.
func (p *lakegateProc) logTail(n int) []string {
	p.logMu.Lock()
	defer p.logMu.Unlock()
	return append([]string(nil), p.logs[max(0, len(p.logs)-n):]...)
}

// waitLog waits until a log line contains substr (from the start of the
// log), failing after within.
func (p *lakegateProc) waitLog(t *testing.T, substr string, within time.Duration) {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for seen := 0; ; {
		p.logMu.Lock()
		for ; seen < len(p.logs); seen++ {
			if strings.Contains(p.logs[seen], substr) {
				p.logMu.Unlock()
				return
			}
		}
		next := p.logLine
		p.logMu.Unlock()
		select {
		case <-next:
		case <-p.exited:
			t.Fatalf("%s exited before logging %q", p.name, substr)
		case <-deadline.C:
			t.Fatalf("%s did not log %q within %v", p.name, substr, within)
		}
	}
}

// ctxFor is a context bounded by d and the test.
func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}
