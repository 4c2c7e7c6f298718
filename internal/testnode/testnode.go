// Package testnode starts a whole lakegate node in-process for tests — the
// one harness of the e2e tests and the admin client's tests — with the
// production wiring: node/assembly, as cmd/lakegate starts it (stores,
// engine, tables, catalog with public/default, the cluster membership —
// a standalone node is a one-member cluster —, optionally a cluster
// default materialization and the compaction worker, the Pulsar gateway on
// 127.0.0.1:0, and optionally the node's HTTP surface on an httptest
// server). Everything stops at the end of the test as on SIGTERM (Stop,
// idempotent).
package testnode

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/gateway"
	"github.com/lakegate/lakegate/kafka"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/node"
	"github.com/lakegate/lakegate/node/assembly"
	"github.com/lakegate/lakegate/nodehttp"
	"github.com/lakegate/lakegate/txn/tc"
)

// Config says what to start. The zero value is a node on file:// objects
// and embedded etcd under t.TempDir(), with a gateway and nothing else.
type Config struct {
	// Node is the storage node's configuration. DataDir defaults to a new
	// directory under t.TempDir(); Engine.Logger, when nil, to Logger. The
	// node joins the cluster as its engine's NodeID, or as "standalone" on
	// embedded etcd.
	Node node.Config
	// Gateway is the gateway's configuration; Catalog and Membership, and
	// Logger and Runtime when nil, are filled in (assembly.Config.Gateway).
	Gateway gateway.Config
	// Materialization, when not nil, is stored as the cluster default
	// table materialization policy.
	Materialization *lakestream.TableMaterializationPolicy
	// HTTP serves the node's /metrics, /healthz, /readyz and admin REST
	// (nodehttp.Handler) on an httptest server, with HTTPLimits (the
	// node's defaults when zero) as cmd/lakegate serves it.
	HTTP       bool
	HTTPLimits nodehttp.Limits
	// Materializer, when not nil, starts the materialization worker with these
	// options (Catalog, Compactor and Membership, and Logger when nil, are
	// filled in).
	Materializer *actors.MaterializationWorkerOptions
	// GatewayCatalog, when set, wraps the catalog the gateway is given
	// (e.g. to hold appends back: e2e/limits_test.go).
	GatewayCatalog func(lakestream.StreamCatalog) lakestream.StreamCatalog
	// Kafka starts the Kafka listener on 127.0.0.1:0 (Node.Kafka), with
	// KafkaConfig (assembly.Config.KafkaConfig; its GroupInitialRebalanceDelay,
	// when 0, none: tests start their consumers together).
	Kafka       bool
	KafkaConfig kafka.Config
	// Transactions configures the transaction coordinator, on by default
	// as in production (transactions.enabled); DisableTransactions turns
	// it off.
	Transactions        tc.Config
	DisableTransactions bool
	// Logger is the logger of the node, the gateway and the worker where
	// their configurations leave it nil. Default slog.Default().
	Logger *slog.Logger
	// OnStop runs first when the node stops (e.g. lifting injected faults
	// so the node can flush).
	OnStop func()
}

// Node is a running test node.
type Node struct {
	*assembly.Node
	// HTTP is the node's HTTP surface (Config.HTTP), else nil.
	HTTP *httptest.Server

	t       testing.TB
	onStop  func()
	stopped bool
}

// Start starts a node and registers its Stop with t.Cleanup.
func Start(t testing.TB, cfg Config) *Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if cfg.Node.DataDir == "" {
		cfg.Node.DataDir = filepath.Join(t.TempDir(), "node")
	}
	n := &Node{t: t, onStop: cfg.OnStop}
	t.Cleanup(n.Stop)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ac := assembly.Config{
		Node:            cfg.Node,
		Gateway:         cfg.Gateway,
		Pulsar:          ln,
		GatewayCatalog:  cfg.GatewayCatalog,
		Materialization: cfg.Materialization,
		Materializer:    cfg.Materializer,
		Logger:          cfg.Logger,
	}
	if !cfg.DisableTransactions {
		tc := cfg.Transactions
		ac.Transactions = &tc
	}
	if cfg.Kafka {
		if ac.Kafka, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		ac.KafkaConfig = cfg.KafkaConfig
		if ac.KafkaConfig.GroupInitialRebalanceDelay == 0 {
			ac.KafkaConfig.GroupInitialRebalanceDelay = -1 // tests start their consumers together
		}
	}
	if cfg.HTTP {
		// Listening now: the node advertises the address when it joins;
		// the handler is set once the node runs.
		n.HTTP = httptest.NewUnstartedServer(http.NotFoundHandler())
		cfg.HTTPLimits.Apply(n.HTTP.Config)
		n.HTTP.Listener = cfg.HTTPLimits.Listener(n.HTTP.Listener)
		ac.Member.Endpoints = map[string]string{"http": "http://" + n.HTTP.Listener.Addr().String()}
	}
	if n.Node, err = assembly.Start(ctx, ac); err != nil {
		t.Fatal(err)
	}
	if n.HTTP != nil {
		n.HTTP.Config.Handler = n.Handler
		n.HTTP.Start()
	}
	return n
}

// Stop stops the node as cmd/lakegate does on SIGTERM (assembly.Node.Close:
// topics handed over, the membership left, then the HTTP server, the
// gateway — sessions end, cursors persist —, the worker, the catalog, the
// storage node), after OnStop. It reports close errors with t.Errorf;
// calling it again does nothing.
func (n *Node) Stop() {
	if n.stopped {
		return
	}
	n.stopped = true
	if n.onStop != nil {
		n.onStop()
	}
	if n.HTTP != nil {
		n.HTTP.Close()
	}
	if n.Node != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := n.Node.Close(ctx); err != nil {
			n.t.Errorf("node close: %v", err)
		}
	}
}
