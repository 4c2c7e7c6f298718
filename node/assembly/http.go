package assembly

import (
	"context"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/nodehttp"
)

// serveHTTP builds the node's HTTP surface — /metrics, /healthz, /readyz
// and the Pulsar admin REST v2 under /admin/v2/ (nodehttp; metric families
// in docs/metrics.md), and the Iceberg REST catalog under /iceberg/ when
// Config.Iceberg gives one (docs/iceberg-catalog.md) — and serves it on
// Config.HTTP.
func (n *Node) serveHTTP(ctx context.Context) error {
	ac := AdminConfig(n.Gateway)
	ac.Doctor = n.Doctor
	collectors := []prometheus.Collector{n.Engine.Collector()}
	if n.Kafka != nil {
		collectors = append(collectors, n.Kafka.Collector())
	}
	if n.Txn != nil {
		collectors = append(collectors, n.Txn.Collector(broker.ClusterName))
	}
	h := nodehttp.Handler(n.Gateway, ac, n.Catalog, collectors...)
	if n.cfg.Iceberg != nil {
		ice, err := n.cfg.Iceberg(ctx, n)
		if err != nil {
			return fmt.Errorf("iceberg REST catalog: %w", err)
		}
		if ice != nil {
			mux := http.NewServeMux()
			mux.Handle("/iceberg/", ice)
			mux.Handle("/", h)
			h, n.Iceberg = mux, true
		}
	}
	n.Handler = h
	for _, ln := range n.cfg.HTTP {
		srv := n.cfg.HTTPLimits.Server(h, n.cfg.HTTPErrorLog)
		n.servers = append(n.servers, srv)
		go srv.Serve(ln) // a TLS listener hands TLS connections: r.TLS is set
	}
	return nil
}
