// Command crosslang is the Go side of the cross-language interop check
// (issue 6, item 2): it produces messages described by a JSON spec with
// pulsar-client-go, or consumes messages and prints them in the same JSON
// form, so another language's runner (e2e/interop/python/scenarios.py) can
// compare payload, key, properties and event time exactly. The Java side,
// java/lakegate/crosslang/CrossLang.java, implements the same contract with
// the Java client; e2e/interop/python/run.sh builds both.
//
//	crosslang produce -url pulsar://127.0.0.1:6650 -topic T [-batching] < spec.json
//	crosslang consume -url pulsar://127.0.0.1:6650 -topic T -sub S -n N [-timeout 30s]
//
// The spec (stdin of produce) and the output of consume (stdout) are one
// JSON array of messages:
//
//	[{"payload_b64": "...", "key": "k", "properties": {"a": "b"},
//	  "event_time_ms": 1700000000000}]
//
// key "" means no key; event_time_ms 0 means no event time. consume
// subscribes from the earliest message, receives exactly n messages (or
// fails after the timeout), acknowledges them and prints them in order.
// Exit status: 0 on success, 1 on any error (printed to stderr).
package main
