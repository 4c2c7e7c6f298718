// Package testnode starts a whole lakegate node in-process for tests — the
// one harness of the e2e tests and the admin client's tests, so that a
// node is started one way everywhere, as cmd/lakegate starts it:
// node.Start (stores, engine, tables), the stream catalog with the
// public/default namespace, optionally a cluster default materialization,
// the Pulsar gateway on 127.0.0.1:0, optionally the node's HTTP surface
// (nodehttp) on an httptest server and the compaction worker. Everything
// stops at the end of the test, in reverse order (Stop, idempotent).
package testnode

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/gateway"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/node"
	"github.com/lakegate/lakegate/nodehttp"
)

// Config says what to start. The zero value is a node on file:// objects
// and embedded etcd under t.TempDir(), with a gateway and nothing else.
type Config struct {
	// Node is the storage node's configuration. DataDir defaults to a new
	// directory under t.TempDir(); Engine.Logger, when nil, to Logger.
	Node node.Config
	// Gateway is the gateway's configuration; Catalog, and Logger and
	// Runtime when nil, are filled in.
	Gateway gateway.Config
	// Materialization, when not nil, is stored as the cluster default
	// table materialization policy.
	Materialization *lakestream.TableMaterializationPolicy
	// HTTP serves the node's /metrics, /healthz, /readyz and admin REST
	// (nodehttp.Handler) on an httptest server, with HTTPLimits (the
	// node's defaults when zero) as cmd/lakegate serves it.
	HTTP       bool
	HTTPLimits nodehttp.Limits
	// Compaction, when not nil, starts the compaction worker with these
	// options (Catalog, Compactor, and Logger when nil, are filled in).
	Compaction *actors.CompactionWorkerOptions
	// GatewayCatalog, when set, wraps the catalog the gateway is given
	// (e.g. to hold appends back: e2e/limits_test.go).
	GatewayCatalog func(lakestream.StreamCatalog) lakestream.StreamCatalog
	// Logger is the logger of the node, the gateway and the worker where
	// their configurations leave it nil. Default slog.Default().
	Logger *slog.Logger
	// OnStop runs first when the node stops (e.g. lifting injected faults
	// so the node can flush).
	OnStop func()
}

// Node is a running test node.
type Node struct {
	*node.Node
	Catalog lakestream.StreamCatalog
	Gateway *gateway.Server
	// HTTP is the node's HTTP surface (Config.HTTP), else nil.
	HTTP *httptest.Server
	// Worker is the compaction worker (Config.Compaction), else nil.
	Worker  *actors.CompactionWorker
	Runtime actors.Runtime

	t          testing.TB
	onStop     func()
	ownRuntime bool
	stopped    bool
}

// Start starts a node and registers its Stop with t.Cleanup.
func Start(t testing.TB, cfg Config) *Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if cfg.Node.DataDir == "" {
		cfg.Node.DataDir = filepath.Join(t.TempDir(), "node")
	}
	if cfg.Node.Engine.Logger == nil {
		cfg.Node.Engine.Logger = cfg.Logger
	}
	n := &Node{t: t, onStop: cfg.OnStop}
	t.Cleanup(n.Stop)
	var err error
	if n.Node, err = node.Start(ctx, cfg.Node); err != nil {
		t.Fatal(err)
	}
	cat := n.Node.Catalog()
	n.Catalog = cat
	if _, err := cat.CreateNamespace(ctx, "public/default", nil); err != nil && !errors.Is(err, lakestream.ErrAlreadyExists) {
		t.Fatal(err)
	}
	if cfg.Materialization != nil {
		if err := cat.SetDefaultMaterialization(ctx, cfg.Materialization); err != nil {
			t.Fatal(err)
		}
	}
	n.Runtime = cfg.Gateway.Runtime
	if n.Runtime == nil {
		n.Runtime, n.ownRuntime = actors.NewRuntime(cfg.Logger), true
	}
	gc := cfg.Gateway
	gc.Catalog, gc.Runtime = cat, n.Runtime
	if cfg.GatewayCatalog != nil {
		gc.Catalog = cfg.GatewayCatalog(cat)
	}
	if gc.Logger == nil {
		gc.Logger = cfg.Logger
	}
	if n.Gateway, err = gateway.Listen("127.0.0.1:0", gc); err != nil {
		t.Fatal(err)
	}
	if cfg.HTTP {
		n.HTTP = httptest.NewUnstartedServer(nodehttp.Handler(n.Gateway, cat, n.Engine.Collector()))
		cfg.HTTPLimits.Apply(n.HTTP.Config)
		n.HTTP.Listener = cfg.HTTPLimits.Listener(n.HTTP.Listener)
		n.HTTP.Start()
	}
	if cfg.Compaction != nil {
		wo := *cfg.Compaction
		wo.Catalog, wo.Compactor = cat, n.Tables.Materializer()
		if wo.Logger == nil {
			wo.Logger = cfg.Logger
		}
		n.Worker = actors.StartCompactionWorker(n.Runtime, wo)
	}
	return n
}

// Stop stops the node as cmd/lakegate does: the worker, the HTTP server,
// the gateway (sessions end, cursors persist), the catalog, the storage
// node. It reports close errors with t.Errorf; calling it again does
// nothing.
func (n *Node) Stop() {
	if n.stopped {
		return
	}
	n.stopped = true
	if n.onStop != nil {
		n.onStop()
	}
	if n.Worker != nil {
		n.Worker.Stop()
	}
	if n.HTTP != nil {
		n.HTTP.Close()
	}
	if n.Gateway != nil {
		if err := n.Gateway.Close(); err != nil {
			n.t.Errorf("gateway close: %v", err)
		}
	}
	if n.Catalog != nil {
		n.Catalog.Close()
	}
	if n.Node != nil {
		if err := n.Node.Close(); err != nil {
			n.t.Errorf("node close: %v", err)
		}
	}
	if n.ownRuntime {
		n.Runtime.Shutdown()
	}
}
