// Package node runs a lakegate storage node: the object store and the
// metadata store (embedded etcd or an external cluster) a configuration
// names, the storage engine on them, the table layer above it, and the
// engine's garbage collection loop. It is the composition root of the
// storage side (engine + tables), shared by cmd/lakegate, the e2e tests and
// lakestream.Open("lakegate://…") (open.go). It holds no logic of its own:
// what runs is the engine's and the tables package's.
package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/lakegate/lakegate/engine"
	"github.com/lakegate/lakegate/lakehouse/iceberg"
	"github.com/lakegate/lakegate/meta"
	"github.com/lakegate/lakegate/objstore"
	"github.com/lakegate/lakegate/tables"
)

// Config says where a node's data and metadata live.
type Config struct {
	// DataDir holds the embedded etcd member (DataDir/etcd) and, unless
	// ObjectURL says otherwise, the objects (DataDir/objects). Default
	// "./data".
	DataDir string
	// ObjectURL is the object store (gocloud.dev/blob URL: file://, mem://,
	// s3://, gs://, azblob://). Default file://<DataDir>/objects.
	ObjectURL string
	// EtcdEndpoints of an external cluster; empty runs an embedded
	// single-member etcd in DataDir/etcd.
	EtcdEndpoints []string
	// EtcdClientPort is the embedded member's client port (0 = any free
	// port). Default 0.
	EtcdClientPort int
	// EtcdPrefix prefixes every metadata key in an external cluster shared
	// with other users. Default "".
	EtcdPrefix string
	// EtcdTLS, when set, is the TLS of the connections to an external
	// cluster (its CA, and the client certificate members may require);
	// used for https:// endpoints and endpoints without a scheme. Default
	// nil: https:// endpoints trust the system roots.
	EtcdTLS *tls.Config
	// EtcdUsername and EtcdPassword authenticate to an external cluster
	// with etcd's authentication on. Default none. The embedded member
	// needs neither: it binds loopback only.
	EtcdUsername, EtcdPassword string
	// Engine options (NodeID, flush sizes, …). RemoteStore is set from the
	// ObjectURL's scheme when left false; ChunkDecoder and Attachments are
	// the tables package's (tables.EngineOptions).
	Engine engine.Options
	// Tables options (compaction age and size, Iceberg catalog). Logger
	// and Now default to the engine's; IcebergCatalog.StoreURL to
	// ObjectURL, its sqlite file to <DataDir>/iceberg/catalog.db, and the
	// lakegate catalog's metadata store to the node's (keys under
	// <engine root>iceberg/).
	Tables tables.Options
	// GCInterval is how often the node runs CollectGarbage (docs/gc.md);
	// negative: never. Default 1 min.
	GCInterval time.Duration
}

// Node is a running storage node: stores, embedded etcd (if any), the
// engine and the table layer. Close stops them in reverse order.
type Node struct {
	Engine   *engine.Engine
	Tables   *tables.Tables
	Store    objstore.Store
	Meta     meta.Store
	Embedded *meta.Embedded // nil with external etcd
	Config   Config

	gcStop   chan struct{} // closed by Close; nil when GC does not run
	gcDone   chan struct{}
	stopOnce sync.Once
}

