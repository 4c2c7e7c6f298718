package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/engine"
	"github.com/lakegate/lakegate/gateway"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
	"github.com/lakegate/lakegate/node"
	"github.com/lakegate/lakegate/nodehttp"
	"github.com/lakegate/lakegate/tables"
)

func runStandalone(args []string) error {
	c, err := loadConfig("standalone", args, os.Environ())
	if err != nil {
		return err
	}
	if len(c.Etcd.Endpoints) > 0 {
		return errors.New("standalone runs its own etcd; use `lakegate serve` for an external cluster")
	}
	return runNode(c)
}

func runServe(args []string) error {
	c, err := loadConfig("serve", args, os.Environ())
	if err != nil {
		return err
	}
	if len(c.Etcd.Endpoints) == 0 {
		return errors.New("config etcd.endpoints: serve needs external etcd endpoints (use `lakegate standalone` for a single node)")
	}
	return runNode(c)
}

func runNode(c *Config) error {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Log.Level)) // validated by loadConfig
	hopts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(os.Stderr, hopts)
	if c.Log.JSON {
		h = slog.NewJSONHandler(os.Stderr, hopts)
	}
	log := slog.New(h)
	slog.SetDefault(log)
	routeLibraryLog(log)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	etcdTLS, etcdUser, etcdPassword, err := etcdClient(c)
	if err != nil {
		return err
	}
	if etcdPassword != "" && etcdTLS == nil && !allHTTPS(c.Etcd.Endpoints) {
		log.Warn("the etcd password travels in clear: give the etcd members TLS (https:// endpoints, etcd.tlsCaFile)")
	}
	cfg := node.Config{
		DataDir: c.DataDir, ObjectURL: c.Objects,
		GCInterval:    gcInterval(c.Engine.GCInterval),
		EtcdEndpoints: c.Etcd.Endpoints, EtcdClientPort: c.Etcd.Port, EtcdPrefix: c.Etcd.Prefix,
		EtcdTLS: etcdTLS, EtcdUsername: etcdUser, EtcdPassword: etcdPassword,
		Engine: engine.Options{
			NodeID:                c.Engine.NodeID,
			FlushBytes:            c.Engine.FlushBytes,
			Linger:                c.Engine.Linger,
			MaxPendingBytes:       c.Engine.MaxPendingBytes,
			MaxInflightFlushes:    c.Engine.MaxInflightFlushes,
			PrepareAhead:          prepareAhead(c.Engine.PrepareAhead),
			CommitTimeout:         c.Engine.CommitTimeout,
			CacheBytes:            c.Engine.CacheBytes,
			CursorPersistInterval: c.Engine.CursorPersist,
			Logger:                log,
		},
		Tables: tables.Options{
			CompactAge:          c.Tables.Age,
			CompactMaxBytes:     c.Tables.MaxBytes,
			IcebergCatalog:      icebergCatalogConfig(c),
			MaintenanceInterval: maintenanceInterval(c.Tables.Maintenance.Interval),
			SnapshotRetention:   c.Tables.Maintenance.SnapshotRetention,
			SnapshotsRetainLast: c.Tables.Maintenance.SnapshotsRetainLast,
			DeltaLogRetention:   c.Tables.Maintenance.DeltaLogRetention,
			OrphanAge:           c.Tables.Maintenance.OrphanAge,
			BinpackTargetBytes:  repackTarget(c.Tables.Repack.TargetBytes),
			BinpackSpanBytes:    c.Tables.Repack.SpanBytes,
			BinpackInterval:     maintenanceInterval(c.Tables.Repack.Interval),
		},
	}
	n, err := node.Start(ctx, cfg)
	if errors.Is(err, meta.ErrPermissionDenied) {
		return fmt.Errorf("etcd refused this node (check etcd.username, etcd.password or etcd.passwordFile, and that the user's role covers etcd.prefix %q): %w", c.Etcd.Prefix, err)
	}
	if errors.Is(err, meta.ErrUnavailable) && len(c.Etcd.Endpoints) > 0 {
		return fmt.Errorf("etcd at %s did not answer (check etcd.endpoints and, for TLS, etcd.tlsCaFile, etcd.tlsCertFile, etcd.tlsKeyFile): %w", strings.Join(c.Etcd.Endpoints, ","), err)
	}
	if err != nil {
		return err
	}
	defer n.Close()

	cat := n.Catalog()
	defer cat.Close()
	if _, err := cat.CreateNamespace(ctx, "public/default", nil); err != nil && !errors.Is(err, lakestream.ErrAlreadyExists) {
		return fmt.Errorf("creating namespace public/default: %w", err)
	}
	rt := actors.NewRuntime(log)
	defer rt.Shutdown()
	sec, err := newSecurity(c)
	if err != nil {
		return err
	}
	// Listen first: the addresses are advertised when the node joins.
	ls, err := openListeners(c, sec)
	if err != nil {
		return err
	}
	memberID := c.Engine.NodeID // default: the engine's random id
	if n.Embedded != nil && memberID == "" {
		// Standalone: the only member; a restart ends the previous
		// process's session at once.
		memberID = "standalone"
	}
	member, err := n.Engine.JoinCluster(ctx, engine.MembershipConfig{
		ID:         memberID,
		SessionTTL: c.Cluster.SessionTTL,
		Endpoints:  ls.endpoints,
		Logger:     log,
	})
	if err != nil {
		ls.close()
		return fmt.Errorf("joining the cluster: %w", err)
	}
	// The compaction worker compacts the tables this node owns for
	// compaction (one owner per table across the cluster).
	worker, err := startTables(ctx, c, n, cat, rt, member, log)
	if err != nil {
		member.Close(context.Background())
		ls.close()
		return fmt.Errorf("tables: %w", err)
	}
	if worker != nil {
		defer worker.Stop() // before the node closes (defers are LIFO)
	}
	rebalance := c.Cluster.RebalanceInterval
	if rebalance == 0 {
		rebalance = -1 // off
	}
	policyCheck := c.Policies.CheckInterval
	if policyCheck == 0 {
		policyCheck = -1 // off
	}
	gwCfg := gateway.Config{Catalog: cat, AdvertisedAddr: ls.pulsarAdv, AdvertisedTLSAddr: ls.pulsarTLSAdv, Logger: log, Runtime: rt,
		PolicyCheckInterval: policyCheck,
		Membership:          topicUnits{member}, ProxyLookups: c.Cluster.ProxyLookups, RebalanceInterval: rebalance, RebalanceMax: c.Cluster.RebalanceMax,
		ClientTLS: sec.clientTLS()}
	gatewayLimits(c, &gwCfg)
	if sec.authn != nil {
		gwCfg.Auth = sec.authn
		gwCfg.Authorization = c.Auth.Authorization
		gwCfg.SuperUserRoles = c.Auth.SuperUserRoles
		gwCfg.AuthRefreshGrace = c.Auth.RefreshGrace
		gwCfg.BrokerClientToken = c.Auth.BrokerClientToken
		gwCfg.ProxyRoles = c.Auth.ProxyRoles
		gwCfg.SkipOriginalAuthData = !c.Auth.OriginalAuthData
		gwCfg.AllowPlaintextPeers = c.Cluster.AllowPlaintextPeers
	}
	gw, err := gateway.Serve(ls.pulsar, gwCfg, ls.tlsList()...)
	if err != nil {
		member.Close(context.Background())
		ls.close()
		return fmt.Errorf("pulsar listener: %w", err)
	}
	// Runs before n.Close (defers are LIFO): sessions end, cursors persist.
	defer func() {
		if err := gw.Close(); err != nil {
			log.Error("closing the Pulsar gateway", "err", err)
		}
	}()

	icebergHandler, err := icebergREST(ctx, c, n, gw, sec, log)
	if err != nil {
		return fmt.Errorf("iceberg REST catalog: %w", err)
	}
	handler := httpHandler(n, gw, cat, icebergHandler)
	errLog := slog.NewLogLogger(h.WithAttrs([]slog.Attr{slog.String("component", "http")}), slog.LevelWarn)
	var httpAddrs []any
	for _, hl := range []net.Listener{ls.http, ls.https} {
		if hl == nil {
			continue
		}
		srv := httpLimits(c).Server(handler, errLog)
		go srv.Serve(hl) // a TLS listener hands TLS connections: r.TLS is set
		defer srv.Close()
	}
	if ls.http != nil {
		httpAddrs = append(httpAddrs, "http", ls.http.Addr().String())
	}
	if ls.https != nil {
		httpAddrs = append(httpAddrs, "https", ls.https.Addr().String())
	}

	etcdDesc := strings.Join(cfg.EtcdEndpoints, ",")
	if n.Embedded != nil {
		etcdDesc = "embedded " + strings.Join(n.Embedded.Endpoints(), ",")
	}
	attrs := []any{"node", n.Engine.NodeID(), "objects", n.Config.ObjectURL, "etcd", etcdDesc}
	attrs = append(attrs, httpAddrs...)
	attrs = append(attrs, "iceberg_rest", icebergHandler != nil)
	if ls.pulsar != nil {
		attrs = append(attrs, "pulsar", ls.pulsar.Addr().String(), "pulsar_url", gw.ServiceURL())
	}
	if ls.pulsarTLS != nil {
		attrs = append(attrs, "pulsar_tls", ls.pulsarTLS.Addr().String(), "pulsar_tls_url", gw.ServiceURLTLS())
	}
	if sec.authn != nil {
		attrs = append(attrs, "auth", strings.Join(sec.authn.Methods(), ","))
	}
	log.Info("lakegate node ready", attrs...)
	<-ctx.Done()
	log.Info("shutting down: handing topics over, flushing appends and persisting cursors")
	dctx, cancel := context.WithTimeout(context.Background(), c.Cluster.DrainTimeout)
	defer cancel()
	gw.Drain(dctx)
	if err := member.Close(dctx); err != nil {
		log.Warn("leaving the cluster", "err", err)
	}
	return nil
}

