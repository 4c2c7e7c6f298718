// Package testservers starts the servers that tests run against: SeaweedFS
// as an S3 service (an external process), and fake-gcs-server as a GCS
// service (in process). Every server listens on loopback on ports chosen
// free at start, so test packages can run in parallel, and is stopped by the
// test's cleanup.
//
// External binaries are built by the project (tools/build-weed.sh, called by
// `make tools`) into .cache/bin/ at the repository root. A test whose binary
// is missing fails, saying how to build it; set LAKEGATE_SKIP_S3=1 to skip
// the S3 tests instead (e.g. on a machine that cannot build SeaweedFS).
//
// This package is for tests only; nothing in the product imports it.
package testservers
