package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/lakegate/lakegate/engine"
	"github.com/lakegate/lakegate/gateway"
	"github.com/lakegate/lakegate/lakestream"
)

// nodeFlags are the flags shared by standalone and serve.
type nodeFlags struct {
	dataDir    string
	objectURL  string
	etcd       string
	etcdPort   int
	pulsarAddr string
	advertised string
	httpAddr   string
	logJSON    bool
}

func (f *nodeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.dataDir, "data-dir", "data", "directory for the embedded etcd member and local objects")
	fs.StringVar(&f.objectURL, "objects", "", "object store URL (file://, s3://, gs://, azblob://); default file://<data-dir>/objects")
	fs.StringVar(&f.etcd, "etcd", "", "comma-separated external etcd endpoints; empty runs an embedded member")
	fs.IntVar(&f.etcdPort, "etcd-port", 0, "client port of the embedded etcd member (0 = any free port)")
	fs.StringVar(&f.pulsarAddr, "pulsar-addr", ":6650", "Pulsar binary protocol listen address")
	fs.StringVar(&f.advertised, "advertised-addr", "", "host:port that topic lookups send Pulsar clients to; default the bound address (localhost for a wildcard host)")
	fs.StringVar(&f.httpAddr, "http-addr", ":8080", "admin REST, /metrics and health listen address")
	fs.BoolVar(&f.logJSON, "log-json", false, "log as JSON")
}

func runStandalone(args []string) error {
	fs := flag.NewFlagSet("standalone", flag.ContinueOnError)
	var f nodeFlags
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if f.etcd != "" {
		return errors.New("standalone runs its own etcd; use `lakegate serve --etcd …` for an external cluster")
	}
	return runNode(f)
}

func runServe(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var f nodeFlags
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if f.etcd == "" {
		return errors.New("serve needs --etcd endpoints (use `lakegate standalone` for a single node)")
	}
	return runNode(f)
}

func runNode(f nodeFlags) error {
	var h slog.Handler = slog.NewTextHandler(os.Stderr, nil)
	if f.logJSON {
		h = slog.NewJSONHandler(os.Stderr, nil)
	}
	log := slog.New(h)
	slog.SetDefault(log)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := engine.NodeConfig{DataDir: f.dataDir, ObjectURL: f.objectURL, EtcdClientPort: f.etcdPort}
	cfg.Engine.Logger = log
	if f.etcd != "" {
		cfg.EtcdEndpoints = strings.Split(f.etcd, ",")
	}
	n, err := engine.StartNode(ctx, cfg)
	if err != nil {
		return err
	}
	defer n.Close()

	cat := n.Catalog()
	defer cat.Close()
	if _, err := cat.CreateNamespace(ctx, "public/default", nil); err != nil && !errors.Is(err, lakestream.ErrAlreadyExists) {
		return fmt.Errorf("creating namespace public/default: %w", err)
	}
	gw, err := gateway.Listen(f.pulsarAddr, gateway.Config{Catalog: cat, AdvertisedAddr: f.advertised, Logger: log})
	if err != nil {
		return fmt.Errorf("pulsar listener: %w", err)
	}
	// Runs before n.Close (defers are LIFO): sessions end, cursors persist.
	defer func() {
		if err := gw.Close(); err != nil {
			log.Error("closing the Pulsar gateway", "err", err)
		}
	}()

	ln, err := net.Listen("tcp", f.httpAddr)
	if err != nil {
		return fmt.Errorf("http listener: %w", err)
	}
	srv := &http.Server{Handler: httpHandler(n), ReadHeaderTimeout: 10 * time.Second}
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
