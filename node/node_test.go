package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/lakegate/lakegate/engine"
	"github.com/lakegate/lakegate/lakehouse/iceberg"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/tables"
)

// testClock is an injectable clock: the test moves it instead of sleeping.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestStartIcebergDefaults: Start defaults the Iceberg catalog to
// <DataDir>/iceberg/catalog.db over the node's object store, wires the
// table layer into the engine (compacted offsets read back), and the table
// survives a node restart (the next range goes to the same table).
func TestStartIcebergDefaults(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	clk := &testClock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	start := func() *Node {
		n, err := Start(ctx, Config{DataDir: dir, GCInterval: -1, Engine: engine.Options{Now: clk.now, Logger: quiet}})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	const id = lakestream.LogID(9)
	stream := lakestream.StreamIdentifier{Namespace: "public/default", Name: "orders"}
	target := tables.TargetOf(stream, 0, true, true, lakestream.SchemaConfig{})
	var appended int64
	var payloads [][]byte
	round := func(n *Node) {
		for range 10 {
			// A Pulsar-framed entry with empty metadata: one row.
			p, err := protocol.AppendEntry(nil, nil, fmt.Appendf(nil, "entry %d", len(payloads)))
			if err != nil {
				t.Fatal(err)
			}
			if _, err = n.Engine.Append(ctx, id, 1, p); err != nil {
				t.Fatal(err)
			}
			payloads = append(payloads, p)
			appended++
		}
		clk.advance(time.Minute)
		for {
			_, err := n.Tables.Materialize(ctx, id, target)
			if errors.Is(err, engine.ErrNothingToCompact) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	n := start()
	if got, want := n.Config.Tables.IcebergCatalog.URI, filepath.Join(dir, "iceberg", "catalog.db"); got != want {
		t.Fatalf("catalog file %s, want %s", got, want)
	}
	if n.Config.Tables.IcebergCatalog.StoreURL != n.Config.ObjectURL {
		t.Fatalf("catalog store %s, node store %s", n.Config.Tables.IcebergCatalog.StoreURL, n.Config.ObjectURL)
	}
	round(n)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = start()
	defer n.Close()
	round(n)

	// Every entry reads back from the table files (a fresh engine cache).
	ents, err := n.Engine.ReadEntries(ctx, id, 0, 1<<20, 1<<30)
	if err != nil || len(ents) != len(payloads) {
		t.Fatalf("read %d entries (%v), want %d", len(ents), err, len(payloads))
	}
	for i, e := range ents {
		if string(e.Payload) != string(payloads[i]) {
			t.Fatalf("entry %d: %q, want %q", i, e.Payload, payloads[i])
		}
	}
	cat, err := iceberg.Open(ctx, n.Config.Tables.IcebergCatalog)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	if end, err := cat.RecordedEnd(ctx, target.Ident, int64(id)); err != nil || end != appended {
		t.Fatalf("iceberg end %d, %v; want %d", end, err, appended)
	}
}

// TestOpenLakegateURI: importing node registers lakegate://; a catalog
// opened from a data-dir URI writes and reads a stream, its Table() is the
// table layer's view (nothing compacted yet), and Close stops the node.
func TestOpenLakegateURI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cat, err := lakestream.Open(ctx, "lakegate://"+filepath.ToSlash(t.TempDir()), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cat.CreateNamespace(ctx, "public/default", nil); err != nil {
		t.Fatal(err)
	}
	id := lakestream.MustParseStreamID("public/default/orders")
	if _, err := cat.CreateStream(ctx, id, lakestream.StreamConfig{}, lakestream.Partitioning{NumPartitions: 2},
		lakestream.SchemaConfig{Type: lakestream.SchemaNone}, nil, nil); err != nil {
		t.Fatal(err)
	}
	s, err := cat.Stream(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.NewWriter().Append(ctx, lakestream.ByKey("k1"), 1, []byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.NewReader().Read(ctx, res.LogID, res.Header.Offset, 1, 1<<20)
	if err != nil || len(got.Entries) != 1 || string(got.Entries[0].Payload) != "hello" {
		t.Fatalf("read back: %+v, %v", got, err)
	}
	if _, err := s.Table().Scan(ctx); !errors.Is(err, lakestream.ErrNotMaterialized) {
		t.Fatalf("Table().Scan before any compaction: %v, want ErrNotMaterialized", err)
	}
	if err := cat.Close(); err != nil {
		t.Fatal(err)
	}
}
