package main

import (
	"net/http"

	"github.com/lakegate/lakegate/engine"
	"github.com/lakegate/lakegate/gateway"
	"github.com/lakegate/lakegate/internal/nodehttp"
	"github.com/lakegate/lakegate/lakestream"
)

// httpHandler serves /metrics, /healthz, /readyz and, when gw is not nil,
// the Pulsar admin REST v2 under /admin/v2/ (internal/nodehttp; metric
// families in docs/metrics.md).
func httpHandler(n *engine.Node, gw *gateway.Server, cat lakestream.StreamCatalog) http.Handler {
	return nodehttp.Handler(n.Engine, gw, cat)
}
