package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin"
)

// tableJSON is the part of GET …/{topic}/table the tests read.
type tableJSON struct {
	Location string `json:"location"`
	Formats  []struct {
		Format string `json:"format"`
		URI    string `json:"uri"`
		Rows   int64  `json:"rows"`
	} `json:"formats"`
	Partitions []struct {
		Partition    int   `json:"partition"`
		CompactedEnd int64 `json:"compactedEndOffset"`
		LogEnd       int64 `json:"logEndOffset"`
		Lag          int64 `json:"lag"`
	} `json:"partitions"`
	Retention struct {
		RetentionMs    int64 `json:"retentionMs"`
		RetentionBytes int64 `json:"retentionBytes"`
		LastRun        *struct {
			TimestampMs    int64 `json:"timestamp"`
			RetentionBytes int64 `json:"retentionBytes"`
			FilesRemoved   int   `json:"filesRemoved"`
			FilesHeld      int   `json:"filesHeld"`
			LiveBytes      int64 `json:"liveBytes"`
		} `json:"lastRun"`
	} `json:"retention"`
}

// getTable fetches a topic's table description; status 404 means none yet.
func getTable(ctx context.Context, httpURL, topic string) (tableJSON, int, error) {
	var tj tableJSON
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, httpURL+"/admin/v2/persistent/"+topic+"/table", nil)
	if err != nil {
		return tj, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return tj, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return tj, resp.StatusCode, nil
	}
	return tj, resp.StatusCode, json.NewDecoder(resp.Body).Decode(&tj)
}

// waitForTable polls the table endpoint until every format holds want rows
// and no partition lags, or the context ends. Polling (not sleeping) is the
// wait: compaction runs by age on the node's own schedule.
func waitForTable(t *testing.T, ctx context.Context, httpURL, topic string, want int64, formats ...string) tableJSON {
	t.Helper()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var last tableJSON
	lastStatus := 0
	for {
		tj, status, err := getTable(ctx, httpURL, topic)
		if err != nil && ctx.Err() == nil {
			t.Fatalf("GET table: %v", err)
		}
		last, lastStatus = tj, status
		if status == http.StatusOK && tableComplete(tj, want, formats) {
			return tj
		}
		select {
		case <-ctx.Done():
			t.Fatalf("table of %s not complete (want %d rows in %v): status %d, last %+v", topic, want, formats, lastStatus, last)
		case <-tick.C:
		}
	}
}

func tableComplete(tj tableJSON, want int64, formats []string) bool {
	rows := map[string]int64{}
	for _, f := range tj.Formats {
		rows[f.Format] = f.Rows
	}
	for _, f := range formats {
		if rows[f] != want {
			return false
		}
	}
	for _, p := range tj.Partitions {
		if p.Lag != 0 {
			return false
		}
	}
	return true
}

// postJSON POSTs a JSON body and fails the test unless the answer is 2xx.
func postJSON(t *testing.T, ctx context.Context, url, body string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s: %s: %s", url, resp.Status, b)
	}
}

// sentMsg is what the producer sent as message i.
type sentMsg struct {
	key     string
	payload []byte
	props   map[string]string
	event   time.Time
}

