package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/engine"
	"github.com/lakegate/lakegate/gateway"
	"github.com/lakegate/lakegate/kafka"
	"github.com/lakegate/lakegate/meta"
	"github.com/lakegate/lakegate/node"
	"github.com/lakegate/lakegate/node/assembly"
	"github.com/lakegate/lakegate/nodehttp"
	"github.com/lakegate/lakegate/tables"
	"github.com/lakegate/lakegate/txn/tc"
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
	log, h := setupLogging(c)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sc, err := storageConfig(c, log)
	if err != nil {
		return err
	}
	mem, _ := budgetOf(c) // checked by storageConfig
	if mem.apply() {
		log.Info("memory budget", "limit_mib", mem.Limit>>20, "go_limit_mib", mem.GoLimit>>20,
			"cache_mib", sc.Engine.CacheBytes>>20, "compaction_mib", sc.Tables.CompactMaxBytes>>20)
	}
	sec, err := newSecurity(c)
	if err != nil {
		return err
	}
	// Listen first: the addresses are advertised when the node joins.
	ls, err := openListeners(c, sec)
	if err != nil {
		return err
	}
	ac := assemblyConfig(c, sc, sec, ls, log, h)
	n, err := assembly.Start(ctx, ac)
	if errors.Is(err, meta.ErrPermissionDenied) {
		return fmt.Errorf("etcd refused this node (check etcd.username, etcd.password or etcd.passwordFile, and that the user's role covers etcd.prefix %q): %w", c.Etcd.Prefix, err)
	}
	if errors.Is(err, meta.ErrUnavailable) && len(c.Etcd.Endpoints) > 0 {
		return fmt.Errorf("etcd at %s did not answer (check etcd.endpoints and, for TLS, etcd.tlsCaFile, etcd.tlsCertFile, etcd.tlsKeyFile): %w", strings.Join(c.Etcd.Endpoints, ","), err)
	}
	if err != nil {
		return err
	}
	logReady(log, n, ls, sec)
	<-ctx.Done()
	log.Info("shutting down: handing topics over, flushing appends and persisting cursors")
	dctx, cancel := context.WithTimeout(context.Background(), c.Cluster.DrainTimeout)
	defer cancel()
	if err := n.Close(dctx); err != nil {
		log.Error("stopping the node", "err", err)
	}
	return nil
}

// groupDelay maps kafka.groupInitialRebalanceDelay (0: none) onto
// kafka.Config's (0: the default, negative: none).
func groupDelay(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}

// setupLogging makes the configured logger the default one (the
// libraries' loggers included) and returns it with its handler.
func setupLogging(c *Config) (*slog.Logger, slog.Handler) {
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
	return log, h
}

// assemblyConfig maps the configuration onto the node's assembly
// (sc: the storage node's part) with the listeners ls.
func assemblyConfig(c *Config, sc node.Config, sec *security, ls *listeners, log *slog.Logger, h slog.Handler) assembly.Config {
	ac := assembly.Config{
		Node:      sc,
		Member:    engine.MembershipConfig{ID: c.Engine.NodeID, SessionTTL: c.Cluster.SessionTTL, Endpoints: ls.endpoints},
		Gateway:   gatewayConfig(c, sec, ls),
		Pulsar:    ls.pulsar,
		PulsarTLS: ls.pulsarTLS,
		Kafka:     ls.kafka,
		KafkaConfig: kafka.Config{Namespace: c.Kafka.Namespace, MaxConnections: c.Kafka.MaxConnections,
			GroupInitialRebalanceDelay: groupDelay(c.Kafka.GroupInitialRebalanceDelay),
			TransactionalIDExpiration:  c.Kafka.TransactionalIDExpiration},
		Materialization: defaultMaterialization(c.Tables.Formats),
		HTTPLimits:      httpLimits(c),
		HTTPErrorLog:    slog.NewLogLogger(h.WithAttrs([]slog.Attr{slog.String("component", "http")}), slog.LevelWarn),
		Iceberg: func(ctx context.Context, n *assembly.Node) (http.Handler, error) {
			return icebergREST(ctx, c, n.Node, n.Gateway, sec, log)
		},
		Logger: log,
	}
	if c.Tables.Compaction {
		ac.Materializer = &actors.MaterializationWorkerOptions{
			Policy:       actors.MaterializationPolicy{Interval: c.Tables.Interval, MaxInflight: c.Tables.MaxInflight},
			ScanInterval: c.Tables.ScanInterval,
		}
	}
	if sec.authn != nil {
		ac.KafkaConfig.Auth = sec.authn
	}
	if t := c.Transactions; t.Enabled {
		ac.Transactions = &tc.Config{Coordinators: t.Coordinators, MaxTimeout: t.MaxTimeout, MaxOpen: t.MaxOpen, MaxOpenPerRole: t.MaxOpenPerRole, EndedRetention: t.EndedRetention}
	}
	for _, hl := range []net.Listener{ls.http, ls.https} {
		if hl != nil {
			ac.HTTP = append(ac.HTTP, hl)
		}
	}
	return ac
}

