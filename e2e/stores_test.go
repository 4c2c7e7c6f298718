package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/internal/testnode"
	"github.com/lakegate/lakegate/internal/testservers"
	"github.com/lakegate/lakegate/lakehouse"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/node"
	"github.com/lakegate/lakegate/objstore"
)

// TestTablesOnEveryStore runs the shared scenario — produce, consume,
// compact by age into Delta and Iceberg, collect the WAL, read the table,
// consume again from Parquet — with the objects on a local directory, S3
// (SeaweedFS), GCS (fake-gcs-server) and Azure Blob (Azurite), each
// configured by URL as a user would.
func TestTablesOnEveryStore(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) string
	}{
		{"File", func(t *testing.T) string { return "file://" + t.TempDir() }},
		{"S3", func(t *testing.T) string { return testservers.StartSeaweed(t).URL + "&prefix=lakegate/" }},
		{"GCS", func(t *testing.T) string { return testservers.StartGCS(t).URL + "&prefix=lakegate/" }},
		{"Azure", func(t *testing.T) string { return testservers.StartAzurite(t).URL + "&prefix=lakegate/" }},
	} {
		t.Run(tc.name, func(t *testing.T) { storeScenario(t, tc.store(t)) })
	}
}

func storeScenario(t *testing.T, storeURL string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := node.Config{ObjectURL: storeURL, GCInterval: 200 * time.Millisecond}
	cfg.Tables.CompactAge = 200 * time.Millisecond
	cfg.Engine.Linger = 5 * time.Millisecond // remote stores default to 250 ms
	on := true
	c := startNode(t, testnode.Config{
		Node:            cfg,
		Materialization: &lakestream.TableMaterializationPolicy{Enabled: &on},
		Materializer: &actors.MaterializationWorkerOptions{
			ScanInterval: 200 * time.Millisecond,
			Policy:       actors.MaterializationPolicy{Interval: 100 * time.Millisecond, BackoffMin: 100 * time.Millisecond, BackoffMax: time.Second},
		},
	})
	n, cat, gw := c.node, c.catalog, c.gw

	const topic = "persistent://public/default/events"
	id := lakestream.StreamIdentifier{Namespace: "public/default", Name: "events"}
	if _, err := cat.CreateStream(ctx, id, lakestream.StreamConfig{}, lakestream.Partitioning{NumPartitions: 2},
		lakestream.SchemaConfig{Type: lakestream.SchemaNone}, nil, nil); err != nil {
		t.Fatal(err)
	}
	cl, err := pulsar.NewClient(pulsar.ClientOptions{URL: gw.ServiceURL(), OperationTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, CompressionType: pulsar.ZSTD, BatchingMaxPublishDelay: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const total = 400
	sent := map[string][]byte{}
	for i := range total {
		k := strconv.Itoa(i)
		sent[k] = fmt.Appendf(nil, "event %d on %s", i, storeURL)
		p.SendAsync(ctx, &pulsar.ProducerMessage{Key: "k" + strconv.Itoa(i%7), Payload: sent[k], Properties: map[string]string{"i": k}},
			func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
				if err != nil {
					t.Errorf("send: %v", err)
				}
			})
	}
	if err := p.FlushWithCtx(ctx); err != nil {
		t.Fatal(err)
	}
	consumeAll := func(sub string) map[string]string {
		t.Helper()
		c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: sub,
			SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		got := map[string]string{}
		for range total {
			m, err := c.Receive(ctx)
			if err != nil {
				t.Fatal(err)
			}
			i := m.Properties()["i"]
			if !bytes.Equal(m.Payload(), sent[i]) {
				t.Fatalf("%s: message %s payload %q", sub, i, m.Payload())
			}
			got[i] = fmt.Sprint(m.ID())
			c.Ack(m)
		}
		return got
	}
	before := consumeAll("before")

	// Compaction by age into both formats, then GC of the WAL.
	s, err := cat.Stream(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		info, err := s.Table().Info(ctx)
		done := err == nil && len(info.Formats) == 2
		for _, f := range info.Formats {
			done = done && f.Rows == total
		}
		for _, p := range info.Partitions {
			done = done && p.CompactedEnd == p.LogEnd
		}
		if done {
			t.Logf("table at %s: %d formats, %d rows", info.Location, len(info.Formats), total)
			break
		}
		if err != nil && !errors.Is(err, lakestream.ErrNotMaterialized) {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("table not complete: %+v, %v", info, err)
		case <-tick.C:
		}
	}
	for {
		// On file:// the node appends its flushes to a WAL segment
		// (docs/index-format.md, "WAL segments"): the last one is
		// collected once it is retired (at most PendingWindow after it was
		// made) and its window's intent is gone, some seconds after the
		// compaction.
		wal := 0
		if err := n.Store.List(ctx, "wal/", func(oi objstore.ObjectInfo) error {
			if oi.Size > 0 {
				wal++
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if wal == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d WAL objects left after compaction", wal)
		case <-tick.C:
		}
	}

	// The table's rows, through Stream.Table().Scan.
	batches, err := s.Table().Scan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	for _, b := range batches {
		rd, err := ipc.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		for rd.Next() {
			rec := rd.RecordBatch()
			payload := rec.Column(rec.Schema().FieldIndices(lakehouse.ColPayload)[0]).(*array.Binary)
			for i := range payload.Len() {
				if !bytes.Contains(payload.Value(i), []byte(" on ")) {
					t.Fatalf("row payload %q", payload.Value(i))
				}
				rows++
			}
		}
		rd.Release()
	}
	if rows != total {
		t.Fatalf("Scan returned %d rows, want %d", rows, total)
	}

	// A new subscription reads everything again, now from Parquet, with
	// the same message ids.
	after := consumeAll("after")
	for i, id := range before {
		if after[i] != id {
			t.Fatalf("message %s: id %s after compaction, %s before", i, after[i], id)
		}
	}
}
