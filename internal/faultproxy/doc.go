// Package faultproxy is an HTTP reverse proxy for tests that injects faults
// into the requests it forwards to one upstream (an S3 endpoint such as
// SeaweedFS): error responses (500 InternalError, 503 SlowDown, in S3's XML
// error format), added latency, and dropped connections, either before the
// request reaches the upstream or after it took effect (the lost reply:
// the ambiguous PUT). Faults are chosen per HTTP method (PUT, GET, …) at a
// rate, from a seeded random source, and can be changed while the proxy
// runs (Set, Outage).
//
// It listens on 127.0.0.1 on a free port; point the client's endpoint at
// URL. Counters (Stats) say how many requests were forwarded and how many
// were faulted, so a test can check that faults really happened.
//
// For tests and benchmarks only: bench/faultproxy runs it as a command for
// bench/remote.sh; nothing in the lakegate binary imports it.
package faultproxy
