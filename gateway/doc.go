// Package gateway is lakegate's front door: the TCP listener speaking the
// Pulsar binary protocol (one session per connection), topic lookup, auth,
// and the admin REST + /metrics HTTP server. It sees storage only through the
// lakestream interfaces and the actors package; it never imports engine.
package gateway