// storageConfig is the storage node's configuration (node.Config).
func storageConfig(c *Config, log *slog.Logger) (node.Config, error) {
	etcdTLS, etcdUser, etcdPassword, err := etcdClient(c)
	if err != nil {
		return node.Config{}, err
	}
	mem, err := budgetOf(c)
	if err != nil {
		return node.Config{}, err
	}
	if etcdPassword != "" && etcdTLS == nil && !allHTTPS(c.Etcd.Endpoints) {
		log.Warn("the etcd password travels in clear: give the etcd members TLS (https:// endpoints, etcd.tlsCaFile)")
	}
	return node.Config{
		DataDir: c.DataDir, ObjectURL: c.Objects,
		GCInterval:    gcInterval(c.Engine.GCInterval),
		EtcdEndpoints: c.Etcd.Endpoints, EtcdClientPort: c.Etcd.Port, EtcdPrefix: c.Etcd.Prefix,
		EtcdTLS: etcdTLS, EtcdUsername: etcdUser, EtcdPassword: etcdPassword,
		Engine: engine.Options{
			NodeID:                c.Engine.NodeID,
			FlushBytes:            c.Engine.FlushBytes,
			Linger:                c.Engine.Linger,
			MaxPendingBytes:       or(c.Engine.MaxPendingBytes, mem.Pending),
			MaxInflightFlushes:    c.Engine.MaxInflightFlushes,
			WALSegmentBytes:       walSegmentBytes(c.Engine.WALSegmentBytes),
			CommitTimeout:         c.Engine.CommitTimeout,
			CacheBytes:            or(c.Engine.CacheBytes, mem.Cache),
			CursorPersistInterval: c.Engine.CursorPersist,
			Logger:                log,
		},
		Tables: tables.Options{
			CompactAge:          c.Tables.Age,
			JointWait:           c.Tables.JointWait,
			CompactMaxBytes:     or(c.Tables.MaxBytes, mem.Compaction),
			IcebergCatalog:      icebergCatalogConfig(c),
			MaintenanceInterval: maintenanceInterval(c.Tables.Maintenance.Interval),
			SnapshotRetention:   c.Tables.Maintenance.SnapshotRetention,
			SnapshotsRetainLast: c.Tables.Maintenance.SnapshotsRetainLast,
			DeltaLogRetention:   c.Tables.Maintenance.DeltaLogRetention,
			OrphanAge:           c.Tables.Maintenance.OrphanAge,
			BinpackTargetBytes:  repackTarget(c.Tables.Repack.TargetBytes),
			BinpackSpanBytes:    or(c.Tables.Repack.SpanBytes, mem.Span),
			BinpackInterval:     maintenanceInterval(c.Tables.Repack.Interval),
		},
	}, nil
}

