package assembly

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/engine"
	"github.com/lakegate/lakegate/gateway"
	"github.com/lakegate/lakegate/kafka"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/node"
	"github.com/lakegate/lakegate/nodehttp"
	"github.com/lakegate/lakegate/txn"
	"github.com/lakegate/lakegate/txn/tc"
)

// Config says what a node runs. Start takes ownership of the listeners:
// Close closes them, and so does Start when it fails.
type Config struct {
	// Node is the storage node's configuration (node.Config); its
	// Engine.Logger defaults to Logger.
	Node node.Config
	// Member is how the node joins the cluster. ID defaults to
	// Node.Engine.NodeID, and on a standalone node (embedded etcd) to
	// "standalone": the only member, whose restart ends the previous
	// process's session at once. Endpoints get "pulsar" and "pulsar+ssl"
	// from the gateway's advertised addresses unless given; the caller adds
	// its HTTP endpoints. Logger defaults to Logger.
	Member engine.MembershipConfig
	// Gateway is the Pulsar gateway's configuration. Catalog, Membership
	// and Runtime are filled in (Runtime only when nil: a nil Runtime is
	// the node's own, shut down by Close); Logger when nil;
	// AdvertisedAddr and AdvertisedTLSAddr, when empty, from the listeners.
	Gateway gateway.Config
	// Pulsar and PulsarTLS are the gateway's listeners (at least one).
	Pulsar, PulsarTLS net.Listener
	// Kafka, when set, is the Kafka listener (docs/kafka.md), configured
	// by KafkaConfig (Broker, Catalog, Serve, Reload, AutoCreate and, when
	// nil, Logger are filled in): it serves topics from the gateway's
	// registry, and the node advertises it as its "kafka" endpoint.
	Kafka       net.Listener
	KafkaConfig kafka.Config
	// GatewayCatalog, when set, wraps the catalog the gateway is given
	// (a test holding appends back).
	GatewayCatalog func(lakestream.StreamCatalog) lakestream.StreamCatalog
	// Materialization, when not nil, is stored as the cluster default
	// table materialization policy before the node serves.
	Materialization *lakestream.TableMaterializationPolicy
	// Materializer, when not nil, starts the materialization worker with these
	// options; Catalog, Materializer and Membership are filled in, Logger
	// when nil.
	Materializer *actors.MaterializationWorkerOptions
	// Transactions configures the node's transaction coordinator
	// (docs/transactions.md); the assembly fills in its stores, staging,
	// membership, superusers and logger. nil: transactions are off.
	Transactions *tc.Config
	// HTTP are the listeners the HTTP surface (Node.Handler) is served on,
	// with HTTPLimits and HTTPErrorLog; none: the caller serves Handler.
	HTTP         []net.Listener
	HTTPLimits   nodehttp.Limits
	HTTPErrorLog *log.Logger
	// Iceberg, when set, returns the Iceberg REST catalog's handler
	// (mounted at /iceberg/; nil: none), called once the gateway serves
	// (its grants authorize the catalog's requests).
	Iceberg func(ctx context.Context, n *Node) (http.Handler, error)
	// Logger is the logger of every part whose configuration leaves it
	// nil. Default slog.Default().
	Logger *slog.Logger
}

// Node is a running node.
type Node struct {
	*node.Node // storage: stores, engine, tables
	Catalog    lakestream.StreamCatalog
	Member     *engine.Membership
	Runtime    actors.Runtime
	Gateway    *gateway.Server
	// Kafka is the Kafka listener (Config.Kafka), else nil.
	Kafka *kafka.Server
	// Worker is the materialization worker (Config.Materializer), else nil.
	Worker *actors.MaterializationWorker
	// Txn is the transaction coordinator (nil when transactions are off).
	Txn *tc.Coordinator
	// Handler is the node's HTTP surface; Iceberg is true when it serves
	// the Iceberg REST catalog.
	Handler http.Handler
	Iceberg bool

	cfg        Config
	log        *slog.Logger
	servers    []*http.Server
	ownRuntime bool
	closeOnce  sync.Once
	closeErr   error
}

