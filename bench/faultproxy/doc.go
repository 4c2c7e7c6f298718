// Command faultproxy runs internal/faultproxy in front of an S3 endpoint
// for bench/remote.sh: every request of the listed methods gets the given
// latency (a stand-in for a real object store's round trip), nothing else
// is injected. It prints "faultproxy_url=<URL>" once it listens and runs
// until SIGINT/SIGTERM, then prints the request counts.
//
//	go run ./bench/faultproxy -upstream http://127.0.0.1:8333 -put-latency 30ms -get-latency 15ms
package main
