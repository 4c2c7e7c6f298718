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
	./protocol:FuzzReadFrame ./protocol:FuzzSplitBatch ./protocol:FuzzDecompress \
	./lakehouse:FuzzDecodeEntry:100000x ./lakehouse/delta:FuzzParseCommit:30000x \
	./gateway:FuzzSession:20000x

.PHONY: run build test test-unit fuzz interop bench bench-pulsar bench-compare bench-remote lint tools proto clean

## run: a standalone node on the embedded defaults (data in ./data)
run: build
	$(BIN)/lakegate standalone --data-dir ./data

build:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/lakegate ./cmd/lakegate

## test: everything CI runs — vet, unit + integration tests with -race, short fuzzing
test: tools lint test-unit fuzz

test-unit:
	$(GO) test -race -count=1 -timeout 20m ./...

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		IFS=: read -r pkg name n <<< "$$t"; n=$${n:-$(FUZZTIME)}; \
		echo "fuzz $$pkg $$name for $$n"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $$n $$pkg; \
	done

BENCH_FLAGS ?= --logs 1,100,1000 --duration 5s --warmup 2s --verify
BENCHTIME   ?= 5000x

## interop: other languages against lakegate: delta-rs, Spark 3.5 + delta-spark and pyiceberg read
## our tables (and the 100 000-message scenario of e2e/interop/tables), the Java and Python Pulsar
## clients run their scenario matrices, against a standalone node and again against a three-node
## cluster (one etcd, three `lakegate serve`); pinned packages go into .cache/ (venvs, jars, m2)
interop:
	./e2e/interop/delta/run.sh
	./e2e/interop/spark/run.sh
	./e2e/interop/iceberg/run.sh
	./e2e/interop/iceberg-rest/run.sh
	./e2e/interop/tables/run.sh
	./e2e/interop/python/run.sh
	./e2e/interop/java/run.sh
	LAKEGATE_NODES=3 ./e2e/interop/python/run.sh
	LAKEGATE_NODES=3 ./e2e/interop/java/run.sh

## bench: engine benchmarks (appends/s, MB/s, latency, PUTs/s for 1/100/1000 logs) and the
## upstream Go Pulsar perf tool against a standalone node (bench/pulsar-perf.sh); ~3–6 min
bench: build
	$(BIN)/lakegate bench engine $(BENCH_FLAGS)
	$(GO) test -p 1 -count 1 -run '^$$' -bench . -benchtime $(BENCHTIME) ./engine/ ./tables/
	./bench/pulsar-perf.sh
	./bench/pulsar-perf-java.sh

## bench-pulsar: only the perf-tool runs (~2–5 min)
bench-pulsar:
	./bench/pulsar-perf.sh
	./bench/pulsar-perf-java.sh

## bench-compare: lakegate standalone and Apache Pulsar 4.0.8 standalone (jars from Maven Central,
## bench/pulsar) side by side under the same pulsar-perf and Go perf loads, alternating, a fresh
## server per run; prints the ratio table, writes a latency plot (bench/compare.sh; COMPARE_* knobs,
## COMPARE_DOC=1 updates docs/benchmarks.md). Not part of `make test`: ~25 min with 2 repeats.
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