// Start builds and starts a node. When it fails, what it started is
// stopped and the listeners are closed.
func Start(ctx context.Context, cfg Config) (_ *Node, err error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Node.Engine.Logger == nil {
		cfg.Node.Engine.Logger = cfg.Logger
	}
	n := &Node{cfg: cfg, log: cfg.Logger}
	defer func() {
		if err != nil {
			n.closeListeners()
			n.stop()
		}
	}()
	// The storage node's errors pass unwrapped: callers tell the
	// metadata store's refusals (meta.ErrPermissionDenied, …) apart.
	if n.Node, err = node.Start(ctx, cfg.Node); err != nil {
		return nil, err
	}
	n.Catalog = n.Node.Catalog()
	if _, err := n.Catalog.CreateNamespace(ctx, "public/default", nil); err != nil && !errors.Is(err, lakestream.ErrAlreadyExists) {
		return nil, fmt.Errorf("creating namespace public/default: %w", err)
	}
	if cfg.Materialization != nil {
		if err := n.Catalog.SetDefaultMaterialization(ctx, cfg.Materialization); err != nil {
			return nil, fmt.Errorf("tables: %w", err)
		}
	}
	n.Runtime = cfg.Gateway.Runtime
	if n.Runtime == nil {
		n.Runtime, n.ownRuntime = actors.NewRuntime(cfg.Logger), true
	}
	gc := n.gatewayConfig()
	if n.Member, err = n.join(ctx, gc); err != nil {
		return nil, fmt.Errorf("joining the cluster: %w", err)
	}
	gc.Membership = topicUnits{n.Member}
	if cfg.Transactions != nil {
		tcc := *cfg.Transactions
		tcc.Meta, tcc.Root, tcc.Staging, tcc.Membership = n.Meta, n.Engine.MetaRoot(), n.Engine, n.Member
		supers := gc.SuperUserRoles
		tcc.Superuser = func(role string) bool { return slices.Contains(supers, role) }
		if tcc.Logger == nil {
			tcc.Logger = cfg.Logger
		}
		if n.Txn, err = tc.New(tcc); err != nil {
			return nil, err
		}
		gc.Txn = n.Txn
	}
	if cfg.Materializer != nil {
		// The worker compacts the tables this node owns for compaction
		// (one owner per table across the cluster).
		wo := *cfg.Materializer
		wo.Catalog, wo.Materializer, wo.Membership = n.Catalog, n.Tables.Materializer(), n.Member
		if wo.Logger == nil {
			wo.Logger = cfg.Logger
		}
		n.Worker = actors.StartMaterializationWorker(n.Runtime, wo)
	}
	var tlsLns []net.Listener
	if cfg.PulsarTLS != nil {
		tlsLns = append(tlsLns, cfg.PulsarTLS)
	}
	if n.Gateway, err = gateway.Serve(cfg.Pulsar, gc, tlsLns...); err != nil {
		return nil, fmt.Errorf("pulsar listener: %w", err)
	}
	if cfg.Kafka != nil {
		kc := cfg.KafkaConfig
		kc.Broker, kc.Catalog, kc.Serve, kc.Reload, kc.UnloadUnit = n.Gateway.Broker(), gc.Catalog, n.Gateway.ServePartition, n.Gateway.ReloadPartition, n.Gateway.UnloadUnit
		kc.AutoCreate = !gc.DisableTopicAutoCreation
		if kc.Logger == nil {
			kc.Logger = cfg.Logger
		}
		if n.Kafka, err = kafka.Serve(cfg.Kafka, kc); err != nil {
			return nil, fmt.Errorf("kafka listener: %w", err)
		}
	}
	if err := n.serveHTTP(ctx); err != nil {
		return nil, err
	}
	return n, nil
}

// gatewayConfig is the gateway's configuration with what the node fills
// in, but the membership (it joins with the advertised addresses first).
func (n *Node) gatewayConfig() gateway.Config {
	gc := n.cfg.Gateway
	gc.Catalog, gc.Runtime = n.Catalog, n.Runtime
	if n.cfg.GatewayCatalog != nil {
		gc.Catalog = n.cfg.GatewayCatalog(n.Catalog)
	}
	if gc.Logger == nil {
		gc.Logger = n.cfg.Logger
	}
	if gc.AdvertisedAddr == "" && n.cfg.Pulsar != nil {
		gc.AdvertisedAddr = advertisedOf(n.cfg.Pulsar)
	}
	if gc.AdvertisedTLSAddr == "" && n.cfg.PulsarTLS != nil {
		gc.AdvertisedTLSAddr = advertisedOf(n.cfg.PulsarTLS)
	}
	return gc
}

