package engine

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/lakegate/lakegate/engine/catalog"
	"github.com/lakegate/lakegate/lakestream"
)

// Scheme is the lakestream.Open scheme of this engine:
//
//	lakegate:///abs/data/dir                      embedded etcd + file objects
//	lakegate://?data=DIR&objects=URL&etcd=H:P,H:P  any combination
func init() { lakestream.Register("lakegate", openCatalog) }

func openCatalog(ctx context.Context, u *url.URL, props map[string]string) (lakestream.StreamCatalog, error) {
	q := u.Query()
	cfg := NodeConfig{DataDir: q.Get("data"), ObjectURL: q.Get("objects")}
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
	n, err := StartNode(ctx, cfg)
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

// Catalog returns the level-2 stream catalog over this node's engine.
func (n *Node) Catalog() *catalog.Catalog {
	return catalog.New(n.Meta, n.Engine, catalog.Options{
		Root: n.Engine.opts.MetaRoot,
		TableProvider: func(md lakestream.StreamMetadata) lakestream.Table {
			return n.Engine.TableView(md, n.Config.ObjectURL)
		},
	})
}
