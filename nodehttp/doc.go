// Package nodehttp is a lakegate node's HTTP surface: /metrics (Prometheus
// text format, families in docs/metrics.md), /healthz (the process serves
// HTTP), /readyz (the node can serve clients: its gateway is not draining
// and its metadata store answers) and, under /admin/, the gateway's Pulsar
// admin REST v2. It owns no state: the engine and the gateway own their
// metrics, this package only registers and serves them. It sees the
// storage side only as prometheus.Collectors (the engine's Collector), so
// it depends on the gateway and the lakestream contract, never on the
// engine.
//
// limits.go bounds the HTTP server (timeouts, header size, connections;
// docs/security.md, "Limits").
//
// It is production code (the handler cmd/lakegate serves) that tests build
// too (internal/testnode, the e2e and admin-client tests), which is why it
// is a package of its own rather than part of cmd/lakegate or internal/.
package nodehttp