// advertised is the host:port a node advertises for a listener: the
// configured one, else the bound address — for a wildcard host, localhost
// on a node of its own, and the host's name on a cluster node (clustered),
// whose advertised addresses other members connect to.
func advertised(configured string, bound net.Addr, clustered bool) (string, error) {
	if configured != "" {
		return configured, nil
	}
	a, ok := bound.(*net.TCPAddr)
	if !ok || !a.IP.IsUnspecified() {
		return bound.String(), nil
	}
	host := "localhost"
	if clustered {
		h, err := os.Hostname()
		if err != nil || h == "" || h == "localhost" {
			return "", fmt.Errorf("the listener %s is bound to every interface, and the host name (%q, %v) cannot tell other members where to reach it: set the advertised address", bound, h, err)
		}
		host = h
	}
	return net.JoinHostPort(host, strconv.Itoa(a.Port)), nil
}

// gatewayLimits copies the limits (docs/security.md, "Limits") into the
// gateway's configuration, mapping the config's 0 (off) to the gateway's
// negative where the gateway's 0 is a default.
func gatewayLimits(c *Config, g *gateway.Config) {
	l := c.Limits
	off := func(n int64) int64 {
		if n == 0 {
			return -1
		}
		return n
	}
	g.MaxConnections = l.BrokerMaxConnections
	g.MaxConnectionsPerIP = l.BrokerMaxConnectionsPerIP
	g.MaxPendingPublishRequestsPerConnection = int(off(int64(l.MaxPendingPublishRequestsPerConnection)))
	g.MaxPublishBufferBytes = l.MaxMessagePublishBufferSizeInMB << 20 // 0: the default
	g.TopicLimits = gateway.TopicLimits{
		MaxProducers:                l.MaxProducersPerTopic,
		MaxConsumers:                l.MaxConsumersPerTopic,
		MaxConsumersPerSubscription: l.MaxConsumersPerSubscription,
		MaxSubscriptions:            l.MaxSubscriptionsPerTopic,
		MaxUnackedPerConsumer:       off(l.MaxUnackedMessagesPerConsumer),
		MaxUnackedPerSubscription:   off(l.MaxUnackedMessagesPerSubscription),
		PublishRate:                 gateway.RateLimit{Msgs: l.MaxPublishRatePerTopicInMessages, Bytes: l.MaxPublishRatePerTopicInBytes},
		DispatchRate:                gateway.RateLimit{Msgs: l.DispatchThrottlingRatePerTopicInMsg, Bytes: l.DispatchThrottlingRatePerTopicInByte},
		SubscriptionDispatchRate:    gateway.RateLimit{Msgs: l.DispatchThrottlingRatePerSubscriptionInMsg, Bytes: l.DispatchThrottlingRatePerSubscriptionInByte},
	}
	g.AdminMaxRequestBytes = c.HTTP.MaxRequestSize
}

