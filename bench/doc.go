// Package bench is the storage-engine benchmark driver behind `lakegate
// bench engine` (Run): a real node per log count under a closed-loop append
// load, with append latency quantiles (an HDR-style histogram, hist.go),
// object PUTs and etcd transactions per second, and an optional read-back
// of every acknowledged append (Config.Verify); and the simulated month of
// a low-throughput topic's tables behind `lakegate bench tables`
// (RunTables: files, metadata and reader scan times per simulated day, with
// and without bin-packing and maintenance). cmd/lakegate parses the flags
// into a Config or a TablesConfig. docs/benchmarks.md records the results
// of all the benchmarks below.
//
// Files:
//
//	engine.go            Run, Config: the engine benchmark
//	tables.go            RunTables, TablesConfig: the month of small ranges
//	etcdcap.go           RunEtcd, EtcdConfig: commit records/s one etcd carries
//	hist.go              the latency histogram and its quantiles
//
// Beside it, not part of the package (scripts and separate programs):
//
//	tables_scan.py       the delta-rs and pyiceberg table scans RunTables
//	                     times
//	pulsar-perf.sh       the upstream Go perf tool against a standalone node
//	pulsar-perf-java.sh  Pulsar's Java pulsar-perf (java/: its launcher)
//	compare.sh           lakegate and Apache Pulsar standalone side by side
//	                     (pulsar/: Pulsar's jars; tools/e2e: end-to-end
//	                     latency; tools/plot: the summary and its plot)
//	remote.sh            lakegate on S3 (SeaweedFS) behind faultproxy/, a
//	                     proxy adding a fixed latency to every request
//	tables-cluster.sh    compaction against ingest on a three-node cluster
//	idle-cost.sh         an idle node's (or cluster's) CPU and etcd writes
//	etcd-capacity.sh     `lakegate bench etcd` against a real etcd member
//	tools/               a separate Go module pinning the perf tool and
//	                     holding tools/e2e and tools/plot
package bench
