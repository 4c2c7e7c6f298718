package node

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/lakegate/lakegate/engine/catalog"
	"github.com/lakegate/lakegate/lakestream"
)

// Scheme is the lakestream.Open scheme of a lakegate node (import this
// package for its side effect to register it):
//
//	lakegate:///abs/data/dir                      embedded etcd + file objects
//	lakegate://?data=DIR&objects=URL&etcd=H:P,H:P  any combination
func init() { lakestream.Register("lakegate", openCatalog) }

func openCatalog(ctx context.Context, u *url.URL, props map[string]string) (lakestream.StreamCatalog, error) {
	q := u.Query()
	cfg := Config{DataDir: q.Get("data"), ObjectURL: q.Get("objects")}
	if cfg.DataDir == "" && u.Path != "" {
		cfg.DataDir = u.Path
	}
	if e := q.Get("etcd"); e != "" {
		cfg.EtcdEndpoints = strings.Split(e, ",")
	}
	cfg.EtcdPrefix = q.Get("etcd-prefix")
	if cfg.DataDir == "" && (cfg.ObjectURL == "" || len(cfg.EtcdEndpoints) == 0) {
		return nil, fmt.Errorf("%w: lakegate URI needs a data dir, or objects= and etcd=", lakestream.ErrInvalidArgument)
	}
	n, err := Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &nodeCatalog{Catalog: n.Catalog(), node: n}, nil
}

// nodeCatalog is a catalog that owns its node: closing it stops the node.
type nodeCatalog struct {
	*catalog.Catalog
	node *Node
}

func (c *nodeCatalog) Close() error {
	c.Catalog.Close()
	return c.node.Close()
}

// Catalog returns the level-2 stream catalog over this node's engine, with
// the table layer's view as Stream.Table().
func (n *Node) Catalog() *catalog.Catalog {
	return catalog.New(n.Meta, n.Engine, catalog.Options{
		Root: n.Engine.MetaRoot(),
		TableProvider: func(md lakestream.StreamMetadata) lakestream.Table {
			return n.Tables.View(md, n.Config.ObjectURL)
		},
	})
}
