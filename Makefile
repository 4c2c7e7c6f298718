# lakegate — the two commands are `make run` and `make test` (see README.md).
SHELL := /bin/bash
GO    ?= go
BIN   := .cache/bin
# An execution count, not a duration: Go 1.26's fuzz coordinator can fail a
# duration run at its deadline with a spurious "context deadline exceeded"
# (golang/go#75804, fixed in Go 1.27).
FUZZTIME ?= 300000x
# Fuzz targets as "package:Target[:executions]", run for FUZZTIME (or their own
# count: slow targets get fewer executions) by `make fuzz`.
FUZZ_TARGETS := \
	./engine/wal:FuzzDecodeChunk ./engine/wal:FuzzDecodeObject \
	./engine/cursor:FuzzDecode ./engine/index:FuzzDecodeEntry ./engine/index:FuzzDecodeHead ./engine/index:FuzzDecodeRecord \
	./protocol:FuzzReadFrame ./protocol:FuzzSplitBatch ./protocol:FuzzDecompress ./protocol:FuzzEntryRecordKeys \
	./actors:FuzzDecodeCompactedEntry ./actors:FuzzDecodeCompactionRecord \
	./lakehouse:FuzzDecodeEntry:100000x ./lakehouse:FuzzNestedDecode:100000x ./lakehouse/delta:FuzzParseCommit:30000x \
	./gateway:FuzzSession:20000x ./gateway:FuzzAuthHandshake:20000x \
	./auth:FuzzParseJWKS:100000x ./kafka:FuzzEntryFromBatch:100000x ./kafka:FuzzAppendBatch:100000x

.PHONY: run build test test-scripts test-unit fuzz txn-check interop bench bench-pulsar bench-compare bench-remote bench-tables bench-compaction lint tools proto clean

## run: a standalone node on the embedded defaults (data in ./data)
run: build
	$(BIN)/lakegate standalone --data-dir ./data --kafka-addr :9092

build:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/lakegate ./cmd/lakegate

# timed LABEL[,CMD]: run CMD (by default LABEL itself), then say how long
# LABEL took (CI's time budget is read from these lines), keeping CMD's exit
# status.
timed = @echo '$(strip $(1))'; s=$$SECONDS; $(or $(2),$(1)); rc=$$?; echo 'make: $(strip $(1)) took '$$((SECONDS - s))' s'; exit $$rc

## test: everything CI runs — vet, unit + integration tests with -race, short fuzzing
test: tools lint test-scripts test-unit fuzz

# test-scripts: the interop scripts' own checks (a failure outside the named
# Go tests must fail go_test_pass).
test-scripts:
	./e2e/interop/gotest_selftest.sh

# The two slowest packages (tables, engine: 3 and 2 min with -race) go
# first, so that the others run beside them instead of after them.
# The e2e package runs without -race: pulsar-client-go v0.19.0 races with
# itself when a producer reconnects while it sends (grabCnx writes the
# producer name and encryptor that the send loop reads), which every
# failover and unload test provokes. Every other package runs with -race.
test-unit:
	$(call timed,unit tests with -race,$(GO) test -race -count=1 -timeout 20m ./tables/ ./engine/ $$($(GO) list ./... | grep -v -e '/e2e$$' -e '/tables$$' -e '/engine$$'))
	$(call timed,e2e tests,$(GO) test -count=1 -timeout 20m ./e2e/)

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		IFS=: read -r pkg name n <<< "$$t"; n=$${n:-$(FUZZTIME)}; \
		echo "fuzz $$pkg $$name for $$n"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $$n $$pkg; \
	done

## txn-check: the Jepsen-style transaction check in its long mode (e2e/txn_check_test.go judged by
## e2e/txncheck; docs/transactions.md, "Invariants and how they are checked"): 6 writers on 8 partitions,
## three nodes on a three-member etcd, kill -9 of partition owners, coordinators and the etcd leader in
## turn for TXNCHECK_DURATION (default 10m; TXNCHECK_SEED replays a seed). Its short mode runs in `make test`.
TXNCHECK_DURATION ?= 10m
txn-check:
	$(call timed,txn-check,LAKEGATE_TXNCHECK_LONG=$(TXNCHECK_DURATION) $(if $(TXNCHECK_SEED),LAKEGATE_TXNCHECK_SEED=$(TXNCHECK_SEED)) $(GO) test -count=1 -timeout 90m -v -run '^TestTxnCheck$$' ./e2e/)

BENCH_FLAGS ?= --logs 1,100,1000 --duration 5s --warmup 2s --verify
BENCHTIME   ?= 5000x

