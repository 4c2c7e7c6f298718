package nodehttp

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/lakegate/lakegate/admin"
	"github.com/lakegate/lakegate/lakestream"
)

// readyTimeout bounds the metadata read of one /readyz.
const readyTimeout = 2 * time.Second

// Front is what the node's HTTP surface needs of its Pulsar front door
// (the gateway): its metrics, and whether it is shutting down.
type Front interface {
	Collector() prometheus.Collector
	Closing() bool
}

// Registry returns a registry with the Go runtime, process, the given
// (the storage engine's: engine.Engine.Collector) and, when gw is not nil,
// the gateway collectors.
func Registry(gw Front, storage ...prometheus.Collector) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(storage...)
	if gw != nil {
		reg.MustRegister(gw.Collector())
	}
	return reg
}

// Handler serves /metrics (the collectors of Registry), /healthz, /readyz
// and, when gw is not nil, the admin REST (package admin, built from
// adm) under /admin/ and /lookup/. cat, when not nil, is read by /readyz.
func Handler(gw Front, adm admin.Config, cat lakestream.StreamCatalog, storage ...prometheus.Collector) http.Handler {
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
		h := admin.Handler(adm)
		mux.Handle("/admin/", h)
		mux.Handle("/lookup/", h)
	}
	return mux
}

func ready(ctx context.Context, gw Front, cat lakestream.StreamCatalog) error {
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
