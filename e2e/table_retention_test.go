package e2e

// Table retention through the admin API (docs/compaction.md, "Table
// retention"): the real binary with fast compaction and maintenance, a
// topic whose table policy (POST …/tablePolicy) keeps 1 byte — every file
// but the newest goes — and a durable subscription that holds the files
// until it acknowledges them; then both tables hold only the newest file's
// rows and a reader from the earliest position starts exactly there.
// GET …/{topic}/table shows the resolved policy and the last run (files
// held while the subscription has not acknowledged them, then none).
// Run: go test -count=1 -run TestTableRetentionAdmin ./e2e/

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin"
)

func TestTableRetentionAdmin(t *testing.T) {
	bin := lakegateBinary(t)
	node := startLakegate(t, bin, t.TempDir(), "--tables-age", "300ms", "--tables-interval", "100ms",
		"--tables-scan-interval", "200ms", "--tables-maintenance-interval", "300ms")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	adm, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: node.httpURL})
	if err != nil {
		t.Fatal(err)
	}
	const topic = "persistent://public/default/retained"
	if err := adm.Topics().Create(admTopic(t, topic), 0); err != nil {
		t.Fatal(err)
	}
	policyURL := node.httpURL + "/admin/v2/persistent/public/default/retained/tablePolicy"
	if status, body := httpDo(t, ctx, http.MethodPost, policyURL, `{"retentionBytes": -1}`); status != http.StatusPreconditionFailed {
		t.Fatalf("negative retention: %d %s, want 412 (an invalid argument, as for the other policies)", status, body)
	}
	postJSON(t, ctx, policyURL, `{"retentionBytes": 1}`)
	for _, u := range []string{policyURL, policyURL + "?applied=true"} {
		_, body := httpDo(t, ctx, http.MethodGet, u, "")
		var p struct {
			RetentionBytes *int64 `json:"retentionBytes"`
		}
		if err := json.Unmarshal([]byte(body), &p); err != nil || p.RetentionBytes == nil || *p.RetentionBytes != 1 {
			t.Fatalf("GET %s: %s", u, body)
		}
	}

	// A durable subscription that acknowledges nothing yet, then two
	// batches compacted apart (two files at least).
	cl := binClient(t, node.pulsarURL)
	cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "sub",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const n = 100
	for i := range n {
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
		if i == n/2-1 {
			waitForTable(t, ctx, node.httpURL, "public/default/retained", n/2, "DELTA", "ICEBERG")
		}
	}
	// Every row reaches both tables: the subscription holds them all.
	waitForTable(t, ctx, node.httpURL, "public/default/retained", n, "DELTA", "ICEBERG")

	// GET …/table shows the resolved policy and the last run: it held
	// the files the subscription still needs and removed none.
	start := time.Now().UnixMilli()
	waitRetentionRun(t, ctx, node.httpURL, "public/default/retained", "files held by the subscription",
		func(tj tableJSON) bool {
			lr := tj.Retention.LastRun
			return lr.FilesHeld > 0 && lr.FilesRemoved == 0 && lr.LiveBytes > 0 && lr.TimestampMs >= start
		})

	// Once it acknowledged everything, retention drops every file but
	// the newest from both tables and trims the topic behind them.
	for i := range n {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Payload()) != strconv.Itoa(i) {
			t.Fatalf("message %d: %q", i, m.Payload())
		}
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
	var left int64
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		tj, status, err := getTable(ctx, node.httpURL, "public/default/retained")
		if err != nil || status != http.StatusOK {
			t.Fatalf("GET table: %d %v", status, err)
		}
		rows := map[string]int64{}
		for _, f := range tj.Formats {
			rows[f.Format] = f.Rows
		}
		if d := rows["DELTA"]; d > 0 && d < n && rows["ICEBERG"] == d {
			left = d
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("retention did not remove files: %+v", tj.Formats)
		case <-tick.C:
		}
	}
	// The topic was trimmed behind the removed files: a reader from the
	// earliest position starts at the newest file's first row. (The trim
	// follows the table commits in the same run; poll for it.)
	for {
		r, err := cl.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
		if err != nil {
			t.Fatal(err)
		}
		m, err := r.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r.Close()
		if string(m.Payload()) == strconv.Itoa(int(n-left)) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("reader from the earliest starts at %q, want %d", m.Payload(), n-left)
		case <-tick.C:
		}
	}
	// Later runs find nothing left to remove or hold: one file live.
	waitRetentionRun(t, ctx, node.httpURL, "public/default/retained", "nothing held",
		func(tj tableJSON) bool {
			lr := tj.Retention.LastRun
			return lr.FilesHeld == 0 && lr.FilesRemoved == 0 && lr.LiveBytes > 0
		})
	fams := scrape(t, node.httpURL+"/metrics")
	if v, _ := familyValue(fams["lakegate_table_retention_files_removed_total"], nil); v < 1 {
		t.Fatalf("lakegate_table_retention_files_removed_total = %v", v)
	}
	t.Logf("%d rows left in the newest file, of %d", left, n)
}

// waitRetentionRun polls GET …/{topic}/table until its retention shows the
// policy of the test (retentionBytes 1, no time limit) and a last run for
// which ok holds.
func waitRetentionRun(t *testing.T, ctx context.Context, httpURL, topic, what string, ok func(tableJSON) bool) {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		tj, status, err := getTable(ctx, httpURL, topic)
		if err != nil || status != http.StatusOK {
			t.Fatalf("GET table: %d %v", status, err)
		}
		ret := tj.Retention
		if ret.RetentionBytes != 1 || ret.RetentionMs != 0 {
			t.Fatalf("table retention %+v, want the policy's retentionBytes 1", ret)
		}
		if ret.LastRun != nil && ret.LastRun.RetentionBytes == 1 && ok(tj) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no retention run with %s: last run %+v", what, ret.LastRun)
		case <-tick.C:
		}
	}
}

// httpDo sends a request and returns the status and body.
func httpDo(t *testing.T, ctx context.Context, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(fmt.Errorf("%s %s: %w", method, url, err))
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
