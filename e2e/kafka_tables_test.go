package e2e

// A Kafka topic's table: records a Kafka producer wrote and messages a
// Pulsar producer wrote land as the same rows, and a Kafka consumer reads
// the range compacted into Parquet.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKafkaTables: 10 Kafka records and 10 Pulsar messages with the same
// keys, values, headers/properties and timestamps; once compacted, the
// table holds 20 rows whose message columns match pairwise, and a Kafka
// consumer from offset 0 reads all 20 from the Parquet files.
func TestKafkaTables(t *testing.T) {
	bin := lakegateBinary(t)
	dir := t.TempDir()
	node := startLakegate(t, bin, dir, "--kafka-addr", "127.0.0.1:0",
		"--tables-age", "300ms", "--tables-interval", "100ms", "--tables-scan-interval", "200ms")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	kc, err := kgo.NewClient(kgo.SeedBrokers(node.kafkaAddr), kgo.DefaultProduceTopic("lake"))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	createKafkaTopic(t, kc, "lake", 1)
	base := time.UnixMilli(1_700_000_000_000)
	for i := range 10 {
		r := &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, `{"i":%d}`, i),
			Headers: []kgo.RecordHeader{{Key: "i", Value: fmt.Appendf(nil, "%d", i)}}, Timestamp: base.Add(time.Duration(i) * time.Second)}
		if err := kc.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	pc := binClient(t, node.pulsarURL)
	p, err := pc.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://public/default/lake-partition-0"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Key: fmt.Sprintf("k%d", i), Payload: fmt.Appendf(nil, `{"i":%d}`, i),
			Properties: map[string]string{"i": fmt.Sprint(i)}, EventTime: base.Add(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	p.Close()
	waitForTable(t, ctx, node.httpURL, "public/default/lake", 20, "DELTA", "ICEBERG")
	for {
		tj, _, err := getTable(ctx, node.httpURL, "public/default/lake")
		if err != nil {
			t.Fatal(err)
		}
		if len(tj.Partitions) == 1 && tj.Partitions[0].CompactedEnd == 20 {
			break // the log's index names Parquet for every offset
		}
		if ctx.Err() != nil {
			t.Fatalf("compacted end: %+v", tj.Partitions)
		}
	}

	// The rows: the message columns of each Kafka record's row equal
	// those of the Pulsar message with the same key.
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "table", "scan", "--data-dir", dir, "--format", "json", "lake")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("table scan: %v\n%s", err, stderr.String())
	}
	compared := []string{"__key", "__payload", "__properties", "__event_time", "__null_key", "__null_value", "__ordering_key", "__partition"}
	byKey := map[string][]map[string]any{}
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var row map[string]any
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatal(err)
		}
		k := fmt.Sprint(row["__key"])
		byKey[k] = append(byKey[k], row)
	}
	if len(byKey) != 10 {
		t.Fatalf("%d keys in the table, want 10", len(byKey))
	}
	for k, rows := range byKey {
		if len(rows) != 2 {
			t.Fatalf("key %s: %d rows, want 2", k, len(rows))
		}
		for _, col := range compared {
			a, b := fmt.Sprint(rows[0][col]), fmt.Sprint(rows[1][col])
			if a != b {
				t.Errorf("key %s column %s: %s (producer %v) vs %s (producer %v)", k, col, a, rows[0]["__producer_name"], b, rows[1]["__producer_name"])
			}
		}
	}

	// A Kafka consumer reads the compacted range.
	cons, err := kgo.NewClient(kgo.SeedBrokers(node.kafkaAddr), kgo.ConsumeTopics("lake"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var got []*kgo.Record
	for len(got) < 20 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of 20", len(got))
		}
		got = append(got, fs.Records()...)
	}
	// The listener's metrics count both ways.
	fams := scrape(t, node.httpURL+"/metrics")
	for name, least := range map[string]float64{"lakegate_kafka_produced_records_total": 10, "lakegate_kafka_fetched_records_total": 20,
		"lakegate_kafka_connections_total": 2} {
		f := fams[name]
		if f == nil || len(f.Metric) == 0 || f.Metric[0].GetCounter().GetValue() < least {
			t.Errorf("%s: %v, want at least %v", name, f, least)
		}
	}
	if f := fams["lakegate_kafka_requests_total"]; f == nil || len(f.Metric) < 3 {
		t.Errorf("lakegate_kafka_requests_total: %v", f)
	}
	for i, r := range got {
		j := i % 10
		if r.Offset != int64(i) || string(r.Key) != fmt.Sprintf("k%d", j) || string(r.Value) != fmt.Sprintf(`{"i":%d}`, j) ||
			len(r.Headers) != 1 || string(r.Headers[0].Value) != fmt.Sprint(j) || !r.Timestamp.Equal(base.Add(time.Duration(j)*time.Second)) {
			t.Fatalf("record %d from Parquet: offset %d key %q value %q headers %v ts %v", i, r.Offset, r.Key, r.Value, r.Headers, r.Timestamp)
		}
	}
}
