package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/lakegate/lakegate/engine/meta"
	"github.com/lakegate/lakegate/engine/objstore"
	"github.com/lakegate/lakegate/lakehouse/iceberg"
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
}

// Node is a running storage node: stores, embedded etcd (if any) and the
// engine. Close stops them in reverse order.
type Node struct {
	Engine   *Engine
	Store    objstore.Store
	Meta     meta.Store
	Embedded *meta.Embedded // nil with external etcd
	Config   NodeConfig
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
	ok = true
	return n, nil
}

// Close stops the engine, then the stores. Acknowledged data is durable
// before Close returns.
func (n *Node) Close() error {
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
