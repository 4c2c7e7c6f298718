// Package nodehttp is a lakegate node's HTTP surface: /metrics (Prometheus
// text format, families in docs/metrics.md), /healthz (the process serves
// HTTP), /readyz (the node can serve clients: its gateway is not draining
// and its metadata store answers) and, under /admin/, the gateway's Pulsar
// admin REST v2. It owns no state: the engine and the gateway own their
// metrics, this package only registers and serves them. cmd/lakegate and
// the e2e tests build the same handler.
package nodehttp
