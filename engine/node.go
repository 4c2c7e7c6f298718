package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/lakegate/lakegate/lakehouse/iceberg"
	"github.com/lakegate/lakegate/meta"
	"github.com/lakegate/lakegate/objstore"
)

// NodeConfig says where a node's data and metadata live.
type NodeConfig struct {
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
	// Engine options (NodeID, flush sizes, …). RemoteStore is set from the
	// ObjectURL's scheme when left false.
	Engine Options
	// GCInterval is how often the node runs CollectGarbage (docs/gc.md);
	// negative: never. Default 1 min.
	GCInterval time.Duration
}

// Node is a running storage node: stores, embedded etcd (if any) and the
// engine. Close stops them in reverse order.
type Node struct {
	Engine   *Engine
	Store    objstore.Store
	Meta     meta.Store
	Embedded *meta.Embedded // nil with external etcd
	Config   NodeConfig

	gcStop   chan struct{} // closed by Close; nil when GC does not run
	gcDone   chan struct{}
	stopOnce sync.Once
}

// StartNode opens the stores named by cfg and starts an engine on them.
func StartNode(ctx context.Context, cfg NodeConfig) (*Node, error) {
	if cfg.DataDir == "" {
		cfg.DataDir = "data"
	}
	abs, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("engine: data dir: %w", err)
	}
	cfg.DataDir = abs
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("engine: data dir: %w", err)
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
	if cfg.Engine.IcebergCatalog.StoreURL == "" {
		cfg.Engine.IcebergCatalog.StoreURL = cfg.ObjectURL
	}
	if k := cfg.Engine.IcebergCatalog.Kind; (k == "" || k == iceberg.KindSQL) && cfg.Engine.IcebergCatalog.URI == "" {
		cfg.Engine.IcebergCatalog.URI = filepath.Join(cfg.DataDir, "iceberg", "catalog.db")
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
		n.Meta, err = meta.Dial(ctx, cfg.EtcdEndpoints, meta.DialOptions{EtcdOptions: meta.EtcdOptions{Prefix: cfg.EtcdPrefix}})
		if err != nil {
			return nil, err
		}
	}
	if n.Engine, err = New(n.Store, n.Meta, cfg.Engine); err != nil {
		return nil, err
	}
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
	log := n.Engine.opts.Logger
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
			log.Warn("engine: garbage collection failed", "err", err)
		case st.Deleted+st.TableOrphans > 0:
			log.Info("engine: garbage collected", "wal_objects", st.Deleted, "table_orphans", st.TableOrphans,
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
