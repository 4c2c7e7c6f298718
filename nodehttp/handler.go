package nodehttp

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/lakegate/lakegate/gateway"
	"github.com/lakegate/lakegate/lakestream"
)

// readyTimeout bounds the metadata read of one /readyz.
const readyTimeout = 2 * time.Second

// Registry returns a registry with the Go runtime, process, the given
// (the storage engine's: engine.Engine.Collector) and, when gw is not nil,
// the gateway collectors.
func Registry(gw *gateway.Server, storage ...prometheus.Collector) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(storage...)
	if gw != nil {
		reg.MustRegister(gw.Collector())
	}
	return reg
}

// Handler serves /metrics (the collectors of Registry), /healthz, /readyz
// and, when gw is not nil, the admin REST under /admin/. cat, when not
// nil, is read by /readyz.
func Handler(gw *gateway.Server, cat lakestream.StreamCatalog, storage ...prometheus.Collector) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(Registry(gw, storage...), promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := ready(r.Context(), gw, cat); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ready\n"))
	})
	if gw != nil {
		admin := gw.AdminHandler()
		mux.Handle("/admin/", admin)
		mux.Handle("/lookup/", admin)
	}
	return mux
}

func ready(ctx context.Context, gw *gateway.Server, cat lakestream.StreamCatalog) error {
	if gw != nil && gw.Closing() {
		return fmt.Errorf("shutting down")
	}
	if cat == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	if _, err := cat.NamespaceExists(ctx, "public/default"); err != nil {
		return fmt.Errorf("metadata store: %w", err)
	}
	return nil
}
