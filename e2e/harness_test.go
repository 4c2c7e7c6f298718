package e2e

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/lakegate/lakegate/engine"
	"github.com/lakegate/lakegate/gateway"
	"github.com/lakegate/lakegate/lakestream"
)

// cluster is one in-process lakegate node: an engine (embedded etcd + file
// objects under t.TempDir()) and the Pulsar gateway on 127.0.0.1:0.
type cluster struct {
	t       *testing.T
	node    *engine.Node
	catalog lakestream.StreamCatalog
	gw      *gateway.Server
}

func testLogger() *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("LAKEGATE_E2E_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	return startClusterIn(t, t.TempDir())
}

// startClusterIn starts a node on dir (which may hold a previous node's
// data: a restart).
func startClusterIn(t *testing.T, dir string) *cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := engine.NodeConfig{DataDir: dir}
	cfg.Engine.Logger = testLogger()
	n, err := engine.StartNode(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cat := n.Catalog()
	if _, err := cat.CreateNamespace(ctx, "public/default", nil); err != nil && !errors.Is(err, lakestream.ErrAlreadyExists) {
		t.Fatal(err)
	}
	gw, err := gateway.Listen("127.0.0.1:0", gateway.Config{Catalog: cat, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, node: n, catalog: cat, gw: gw}
	t.Cleanup(c.stop)
	return c
}

// stop closes the gateway (persisting cursors) and the node; idempotent.
func (c *cluster) stop() {
	if c.gw == nil {
		return
	}
	if err := c.gw.Close(); err != nil {
		c.t.Errorf("gateway close: %v", err)
	}
	c.catalog.Close()
	if err := c.node.Close(); err != nil {
		c.t.Errorf("node close: %v", err)
	}
	c.gw = nil
}

func (c *cluster) client() pulsar.Client {
	c.t.Helper()
	cl, err := pulsar.NewClient(pulsar.ClientOptions{
		URL:               c.gw.ServiceURL(),
		OperationTimeout:  30 * time.Second,
		ConnectionTimeout: 10 * time.Second,
		Logger:            plog.DefaultNopLogger(),
	})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// createPartitioned creates a partitioned topic through the catalog (the
// admin REST does not exist yet).
func (c *cluster) createPartitioned(name string, n int) {
	c.t.Helper()
	tn, err := gateway.ParseTopicName(name)
	if err != nil {
		c.t.Fatal(err)
	}
	_, err = c.catalog.CreateStream(context.Background(), tn.StreamID(), lakestream.StreamConfig{},
		lakestream.Partitioning{NumPartitions: n}, lakestream.SchemaConfig{Type: lakestream.SchemaNone}, nil, nil)
	if err != nil {
		c.t.Fatal(err)
	}
}