// gatewayConfig is the Pulsar gateway's configuration (the assembly fills
// in the catalog, the runtime and the membership).
func gatewayConfig(c *Config, sec *security, ls *listeners) gateway.Config {
	rebalance := c.Cluster.RebalanceInterval
	if rebalance == 0 {
		rebalance = -1 // off
	}
	policyCheck := c.Policies.CheckInterval
	if policyCheck == 0 {
		policyCheck = -1 // off
	}
	g := gateway.Config{AdvertisedAddr: ls.pulsarAdv, AdvertisedTLSAddr: ls.pulsarTLSAdv,
		PolicyCheckInterval: policyCheck,
		ProxyLookups:        c.Cluster.ProxyLookups, RebalanceInterval: rebalance, RebalanceMax: c.Cluster.RebalanceMax,
		ClientTLS:                 sec.clientTLS(),
		MetricsTopicsMax:          c.Metrics.TopicsMax,
		MetricsSubscriptionsMax:   c.Metrics.SubscriptionsMax,
		MetricsNamespaceLevelOnly: !c.Metrics.ExposeTopicLevelMetricsInPrometheus,
		MetricsConsumerLevel:      c.Metrics.ExposeConsumerLevelMetricsInPrometheus}
	gatewayLimits(c, &g)
	g.DisableTopicAutoCreation = !c.Policies.AllowAutoTopicCreation
	g.AutoTopicCreationType = c.Policies.AllowAutoTopicCreationType
	g.DefaultNumPartitions = c.Policies.DefaultNumPartitions
	g.RetentionMinAge = c.Policies.RetentionMinAge
	g.DefaultRetention = broker.RetentionPolicy{TimeMinutes: c.Policies.DefaultRetentionTimeInMinutes, SizeMB: c.Policies.DefaultRetentionSizeInMB}
	if sec.authn != nil {
		g.Auth = sec.authn // the Kafka listener's too (assemblyConfig)
		g.Authorization = c.Auth.Authorization
		g.SuperUserRoles = c.Auth.SuperUserRoles
		g.AuthRefreshGrace = c.Auth.RefreshGrace
		g.BrokerClientToken = c.Auth.BrokerClientToken
		g.ProxyRoles = c.Auth.ProxyRoles
		g.SkipOriginalAuthData = !c.Auth.OriginalAuthData
		g.AllowPlaintextPeers = c.Cluster.AllowPlaintextPeers
	}
	return g
}

// logReady logs the node's addresses once it serves.
func logReady(log *slog.Logger, n *assembly.Node, ls *listeners, sec *security) {
	etcdDesc := strings.Join(n.Config.EtcdEndpoints, ",")
	if n.Embedded != nil {
		etcdDesc = "embedded " + strings.Join(n.Embedded.Endpoints(), ",")
	}
	attrs := []any{"node", n.Engine.NodeID(), "objects", n.Config.ObjectURL, "etcd", etcdDesc}
	if ls.http != nil {
		attrs = append(attrs, "http", ls.http.Addr().String())
	}
	if ls.https != nil {
		attrs = append(attrs, "https", ls.https.Addr().String())
	}
	attrs = append(attrs, "iceberg_rest", n.Iceberg)
	if ls.pulsar != nil {
		attrs = append(attrs, "pulsar", ls.pulsar.Addr().String(), "pulsar_url", n.Gateway.ServiceURL())
	}
	if ls.pulsarTLS != nil {
		attrs = append(attrs, "pulsar_tls", ls.pulsarTLS.Addr().String(), "pulsar_tls_url", n.Gateway.ServiceURLTLS())
	}
	if ls.kafka != nil {
		attrs = append(attrs, "kafka", ls.kafka.Addr().String(), "kafka_advertised", ls.kafkaAdv)
	}
	if sec.authn != nil {
		attrs = append(attrs, "auth", strings.Join(sec.authn.Methods(), ","))
	}
	log.Info("lakegate node ready", attrs...)
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
	mem, _ := budgetOf(c)                                                            // checked by storageConfig
	g.MaxPublishBufferBytes = or(l.MaxMessagePublishBufferSizeInMB<<20, mem.Publish) // 0: the gateway's default
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

// walSegmentBytes maps the config's 0 (off) to the engine's negative.
func walSegmentBytes(n int64) int64 {
	if n == 0 {
		return -1
	}
	return n
}

// repackTarget maps the configuration's 0 (off) to the table layer's
// negative.
func repackTarget(n int64) int64 {
	if n == 0 {
		return -1
	}
	return n
}

// maintenanceInterval maps the config's 0 (off) to the table layer's
// negative.
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
