package main

// `lakegate admin` against a real node: an engine (embedded etcd, file
// objects), the Pulsar gateway on 127.0.0.1 and the node's HTTP handler
// (nodehttp) on an httptest server; a pulsar-client-go producer
// and consumer make stats and subscriptions real.
// Run: go test -p 1 -count=1 -run Admin ./cmd/lakegate/

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/lakegate/lakegate/adminclient"
	"github.com/lakegate/lakegate/internal/testnode"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/node"
	"github.com/lakegate/lakegate/tables"
)

// adminNode starts a node with Delta tables on by default and its HTTP
// surface (internal/testnode) and returns its table layer, admin URL and
// Pulsar URL.
func adminNode(t *testing.T) (tbl *tables.Tables, adminURL, pulsarURL string) {
	t.Helper()
	var cfg node.Config
	cfg.Tables.CompactAge = time.Millisecond // compact what is there when asked
	on := true
	n := testnode.Start(t, testnode.Config{
		Node:            cfg,
		Materialization: &lakestream.TableMaterializationPolicy{Enabled: &on, Catalogs: []string{"DELTA"}},
		HTTP:            true,
		Logger:          slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	return n.Tables, n.HTTP.URL, n.Gateway.ServiceURL()
}

// admin runs `lakegate admin args...` with LAKEGATE_ADMIN_URL=url.
func admin(t *testing.T, url string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := runAdmin(args, []string{"LAKEGATE_ADMIN_URL=" + url}, &out)
	return out.String(), err
}

func mustAdmin(t *testing.T, url string, args ...string) string {
	t.Helper()
	out, err := admin(t, url, args...)
	if err != nil {
		t.Fatalf("admin %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// row finds the output line starting with first and returns its fields
// (split on runs of 2+ spaces, the tabwriter padding).
func row(t *testing.T, out, first string) []string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		f := regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(line), -1)
		if len(f) > 0 && f[0] == first {
			return f
		}
	}
	t.Fatalf("no row %q in:\n%s", first, out)
	return nil
}

func TestAdminCLI(t *testing.T) {
	eng, url, pulsarURL := adminNode(t)

	// topics create / list, partitioned and not.
	out := mustAdmin(t, url, "topics", "create", "orders", "--partitions", "3")
	if !strings.Contains(out, "persistent://public/default/orders with 3 partitions") {
		t.Fatalf("create: %q", out)
	}
	mustAdmin(t, url, "topics", "create", "persistent://public/default/events")
	out = mustAdmin(t, url, "topics", "list", "public/default")
	t.Logf("topics list:\n%s", out)
	if got := row(t, out, "persistent://public/default/orders"); got[1] != "3" {
		t.Fatalf("orders row %q", got)
	}
	if got := row(t, out, "persistent://public/default/events"); got[1] != "-" {
		t.Fatalf("events row %q", got)
	}
	if strings.Contains(out, "orders-partition-") {
		t.Fatalf("partitions listed as topics:\n%s", out)
	}
	out = mustAdmin(t, url, "--json", "topics", "list", "public/default")
	if !strings.Contains(out, `"partitioned"`) || !strings.Contains(out, "persistent://public/default/orders") {
		t.Fatalf("--json list: %s", out)
	}

	// A real load: 10 messages to events, a subscription that acks 4.
	cl, err := pulsar.NewClient(pulsar.ClientOptions{URL: pulsarURL, OperationTimeout: 30 * time.Second, Logger: plog.DefaultNopLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topic := "persistent://public/default/events"
	cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "audit",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, Type: pulsar.Shared, AckWithResponse: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	sendStart := time.Now()
	var ids []pulsar.MessageID
	for i := range 10 {
		id, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "event-%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	for i := range 4 {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := cons.Ack(m); err != nil { // waits for the ack's response
			t.Fatalf("ack %d: %v", i, err)
		}
	}

	out = mustAdmin(t, url, "topics", "stats", "events")
	t.Logf("topics stats:\n%s", out)
	if got := row(t, out, "MESSAGES IN"); got[1] != "10" {
		t.Fatalf("MESSAGES IN %q", got)
	}
	if got := row(t, out, "PRODUCERS"); got[1] != "1" {
		t.Fatalf("PRODUCERS %q", got)
	}
	if got := row(t, out, "audit"); got[1] != "Shared" || got[3] != "1" || got[4] != "6" {
		t.Fatalf("audit row %q (want Shared, 1 consumer, backlog 6)", got)
	}
	out = mustAdmin(t, url, "--json", "topics", "stats", "events")
	if !strings.Contains(out, `"msgInCounter": 10`) {
		t.Fatalf("--json stats: %s", out)
	}

	out = mustAdmin(t, url, "subscriptions", "list", "public/default/events")
	t.Logf("subscriptions list:\n%s", out)
	if got := row(t, out, "audit"); got[4] != "6" {
		t.Fatalf("audit row %q", got)
	}

	// Reset by message id, then by time: the backlog follows.
	cons.Close() // the reset needs no consumer attached to compare backlogs
	mustAdmin(t, url, "subscriptions", "reset", "events", "audit", "--id", fmt.Sprintf("%d:%d", ids[8].LedgerID(), ids[8].EntryID()))
	out = mustAdmin(t, url, "subscriptions", "list", "events")
	if got := row(t, out, "audit"); got[4] != "2" {
		t.Fatalf("after reset --id to the 9th message: audit row %q, want backlog 2", got)
	}
	mustAdmin(t, url, "subscriptions", "reset", "events", "audit", "--time", fmt.Sprint(sendStart.Add(-time.Second).UnixMilli()))
	out = mustAdmin(t, url, "subscriptions", "list", "events")
	if got := row(t, out, "audit"); got[4] != "10" {
		t.Fatalf("after reset --time before the sends: audit row %q, want backlog 10", got)
	}
	mustAdmin(t, url, "subscriptions", "reset", "events", "audit", "--id", "latest")
	out = mustAdmin(t, url, "subscriptions", "list", "events")
	if got := row(t, out, "audit"); got[4] != "0" {
		t.Fatalf("after reset --id latest: audit row %q, want backlog 0", got)
	}

	// tables: before any compaction the server says why there is none;
	// after one (the compaction worker's call, made here directly) the
	// table holds the 10 messages.
	out, err = admin(t, url, "tables", "events")
	t.Logf("tables events before compaction: %v\n%s", err, out)
	if err != nil && !strings.Contains(err.Error(), "HTTP ") {
		t.Fatalf("tables: %v", err)
	}
	id := lakestream.StreamIdentifier{Namespace: "public/default", Name: "events"}
	st, err := eng.Materialize(ctx, lakestream.LogID(ids[0].LedgerID()),
		tables.Target{Root: tables.TableRoot(id), Partition: -1, Delta: true})
	if err != nil {
		t.Fatal(err)
	}
	if st.Records != 10 {
		t.Fatalf("compacted %d records, want 10", st.Records)
	}
	out = mustAdmin(t, url, "tables", "events")
	t.Logf("tables events:\n%s", out)
	row(t, out, "LOCATION")
	if got := row(t, out, "DELTA"); got[2] != "10" || got[3] != "1" {
		t.Fatalf("DELTA row %q, want 10 rows in 1 file", got)
	}
	if got := row(t, out, "-"); got[2] != "10" || got[3] != "10" || got[4] != "0" || got[5] != "0s" {
		t.Fatalf("partition row %q, want compacted end 10, log end 10, lag 0, lag age 0s", got)
	}
	// Table retention: no policy and no run yet; then a run as the
	// compaction owner records it after ApplyRetention.
	if got := row(t, out, "RETENTION"); got[1] != "time none, size none" {
		t.Fatalf("RETENTION row %q", got)
	}
	if got := row(t, out, "LAST RUN"); got[1] != "never" {
		t.Fatalf("LAST RUN row %q", got)
	}
	if err := eng.RecordRetention(ctx, tables.TableRoot(id), tables.Retention{Bytes: 1000},
		tables.RetentionStats{Files: 2, Bytes: 300, Held: 1, LiveBytes: 900}); err != nil {
		t.Fatal(err)
	}
	out = mustAdmin(t, url, "tables", "events")
	if got := row(t, out, "LAST RUN"); !strings.HasSuffix(got[1], ": 2 files (300 bytes) removed, 1 held, 900 bytes live") {
		t.Fatalf("LAST RUN row %q", got)
	}
	// Two records after the table: the lag counts them, and its age is
	// the first one's (written after lagFrom).
	lagFrom := time.Now()
	for range 2 {
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("late")}); err != nil {
			t.Fatal(err)
		}
	}
	out = mustAdmin(t, url, "tables", "events")
	got := row(t, out, "-")
	age, err := time.ParseDuration(got[5])
	if got[3] != "12" || got[4] != "2" || err != nil || age <= 0 || age > time.Since(lagFrom)+time.Second {
		t.Fatalf("partition row %q, want log end 12, lag 2, lag age in (0, %v]", got, time.Since(lagFrom))
	}
	out = mustAdmin(t, url, "--json", "tables", "events")
	if !strings.Contains(out, `"lagSeconds": `) {
		t.Fatalf("--json tables without lagSeconds: %s", out)
	}
	if !strings.Contains(out, `"rows": 10`) || !strings.Contains(out, `"filesRemoved": 2`) || !strings.Contains(out, `"retentionBytes": 1000`) {
		t.Fatalf("--json tables: %s", out)
	}

	// Server errors print the status and the server's reason.
	_, err = admin(t, url, "tables", "no-such-topic")
	var he *adminclient.HTTPError
	if !errors.As(err, &he) || he.Status != 404 || he.Reason == "" || !strings.Contains(err.Error(), "HTTP 404 Not Found: ") {
		t.Fatalf("tables of a missing topic: %v", err)
	}
	_, err = admin(t, url, "topics", "create", "events")
	if !errors.As(err, &he) || he.Status != 409 || he.Reason == "" {
		t.Fatalf("creating an existing topic: %v", err)
	}
	t.Logf("server error as shown: %v", err)
	_, err = admin(t, url, "subscriptions", "reset", "events", "nosub", "--id", "earliest")
	if !errors.As(err, &he) || he.Status != 404 {
		t.Fatalf("reset of a missing subscription: %v", err)
	}

	if out, err := admin(t, url, "--help"); err != nil || !strings.Contains(out, "usage: lakegate admin") {
		t.Errorf("--help: %v %q", err, out)
	}
	if _, err := admin(t, url); err == nil {
		t.Error("no command: no error")
	}

	// Bad input is a clear error, not a request.
	for _, args := range [][]string{
		{"topics", "create", "a/b"},
		{"topics", "create", "x", "--partitions", "-2"},
		{"subscriptions", "reset", "events", "audit"},
		{"subscriptions", "reset", "events", "audit", "--id", "1:x"},
		{"subscriptions", "reset", "events", "audit", "--time", "yesterday"},
		{"topics", "stats"},
		{"frobnicate"},
		{"--url", "ftp://x", "topics", "list", "public/default"},
	} {
		if _, err := admin(t, url, args...); err == nil {
			t.Errorf("admin %q: no error", args)
		}
	}

	// A partitioned topic's stats come from partitioned-stats.
	out = mustAdmin(t, url, "topics", "stats", "orders")
	if got := row(t, out, "PARTITIONS"); got[1] != "3" {
		t.Fatalf("orders stats PARTITIONS %q\n%s", got, out)
	}
	out = mustAdmin(t, url, "subscriptions", "list", "orders")
	if strings.TrimSpace(out) != "SUBSCRIPTION  TYPE  DURABLE  CONSUMERS  BACKLOG  BACKLOG BYTES  UNACKED" {
		t.Fatalf("orders subscriptions: %q", out)
	}

	// delete: the partitioned one goes through /partitions.
	mustAdmin(t, url, "topics", "delete", "orders")
	p.Close()
	mustAdmin(t, url, "topics", "delete", "events", "--force")
	out = mustAdmin(t, url, "topics", "list", "public/default")
	if strings.Contains(out, "orders") || strings.Contains(out, "events") {
		t.Fatalf("deleted topics still listed:\n%s", out)
	}

	// An unreachable server is named in the error.
	if _, err := admin(t, "http://127.0.0.1:1", "topics", "list", "public/default"); err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("unreachable server: %v", err)
	}
}

