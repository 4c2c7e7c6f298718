package e2e

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/gateway"
	"github.com/lakegate/lakegate/internal/testnode"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/node"
)

// cluster is one in-process lakegate node (internal/testnode, the one
// harness every e2e test starts nodes with): by default file objects and
// embedded etcd under t.TempDir(), and the Pulsar gateway on 127.0.0.1:0.
type cluster struct {
	t       *testing.T
	tn      *testnode.Node
	node    *node.Node
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

// startNode starts a node as cfg says, logging with testLogger.
func startNode(t *testing.T, cfg testnode.Config) *cluster {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger()
	}
	tn := testnode.Start(t, cfg)
	return &cluster{t: t, tn: tn, node: tn.Node.Node, catalog: tn.Catalog, gw: tn.Gateway}
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	return startClusterIn(t, t.TempDir())
}

// startClusterIn starts a node on dir (which may hold a previous node's
// data: a restart).
func startClusterIn(t *testing.T, dir string) *cluster {
	t.Helper()
	return startNode(t, testnode.Config{Node: node.Config{DataDir: dir}})
}

// stop closes the gateway (persisting cursors) and the node; idempotent.
func (c *cluster) stop() { c.tn.Stop() }

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
	tn, err := broker.ParseTopicName(name)
	if err != nil {
		c.t.Fatal(err)
	}
	_, err = c.catalog.CreateStream(context.Background(), tn.StreamID(), lakestream.StreamConfig{},
		lakestream.Partitioning{NumPartitions: n}, lakestream.SchemaConfig{Type: lakestream.SchemaNone}, nil, nil)
	if err != nil {
		c.t.Fatal(err)
	}
}