// Start opens the stores named by cfg and starts an engine and its table
// layer on them.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	if cfg.DataDir == "" {
		cfg.DataDir = "data"
	}
	abs, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("node: data dir: %w", err)
	}
	cfg.DataDir = abs
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("node: data dir: %w", err)
	}
	if cfg.ObjectURL == "" {
		cfg.ObjectURL = "file://" + filepath.ToSlash(cfg.DataDir)
	}
	if !cfg.Engine.RemoteStore {
		for _, s := range []string{"s3://", "gs://", "azblob://"} {
			if strings.HasPrefix(cfg.ObjectURL, s) {
				cfg.Engine.RemoteStore = true
			}
		}
	}
	if cfg.Tables.IcebergCatalog.StoreURL == "" {
		cfg.Tables.IcebergCatalog.StoreURL = cfg.ObjectURL
	}
	if k := cfg.Tables.IcebergCatalog.Kind; (k == "" || k == iceberg.KindSQL) && cfg.Tables.IcebergCatalog.URI == "" {
		cfg.Tables.IcebergCatalog.URI = filepath.Join(cfg.DataDir, "iceberg", "catalog.db")
	}
	if cfg.Tables.Logger == nil {
		cfg.Tables.Logger = cfg.Engine.Logger
	}
	if cfg.Tables.Now == nil {
		cfg.Tables.Now = cfg.Engine.Now
	}
	n := &Node{Config: cfg}
	ok := false
	defer func() {
		if !ok {
			n.Close()
		}
	}()
	if n.Store, err = objstore.Open(ctx, cfg.ObjectURL); err != nil {
		return nil, err
	}
	if len(cfg.EtcdEndpoints) == 0 {
		n.Embedded, err = meta.StartEmbedded(meta.EmbeddedConfig{
			Dir:        filepath.Join(cfg.DataDir, "etcd"),
			ClientPort: cfg.EtcdClientPort,
		})
		if err != nil {
			return nil, err
		}
		n.Meta = n.Embedded.NewStore(meta.EtcdOptions{Prefix: cfg.EtcdPrefix})
	} else {
		// Not into n.Meta directly: a failed Dial's nil *Etcd would be a
		// non-nil Store that Close calls.
		m, err := meta.Dial(ctx, cfg.EtcdEndpoints, meta.DialOptions{EtcdOptions: meta.EtcdOptions{Prefix: cfg.EtcdPrefix},
			TLS: cfg.EtcdTLS, Username: cfg.EtcdUsername, Password: cfg.EtcdPassword})
		if err != nil {
			return nil, err
		}
		n.Meta = m
	}
	if n.Engine, err = engine.New(n.Store, n.Meta, tables.EngineOptions(cfg.Engine)); err != nil {
		return nil, err
	}
	if cfg.Tables.IcebergCatalog.Kind == iceberg.KindLakegate && cfg.Tables.IcebergCatalog.Meta == nil {
		// The cluster's catalog, in the same etcd (docs/iceberg-catalog.md).
		cfg.Tables.IcebergCatalog.Meta = n.Meta
		cfg.Tables.IcebergCatalog.MetaRoot = n.Engine.MetaRoot() + "iceberg/"
		n.Config.Tables.IcebergCatalog = cfg.Tables.IcebergCatalog
	}
	n.Tables = tables.New(n.Engine, tables.Stores{Objects: n.Engine.Store(), Meta: n.Engine.Meta(), Root: n.Engine.MetaRoot()}, cfg.Tables)
	if cfg.GCInterval == 0 {
		cfg.GCInterval = time.Minute
		n.Config.GCInterval = cfg.GCInterval
	}
	if cfg.GCInterval > 0 {
		n.gcStop, n.gcDone = make(chan struct{}), make(chan struct{})
		go n.collectGarbage(cfg.GCInterval, n.gcStop, n.gcDone)
	}
	ok = true
	return n, nil
}

// collectGarbage runs a GC pass every interval until Close. Several nodes
// collecting at once is safe (docs/gc.md).
func (n *Node) collectGarbage(interval time.Duration, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	log := n.Config.Engine.Logger
	if log == nil {
		log = slog.Default()
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), max(interval, time.Minute))
		go func() { // a pass stops when the node closes
			select {
			case <-stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		st, err := n.Engine.CollectGarbage(ctx)
		cancel()
		switch {
		case err != nil && !errors.Is(err, context.Canceled):
			log.Warn("node: garbage collection failed", "err", err)
		case st.Deleted+st.TableOrphans > 0:
			log.Info("node: garbage collected", "wal_objects", st.Deleted, "table_orphans", st.TableOrphans,
				"kept", st.Referenced, "protected", st.Protected)
		}
	}
}

// Close stops the engine, then the stores. Acknowledged data is durable
// before Close returns.
func (n *Node) Close() error {
	if n.gcStop != nil {
		n.stopOnce.Do(func() { close(n.gcStop) })
		<-n.gcDone
	}
	var errs []error
	if n.Tables != nil {
		errs = append(errs, n.Tables.Close())
	}
	if n.Engine != nil {
		errs = append(errs, n.Engine.Close())
	}
	if n.Meta != nil {
		errs = append(errs, n.Meta.Close())
	}
	if n.Embedded != nil {
		errs = append(errs, n.Embedded.Close())
	}
	if n.Store != nil {
		errs = append(errs, n.Store.Close())
	}
	return errors.Join(errs...)
}
