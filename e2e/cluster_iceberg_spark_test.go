package e2e

// Spark 3.5 with iceberg-spark-runtime against lakegate's Iceberg REST
// catalog on a three-node cluster (docs/iceberg-catalog.md): one Spark
// session with a REST catalog per node reads a topic's table through every
// node, creates a user table and appends to it through two nodes; pyiceberg
// then counts what Spark wrote. OAuth2 client credentials are on. Needs
// LAKEGATE_SPARK_PYTHON (pyspark), LAKEGATE_ICEBERG_SPARK_JAR (the runtime
// jar) and LAKEGATE_PYICEBERG; e2e/interop/iceberg-catalog/run.sh sets them.

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/lakegate/lakegate/internal/testservers"
)

func TestClusterIcebergCatalogSpark(t *testing.T) {
	python, jar, pyiceberg := os.Getenv("LAKEGATE_SPARK_PYTHON"), os.Getenv("LAKEGATE_ICEBERG_SPARK_JAR"), os.Getenv("LAKEGATE_PYICEBERG")
	if python == "" || jar == "" || pyiceberg == "" {
		t.Skip("LAKEGATE_SPARK_PYTHON, LAKEGATE_ICEBERG_SPARK_JAR or LAKEGATE_PYICEBERG not set (e2e/interop/iceberg-catalog/run.sh)")
	}
	root, err := testservers.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "e2e", "interop", "iceberg-catalog")
	const cred = "spark:s3cret"
	c := startLGCluster(t, 3, "file://"+filepath.ToSlash(t.TempDir()),
		"--tables-age", "200ms", "--tables-interval", "300ms", "--tables-scan-interval", "500ms",
		"--tables-iceberg-clients", cred, "--tables-iceberg-token-key", "cluster-key",
		"--tables-iceberg-allow-writes") // no auth.authorization here: writes are opened explicitly
	ctx := ctxFor(t, 10*time.Minute)

	if code := admDo(t, http.MethodPut, c.nodes[0].httpURL+"/admin/v2/persistent/public/default/orders/partitions", "application/json", "2", nil); code/100 != 2 {
		t.Fatalf("create topic: HTTP %d", code)
	}
	const n = 100
	p, err := c.client(c.serviceURL()).CreateProducer(pulsar.ProducerOptions{Topic: "persistent://public/default/orders"})
	if err != nil {
		t.Fatal(err)
	}
	var payloads []string
	for i := range n {
		b := fmt.Sprintf("order-%03d", i)
		payloads = append(payloads, b)
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Key: fmt.Sprint(i), Payload: []byte(b)}); err != nil {
			t.Fatal(err)
		}
	}
	p.Close()
	waitForTable(t, ctx, c.nodes[1].httpURL, "public/default/orders", n, "DELTA", "ICEBERG")
	slices.Sort(payloads)
	h := sha256.New()
	for _, b := range payloads {
		h.Write([]byte(b))
	}
	wantSum := fmt.Sprintf("%x", h.Sum(nil))

	var uris []string
	for _, node := range c.nodes {
		uris = append(uris, node.httpURL+"/iceberg")
	}
	const per = 5
	cmd := exec.CommandContext(ctx, python, filepath.Join(dir, "check_spark.py"), "--jar", jar, "--uris", strings.Join(uris, ","),
		"--credential", cred, "--topic", "public.default.orders", "--user-table", "analytics.spark_events", "--per", fmt.Sprint(per))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("check_spark.py: %v\n%s\n%s", err, out, tail(stderr.String(), 4000))
	}
	var res struct {
		Reads []struct {
			Catalog string `json:"catalog"`
			Rows    int    `json:"rows"`
			Sum     string `json:"payloads_sha256"`
		} `json:"reads"`
		User struct {
			Rows, Distinct, Snapshots int
		} `json:"user"`
		Spark string `json:"spark"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("check_spark.py output %q: %v", out, err)
	}
	if len(res.Reads) != len(c.nodes) {
		t.Fatalf("Spark read through %d nodes: %s", len(res.Reads), out)
	}
	for _, r := range res.Reads {
		if r.Rows != n || r.Sum != wantSum {
			t.Fatalf("Spark through %s: %d rows, sum %s; want %d, %s", r.Catalog, r.Rows, r.Sum, n, wantSum)
		}
	}
	if res.User.Rows != 2*per || res.User.Distinct != 2*per || res.User.Snapshots != 2*per {
		t.Fatalf("Spark's appends through two nodes: %+v, want %d rows, distinct, snapshots", res.User, 2*per)
	}
	t.Logf("Spark %s: topic table read through %d nodes; %d appends through two nodes", res.Spark, len(res.Reads), 2*per)

	// pyiceberg reads what Spark wrote.
	o, err := exec.CommandContext(ctx, pyiceberg, filepath.Join(dir, "check_catalog.py"), "count", "--uri", c.nodes[2].httpURL+"/iceberg",
		"--credential", cred, "--table", "analytics.spark_events").CombinedOutput()
	if err != nil || !strings.Contains(string(o), fmt.Sprintf("rows=%d distinct=%d snapshots=%d", 2*per, 2*per, 2*per)) {
		t.Fatalf("pyiceberg counts Spark's table: %s %v", o, err)
	}
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