// join joins the cluster with the gateway's advertised addresses; a
// standalone node is its only member.
func (n *Node) join(ctx context.Context, gc gateway.Config) (*engine.Membership, error) {
	mc := n.cfg.Member
	if mc.ID == "" {
		mc.ID = n.cfg.Node.Engine.NodeID // default: the engine's random id
		if n.Embedded != nil && mc.ID == "" {
			// Standalone: the only member; a restart ends the previous
			// process's session at once.
			mc.ID = "standalone"
		}
	}
	eps := map[string]string{}
	if gc.AdvertisedAddr != "" {
		eps["pulsar"] = "pulsar://" + gc.AdvertisedAddr
	}
	if gc.AdvertisedTLSAddr != "" {
		eps["pulsar+ssl"] = "pulsar+ssl://" + gc.AdvertisedTLSAddr
	}
	if n.cfg.Kafka != nil {
		eps["kafka"] = advertisedOf(n.cfg.Kafka)
	}
	for k, v := range mc.Endpoints {
		eps[k] = v
	}
	mc.Endpoints = eps
	if mc.Logger == nil {
		mc.Logger = n.cfg.Logger
	}
	return n.Engine.JoinCluster(ctx, mc)
}

// advertisedOf is a listener's address, with localhost for a wildcard
// host (as the gateway advertises it).
func advertisedOf(ln net.Listener) string {
	if a, ok := ln.Addr().(*net.TCPAddr); ok && a.IP.IsUnspecified() {
		return net.JoinHostPort("localhost", fmt.Sprint(a.Port))
	}
	return ln.Addr().String()
}

// Close stops the node as a SIGTERM does: the gateway hands its topics
// over and the node leaves the cluster (both bounded by ctx), then the
// HTTP servers, the gateway (sessions end, cursors persist), the
// compaction worker, the catalog and the storage node stop. Acknowledged
// data is durable when it returns; calling it again returns the first
// call's error.
func (n *Node) Close(ctx context.Context) error {
	n.closeOnce.Do(func() {
		if n.Gateway != nil {
			n.Gateway.Drain(ctx)
		}
		if n.Member != nil {
			if err := n.Member.Close(ctx); err != nil {
				n.log.Warn("leaving the cluster", "err", err)
			}
			n.Member = nil
		}
		n.closeErr = n.stop()
	})
	return n.closeErr
}

// stop stops what runs, in reverse order of Start.
func (n *Node) stop() error {
	var errs []error
	for _, srv := range n.servers {
		srv.Close()
	}
	if n.Kafka != nil {
		n.Kafka.Close()
	}
	if n.Gateway != nil {
		if err := n.Gateway.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing the Pulsar gateway: %w", err))
		}
	}
	if n.Worker != nil {
		n.Worker.Stop()
	}
	if n.Txn != nil {
		n.Txn.Close()
	}
	if n.Member != nil { // Start failed after joining
		n.Member.Close(context.Background())
	}
	if n.ownRuntime {
		n.Runtime.Shutdown()
	}
	if n.Catalog != nil {
		n.Catalog.Close()
	}
	if n.Node != nil {
		errs = append(errs, n.Node.Close())
	}
	return errors.Join(errs...)
}

// closeListeners closes the listeners a failed Start was given.
func (n *Node) closeListeners() {
	for _, ln := range append([]net.Listener{n.cfg.Pulsar, n.cfg.PulsarTLS, n.cfg.Kafka}, n.cfg.HTTP...) {
		if ln != nil {
			ln.Close()
		}
	}
}

// topicUnits is the membership the gateway sees: the same, but Owned lists
// topics only, not the compaction worker's, the consumer groups' or the
// transaction coordinators' units (the gateway hands every
// owned unit over as a topic when it rebalances or drains).
type topicUnits struct{ lakestream.Membership }

func (m topicUnits) Owned() []lakestream.Ownership {
	var out []lakestream.Ownership
	for _, o := range m.Membership.Owned() {
		if !actors.IsMaterializationUnit(o.Unit()) && !kafka.IsGroupUnit(o.Unit()) && !txn.IsUnit(o.Unit()) {
			out = append(out, o)
		}
	}
	return out
}
