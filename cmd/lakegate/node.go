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
	"strings"
	"syscall"
	"time"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/engine"
	"github.com/lakegate/lakegate/gateway"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/node"
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

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := node.Config{
		DataDir: c.DataDir, ObjectURL: c.Objects,
		GCInterval:    gcInterval(c.Engine.GCInterval),
		EtcdEndpoints: c.Etcd.Endpoints, EtcdClientPort: c.Etcd.Port, EtcdPrefix: c.Etcd.Prefix,
		Engine: engine.Options{
			NodeID:                c.Engine.NodeID,
			FlushBytes:            c.Engine.FlushBytes,
			Linger:                c.Engine.Linger,
			MaxPendingBytes:       c.Engine.MaxPendingBytes,
			MaxInflightFlushes:    c.Engine.MaxInflightFlushes,
			CommitTimeout:         c.Engine.CommitTimeout,
			CacheBytes:            c.Engine.CacheBytes,
			CursorPersistInterval: c.Engine.CursorPersist,
			Logger:                log,
		},
		Tables: tables.Options{
			CompactAge:      c.Tables.Age,
			CompactMaxBytes: c.Tables.MaxBytes,
			IcebergCatalog:  icebergCatalogConfig(c),
		},
	}
	n, err := node.Start(ctx, cfg)
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
	worker, err := startTables(ctx, c, n, cat, rt, log)
	if err != nil {
		return fmt.Errorf("tables: %w", err)
	}
	if worker != nil {
		defer worker.Stop() // before the node closes (defers are LIFO)
	}
	gw, err := gateway.Listen(c.Pulsar.Addr, gateway.Config{Catalog: cat, AdvertisedAddr: c.Pulsar.AdvertisedAddr, Logger: log, Runtime: rt})
	if err != nil {
		return fmt.Errorf("pulsar listener: %w", err)
	}
	// Runs before n.Close (defers are LIFO): sessions end, cursors persist.
	defer func() {
		if err := gw.Close(); err != nil {
			log.Error("closing the Pulsar gateway", "err", err)
		}
	}()

	ln, err := net.Listen("tcp", c.HTTP.Addr)
	if err != nil {
		return fmt.Errorf("http listener: %w", err)
	}
	srv := &http.Server{Handler: httpHandler(n, gw, cat), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(h.WithAttrs([]slog.Attr{slog.String("component", "http")}), slog.LevelWarn)}
	go srv.Serve(ln)
	defer srv.Close()

	etcdDesc := strings.Join(cfg.EtcdEndpoints, ",")
	if n.Embedded != nil {
		etcdDesc = "embedded " + strings.Join(n.Embedded.Endpoints(), ",")
	}
	log.Info("lakegate node ready",
		"node", n.Engine.NodeID(), "objects", n.Config.ObjectURL, "etcd", etcdDesc,
		"http", ln.Addr().String(),
		"pulsar", gw.Addr().String(), "pulsar_url", gw.ServiceURL())
	<-ctx.Done()
	log.Info("shutting down: flushing appends and persisting cursors")
	return nil
}

// gcInterval maps the config's 0 (off) to the engine's negative.
func gcInterval(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