// TestAdminCLITransactions: the transactions commands against a node
// with a transaction of the Go client open, then aborted by the CLI.
func TestAdminCLITransactions(t *testing.T) {
	_, url, pulsarURL := adminNode(t)
	cl, err := pulsar.NewClient(pulsar.ClientOptions{URL: pulsarURL, OperationTimeout: 30 * time.Second,
		EnableTransaction: true, Logger: plog.DefaultNopLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const topic = "persistent://public/default/txn-cli"
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	tx, err := cl.NewTransaction(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("x"), Transaction: tx}); err != nil {
		t.Fatal(err)
	}
	id := tx.GetTxnID()
	most, least := fmt.Sprint(id.MostSigBits), fmt.Sprint(id.LeastSigBits)

	out := mustAdmin(t, url, "transactions", "stats")
	t.Logf("transactions stats:\n%s", out)
	if got := row(t, out, most); got[1] != "Ready" || got[2] != "1" {
		t.Fatalf("coordinator %s row %q (want Ready, 1 ongoing)", most, got)
	}
	out = mustAdmin(t, url, "transactions", "metadata", most, least)
	t.Logf("transactions metadata:\n%s", out)
	if got := row(t, out, "STATUS"); got[1] != "OPEN" {
		t.Fatalf("STATUS %q", got)
	}
	if got := row(t, out, "PRODUCES TO"); got[1] != topic {
		t.Fatalf("PRODUCES TO %q", got)
	}
	out = mustAdmin(t, url, "transactions", "slow", "0s")
	if got := row(t, out, fmt.Sprintf("(%s,%s)", most, least)); got[1] != "OPEN" || got[4] != "1" {
		t.Fatalf("slow row %q", got)
	}
	out = mustAdmin(t, url, "transactions", "abort", most, least)
	if !strings.Contains(out, "aborted transaction") {
		t.Fatalf("abort: %q", out)
	}
	if got := row(t, mustAdmin(t, url, "transactions", "metadata", most, least), "STATUS"); got[1] != "ABORTED" {
		t.Fatalf("after abort: STATUS %q", got)
	}
	if err := tx.Commit(ctx); err == nil {
		t.Fatal("the client committed a transaction the CLI aborted")
	}
	_, err = admin(t, url, "transactions", "metadata", most, "999999")
	var he *adminclient.HTTPError
	if !errors.As(err, &he) || he.Status != 404 {
		t.Fatalf("unknown transaction: %v", err)
	}
}
