// Package bench is the storage-engine benchmark driver behind `lakegate
// bench engine` (Run): a real node per log count under a closed-loop append
// load, with append latency quantiles (an HDR-style histogram, hist.go),
// object PUTs and etcd transactions per second, and an optional read-back
// of every acknowledged append (Config.Verify); and the simulated month of
// a low-throughput topic's tables behind `lakegate bench tables`
// (RunTables: files, metadata and reader scan times per simulated day, with
// and without bin-packing and maintenance). cmd/lakegate parses the flags
// into a Config. tables-cluster.sh measures compaction against ingest on a
// three-node cluster. The scripts beside it (pulsar-perf*.sh) run the
// Pulsar perf tools against a standalone node; docs/benchmarks.md records
// the results of both.
package bench
