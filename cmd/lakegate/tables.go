package main

import (
	"context"
	"log/slog"
	"strings"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/lakehouse/iceberg"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/node"
)

// defaultMaterialization is the cluster default policy for the configured
// formats.
func defaultMaterialization(formats []string) *lakestream.TableMaterializationPolicy {
	enabled := len(formats) > 0 && !(len(formats) == 1 && strings.EqualFold(formats[0], "none"))
	p := &lakestream.TableMaterializationPolicy{Enabled: &enabled}
	if enabled {
		for _, f := range formats {
			p.Catalogs = append(p.Catalogs, strings.ToUpper(f))
		}
	}
	return p
}

// startTables stores the cluster default materialization from the
// configuration and, when enabled, starts this node's compaction worker
// (nil when not).
func startTables(ctx context.Context, c *Config, n *node.Node, cat lakestream.StreamCatalog, rt actors.Runtime, log *slog.Logger) (*actors.CompactionWorker, error) {
	if err := cat.SetDefaultMaterialization(ctx, defaultMaterialization(c.Tables.Formats)); err != nil {
		return nil, err
	}
	if !c.Tables.Compaction {
		return nil, nil
	}
	return actors.StartCompactionWorker(rt, actors.CompactionWorkerOptions{
		Catalog:      cat,
		Compactor:    n.Tables.Compactor(),
		Policy:       actors.CompactionPolicy{Interval: c.Tables.Interval, MaxInflight: c.Tables.MaxInflight},
		ScanInterval: c.Tables.ScanInterval,
		Logger:       log,
	}), nil
}

// icebergCatalogConfig maps the tables.iceberg keys to the table layer's
// catalog configuration (the store URL and the sqlite default are filled
// in by node.Start).
func icebergCatalogConfig(c *Config) iceberg.CatalogConfig {
	ic := iceberg.CatalogConfig{Kind: c.Tables.Iceberg.Kind, URI: c.Tables.Iceberg.URI}
	props := map[string]string{}
	for k, v := range map[string]string{"warehouse": c.Tables.Iceberg.Warehouse, "credential": c.Tables.Iceberg.Credential, "token": c.Tables.Iceberg.Token} {
		if v != "" {
			props[k] = v
		}
	}
	if len(props) > 0 {
		ic.Props = props
	}
	return ic
}