// httpLimits are the HTTP server's limits (0 connections: no limit).
func httpLimits(c *Config) nodehttp.Limits {
	maxConns := c.HTTP.MaxConnections
	if maxConns == 0 {
		maxConns = -1
	}
	return nodehttp.Limits{ReadHeaderTimeout: c.HTTP.ReadHeaderTimeout, ReadTimeout: c.HTTP.ReadTimeout, IdleTimeout: c.HTTP.IdleTimeout,
		MaxHeaderBytes: c.HTTP.MaxRequestHeaderSize, MaxConnections: maxConns}
}

// gcInterval maps the config's 0 (off) to the engine's negative.
func gcInterval(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// prepareAhead maps the config's 0 (off) to the engine's negative.
func prepareAhead(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// maintenanceInterval maps the config's 0 (off) to the table layer's
// negative.
// repackTarget maps the configuration's 0 (off) to the table layer's
// negative.
func repackTarget(n int64) int64 {
	if n == 0 {
		return -1
	}
	return n
}

func maintenanceInterval(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// allHTTPS reports whether every etcd endpoint is an https:// URL.
func allHTTPS(endpoints []string) bool {
	for _, ep := range endpoints {
		if !strings.HasPrefix(ep, "https://") {
			return false
		}
	}
	return true
}
