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
// families in docs/metrics.md).
func httpHandler(n *node.Node, gw *gateway.Server, cat lakestream.StreamCatalog) http.Handler {
	return nodehttp.Handler(gw, cat, n.Engine.Collector())
}