// TestTablesCompactByAge runs the real binary with a short compaction age,
// produces to a 4-partition topic with batching and compression, waits for
// the table to hold every message, then checks the rows three ways: the
// admin /table endpoint (row counts, no lag), `lakegate table scan --format
// json` (every message's key, payload, properties, event time), and a
// consumer from the earliest position, now served from the Parquet files.
func TestTablesCompactByAge(t *testing.T) {
	bin := lakegateBinary(t)
	dir := t.TempDir()
	node := startLakegate(t, bin, dir, "--tables-age", "300ms", "--tables-interval", "100ms", "--tables-scan-interval", "200ms")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	adm, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: node.httpURL})
	if err != nil {
		t.Fatal(err)
	}
	const topic = "persistent://public/default/orders"
	if err := adm.Topics().Create(admTopic(t, topic), 4); err != nil {
		t.Fatal(err)
	}
	// Namespace policies, set before their topics exist: Delta only, and
	// no tables at all.
	for ns, policy := range map[string]string{"public/deltaonly": `{"formats":["delta"]}`, "public/notables": `{"enabled":false}`} {
		if err := adm.Namespaces().CreateNamespace(ns); err != nil {
			t.Fatal(err)
		}
		postJSON(t, ctx, node.httpURL+"/admin/v2/namespaces/"+ns+"/tablePolicy", policy)
	}
	cl := binClient(t, node.pulsarURL)
	for _, other := range []string{"persistent://public/deltaonly/audit", "persistent://public/notables/private"} {
		op, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: other})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 100 {
			if _, err := op.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(strconv.Itoa(i))}); err != nil {
				t.Fatal(err)
			}
		}
		op.Close()
	}
	p, err := cl.CreateProducer(pulsar.ProducerOptions{
		Topic: topic, CompressionType: pulsar.LZ4,
		BatchingMaxMessages: 50, BatchingMaxPublishDelay: 5 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	const n = 3000
	sent := make([]sentMsg, n)
	base := time.UnixMilli(1_700_000_000_000)
	msgs := make([]*pulsar.ProducerMessage, n)
	for i := range n {
		sent[i] = sentMsg{
			key:     "k" + strconv.Itoa(i%37),
			payload: fmt.Appendf(nil, `{"i":%d,"pad":"%x"}`, i, i*7919),
			props:   map[string]string{"i": strconv.Itoa(i), "src": "e2e"},
			event:   base.Add(time.Duration(i) * time.Millisecond),
		}
		msgs[i] = &pulsar.ProducerMessage{Key: sent[i].key, Payload: sent[i].payload, Properties: sent[i].props, EventTime: sent[i].event}
	}
	sendAllAsync(t, ctx, p, msgs)

	tj := waitForTable(t, ctx, node.httpURL, "public/default/orders", n, "DELTA", "ICEBERG")
	if len(tj.Partitions) != 4 {
		t.Fatalf("table partitions = %d, want 4", len(tj.Partitions))
	}
	// The namespace policies: audit in Delta only, private nowhere.
	audit := waitForTable(t, ctx, node.httpURL, "public/deltaonly/audit", 100, "DELTA")
	if len(audit.Formats) != 1 {
		t.Fatalf("audit table formats %+v, want DELTA only", audit.Formats)
	}
	if _, status, err := getTable(ctx, node.httpURL, "public/notables/private"); err != nil || status != http.StatusNotFound {
		t.Fatalf("private table: status %d, %v; want 404 (tables disabled)", status, err)
	}
	t.Logf("table %s: %+v", tj.Location, tj.Formats)

	// The CLI reads the same rows from the object store.
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "table", "scan", "--data-dir", dir, "--format", "json", "orders")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("table scan: %v\n%s", err, stderr.String())
	}
	seen := make([]bool, n)
	rows := 0
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var row struct {
			Key     string `json:"__key"`
			Payload string `json:"__payload"`
			Event   string `json:"__event_time"`
			Props   any    `json:"__properties"`
		}
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatalf("row %d: %v: %s", rows, err, sc.Text())
		}
		rows++
		payload, err := base64.StdEncoding.DecodeString(row.Payload)
		if err != nil {
			t.Fatalf("row %d payload: %v", rows, err)
		}
		var v struct{ I int }
		if err := json.Unmarshal(payload, &v); err != nil || v.I < 0 || v.I >= n {
			t.Fatalf("row %d: payload %q", rows, payload)
		}
		want := sent[v.I]
		if seen[v.I] {
			t.Fatalf("message %d twice in the table", v.I)
		}
		seen[v.I] = true
		if row.Key != want.key || !bytes.Equal(payload, want.payload) {
			t.Fatalf("message %d: key %q payload %q, want %q %q", v.I, row.Key, payload, want.key, want.payload)
		}
		props := fmt.Sprint(row.Props)
		if !bytes.Contains([]byte(props), []byte(strconv.Itoa(v.I))) || !bytes.Contains([]byte(props), []byte("e2e")) {
			t.Fatalf("message %d: properties %s", v.I, props)
		}
		ev, err := time.Parse(time.RFC3339Nano, row.Event)
		if err != nil {
			ev, err = time.Parse("2006-01-02 15:04:05.999999999Z07:00", row.Event)
		}
		if err != nil || !ev.Equal(want.event) {
			t.Fatalf("message %d: event time %q (%v), want %v", v.I, row.Event, err, want.event)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if rows != n {
		t.Fatalf("table scan printed %d rows, want %d", rows, n)
	}

	// A consumer from the earliest position reads the compacted offsets:
	// every message back, exactly as sent.
	cons, err := cl.Subscribe(pulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "after-compaction", Type: pulsar.Shared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := make([]bool, n)
	for range n {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		i, err := strconv.Atoi(m.Properties()["i"])
		if err != nil || i < 0 || i >= n || got[i] {
			t.Fatalf("unexpected message %q (props %v, seen %v)", m.Payload(), m.Properties(), err == nil && i >= 0 && i < n && got[i])
		}
		got[i] = true
		w := sent[i]
		if m.Key() != w.key || !bytes.Equal(m.Payload(), w.payload) || !m.EventTime().Equal(w.event) || m.Properties()["src"] != "e2e" {
			t.Fatalf("message %d differs: key %q payload %q event %v", i, m.Key(), m.Payload(), m.EventTime())
		}
		cons.Ack(m)
	}
}

// sendAllAsync sends msgs with SendAsync, flushes, and fails the test on
// the first send error once every callback has run.
func sendAllAsync(t *testing.T, ctx context.Context, p pulsar.Producer, msgs []*pulsar.ProducerMessage) {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var sendErr error
	for _, m := range msgs {
		wg.Add(1)
		p.SendAsync(ctx, m, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				sendErr = err
				mu.Unlock()
			}
		})
	}
	if err := p.FlushWithCtx(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if sendErr != nil {
		t.Fatalf("send: %v", sendErr)
	}
}