## interop: other languages against lakegate: delta-rs, Spark 3.5 + delta-spark and pyiceberg read
## our tables (and the 100 000-message scenario of e2e/interop/tables), the Java and Python Pulsar
## clients run their scenario matrices, against a standalone node and again against a three-node
## cluster (one etcd, three `lakegate serve`), Pulsar's own pulsar-admin and pulsar-client
## (e2e/interop/tools), against a secured node (TLS, tokens, mTLS, grants: e2e/interop/secure), with
## their OAuth2 plugins against a test OpenID Connect issuer (e2e/interop/oauth), and through Apache
## Pulsar's own proxy (pulsar-proxy 4.0.8) in front of three secured nodes (e2e/interop/proxy),
## and Kafka clients on the Kafka listener — Java kafka-clients 4.4.0, Kafka's CLI tools, confluent-kafka
## — against one node and three (e2e/interop/kafka); pinned packages go into .cache/ (venvs, jars, m2); two lanes at once (e2e/interop/lanes.sh;
## INTEROP_LANES=1: one after the other)
interop:
	$(call timed,interop,./e2e/interop/lanes.sh)

## bench: engine benchmarks (appends/s, MB/s, latency, PUTs/s for 1/100/1000 logs) and the
## upstream Go Pulsar perf tool against a standalone node (bench/pulsar-perf.sh); ~3–6 min
bench: build
	$(BIN)/lakegate bench engine $(BENCH_FLAGS)
	$(GO) test -p 1 -count 1 -run '^$$' -bench . -benchtime $(BENCHTIME) ./engine/ ./tables/ ./objstore/
	./bench/pulsar-perf.sh
	./bench/pulsar-perf-java.sh

## bench-tables: a simulated month of small ranges (2 partitions, one compaction each per simulated
## 30 min) with bin-packing and maintenance, then 7 days without; delta-rs and pyiceberg scan the
## table on the way (docs/benchmarks.md, "A month of small ranges"); ~30 min
TABLES_BENCH_FLAGS ?= --days 30 --ranges-per-day 48 --scan-days 1,7,14,21
bench-tables: build
	@set -e; dpy=$$(./e2e/interop/delta/setup.sh | tail -1); ipy=$$(./e2e/interop/iceberg/setup.sh | tail -1); \
	$(BIN)/lakegate bench tables $(TABLES_BENCH_FLAGS) --deltars-python "$$dpy" --pyiceberg-python "$$ipy"; \
	$(BIN)/lakegate bench tables --days 7 --ranges-per-day 48 --scan-days 1 --maintain=false --deltars-python "$$dpy" --pyiceberg-python "$$ipy"

## bench-compaction: compaction against ingest on a three-node cluster (bench/tables-cluster.sh: produced vs
## compacted MB/s, lag, catch-up time, CPU with and without compaction; docs/benchmarks.md); ~8 min
bench-compaction:
	./bench/tables-cluster.sh

## bench-pulsar: only the perf-tool runs (~2–5 min)
bench-pulsar:
	./bench/pulsar-perf.sh
	./bench/pulsar-perf-java.sh

## bench-compare: lakegate standalone and Apache Pulsar 4.0.8 standalone (jars from Maven Central,
## bench/pulsar) side by side under the same pulsar-perf and Go perf loads, alternating, a fresh
## server per run; prints the ratio table, writes a latency plot (bench/compare.sh; COMPARE_* knobs,
## COMPARE_DOC=1 updates docs/benchmarks.md). Not part of `make test`: ~31 min with 2 repeats.
## The Kafka side: COMPARE_TARGETS="lakegate-kafka kafka kafka-fsync" (lakegate's Kafka listener,
## Apache Kafka 4.4.0 KRaft with its default flush and with an fsync per append) and
## COMPARE_LOADS="kmax1 kmax8 kmax100 kfixed20k ke2e10k" (kafka-producer-perf-test, bench/tools/kafkae2e).
bench-compare:
	./bench/compare.sh

## bench-remote: lakegate on S3 (SeaweedFS) behind the fault proxy with PUT latency, remote
## defaults: the engine driver on 1/100/1000 logs and pulsar-perf at a fixed rate (bench/remote.sh)
bench-remote:
	./bench/remote.sh

lint:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## tools: servers the tests start (SeaweedFS for S3, Azurite for Azure), from pinned versions
tools:
	./tools/build-weed.sh
	./tools/install-azurite.sh

proto:
	./protocol/gen.sh

clean:
	rm -rf .cache/bin data
