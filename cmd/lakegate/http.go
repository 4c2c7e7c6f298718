package main

import (
	"net/http"

	"github.com/lakegate/lakegate/gateway"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/node"
	"github.com/lakegate/lakegate/nodehttp"
)

// httpHandler serves /metrics, /healthz, /readyz and, when gw is not nil,
// the Pulsar admin REST v2 under /admin/v2/ (nodehttp; metric
// families in docs/metrics.md); and the Iceberg REST catalog under
// /iceberg/ when iceberg is not nil (docs/iceberg-catalog.md).
func httpHandler(n *node.Node, gw *gateway.Server, cat lakestream.StreamCatalog, iceberg http.Handler) http.Handler {
	h := nodehttp.Handler(gw, cat, n.Engine.Collector())
	if iceberg == nil {
		return h
	}
	mux := http.NewServeMux()
	mux.Handle("/iceberg/", iceberg)
	mux.Handle("/", h)
	return mux
}
