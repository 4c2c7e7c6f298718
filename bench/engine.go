package bench

// The engine benchmark driver (`lakegate bench engine`): drives a real
// storage node (node.Start: embedded etcd and file:// objects in a
// temporary directory unless told otherwise) with a closed-loop append
// load, once per log count, and reports appends/s, MB/s, append latency
// quantiles, object PUTs/s and etcd transactions/s. docs/benchmarks.md
// records its results.

import (
	"context"
	"encoding/binary"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lakegate/lakegate/engine"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/node"
)

// Config is one `lakegate bench engine` invocation: a run per log count.
// Zero values are not defaults: cmd/lakegate fills every field from its
// flags (the flag help says the defaults).
type Config struct {
	LogCounts  []int
	Duration   time.Duration // measured part of each run
	Warmup     time.Duration // unmeasured load before it
	Producers  int           // concurrent appenders (closed loop)
	SizeBytes  int           // payload bytes per entry
	Linger     time.Duration // engine.Options.Linger; 0 = engine default
	FlushBytes int           // engine.Options.FlushBytes; 0 = engine default
	Pick       string        // PickRoundRobin or PickRandom
	Objects    string        // object store URL; "" = file:// in the data dir
	Etcd       []string      // external endpoints; nil = embedded member
	DataDir    string        // "" = a temporary directory, removed afterwards
	Keep       bool          // keep the temporary directory
	CSVPath    string        // also write the results as CSV here; "" = no
	Verify     bool          // read every log back after each run
	CPUProfile string        // pprof CPU profile of all runs; "" = none
}

// Validate reports a configuration Run cannot run.
func (c Config) Validate() error {
	switch {
	case len(c.LogCounts) == 0:
		return errors.New("bench engine: no log count")
	case c.Duration <= 0:
		return errors.New("bench engine: --duration must be positive")
	case c.Warmup < 0:
		return errors.New("bench engine: --warmup must not be negative")
	case c.Producers < 1:
		return errors.New("bench engine: --producers must be at least 1")
	case c.SizeBytes < 1:
		return errors.New("bench engine: --size must be at least 1")
	case c.Linger < 0 || c.FlushBytes < 0:
		return errors.New("bench engine: --linger and --flush-bytes must not be negative")
	case c.Pick != PickRoundRobin && c.Pick != PickRandom:
		return fmt.Errorf("bench engine: --pick %q: want %s or %s", c.Pick, PickRoundRobin, PickRandom)
	}
	for _, n := range c.LogCounts {
		if n < 1 {
			return fmt.Errorf("bench engine: --logs: %d is not a positive count", n)
		}
	}
	return nil
}

// How each append picks its log (Config.Pick).
const (
	PickRoundRobin = "round-robin"
	PickRandom     = "random"
)

const (
	// benchVerifyWorkers bounds the logs read back concurrently by --verify
	// and the logs opened concurrently before a run.
	benchVerifyWorkers = 8
	// benchReadBytesMax bounds one ReadEntries call of --verify.
	benchReadBytesMax = 8 << 20
	// benchLogTagBytes: payloads start with their log id (8 bytes, big
	// endian) when they are at least this long, so --verify can tell a
	// misplaced entry.
	benchLogTagBytes = 8
)

// Run runs the engine benchmark: for each log count a fresh node (node.Start)
// under a closed-loop append load; progress goes to stderr, the results
// table (Markdown) to stdout. It fails when a run fails or, with Verify, a
// log does not read back as acknowledged.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	var err error
	base := cfg.DataDir
	if base == "" {
		if base, err = os.MkdirTemp("", "lakegate-bench-"); err != nil {
			return err
		}
		if cfg.Keep {
			fmt.Fprintln(os.Stderr, "bench: data kept in", base)
		} else {
			defer os.RemoveAll(base)
		}
	}
	if cfg.CPUProfile != "" {
		f, err := os.Create(cfg.CPUProfile)
		if err != nil {
			return fmt.Errorf("bench engine: --cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("bench engine: --cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	var results []*benchResult
	var runErr error
	for i, n := range cfg.LogCounts {
		r, err := runEngineBenchOnce(ctx, cfg, base, i, n)
		if err != nil {
			runErr = fmt.Errorf("bench engine: run with %d logs: %w", n, err)
			break
		}
		results = append(results, r)
	}
	if len(results) > 0 {
		printBenchTable(os.Stdout, cfg, results)
		if cfg.CSVPath != "" {
			if err := writeBenchCSV(cfg, results); err != nil && runErr == nil {
				runErr = err
			}
		}
	}
	if runErr == nil {
		for _, r := range results {
			if r.verified != "-" && r.verified != "ok" {
				runErr = fmt.Errorf("bench engine: verification failed for %d logs: %s", r.logs, r.verified)
				break
			}
		}
	}
	return runErr
}

// benchResult is one run: one log count.
type benchResult struct {
	logs    int
	seconds float64 // measured window

	appends     int64 // successful appends completed in the window
	errors      int64 // failed appends, whole run (warmup included)
	firstErr    error
	lat         latencyHist // latencies of appends completed in the window
	appendBytes int64       // payload bytes of those appends

	// Engine counter deltas over the window.
	puts, putBytes, putNanos int64
	txns, txnConflicts       int64
	txnNanos                 int64
	applies, applyNanos      int64 // commit records applied (by the watch, or at once on the reply), time from the commit reply
	foldTxns                 int64

	verified string // "ok", "-" (not asked) or what failed
}

func (r *benchResult) appendsPerSec() float64 { return float64(r.appends) / r.seconds }
func (r *benchResult) mbPerSec() float64      { return float64(r.appendBytes) / 1e6 / r.seconds }
func (r *benchResult) putsPerSec() float64    { return float64(r.puts) / r.seconds }
func (r *benchResult) txnsPerSec() float64    { return float64(r.txns) / r.seconds }

func (r *benchResult) kibPerPut() float64 {
	if r.puts == 0 {
		return 0
	}
	return float64(r.putBytes) / 1024 / float64(r.puts)
}

func (r *benchResult) meanMs(nanos, n int64) float64 {
	if n == 0 {
		return 0
	}
	return float64(nanos) / 1e6 / float64(n)
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// benchProducer is one closed-loop appender's private state.
type benchProducer struct {
	lat      latencyHist
	appends  int64 // completed in the window
	bytes    int64
	errors   int64
	firstErr error
}

// runEngineBenchOnce starts a fresh node, opens nLogs logs, runs the load
// for warmup+duration and returns the measured window.
func runEngineBenchOnce(ctx context.Context, cfg Config, base string, runIdx, nLogs int) (*benchResult, error) {
	dir := filepath.Join(base, fmt.Sprintf("run-%d-logs-%d", runIdx, nLogs))
	if _, err := os.Stat(dir); err == nil {
		// Logs that already hold entries would skew the run and fail --verify.
		return nil, fmt.Errorf("%s exists (left by an earlier run?): remove it or choose another --data-dir", dir)
	}
	ncfg := node.Config{DataDir: dir, ObjectURL: cfg.Objects, EtcdEndpoints: cfg.Etcd}
	if len(cfg.Etcd) > 0 {
		// A shared cluster: keep every run's keys apart.
		ncfg.EtcdPrefix = fmt.Sprintf("/lakegate-bench/%d-%d", time.Now().UnixNano(), runIdx)
	}
	ncfg.Engine.Linger = cfg.Linger
	ncfg.Engine.FlushBytes = cfg.FlushBytes
	ncfg.Engine.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	n, err := node.Start(ctx, ncfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := n.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "bench: closing node:", err)
		}
		if cfg.DataDir == "" && !cfg.Keep {
			os.RemoveAll(dir)
		}
	}()
	e := n.Engine

	logs, err := openBenchLogs(ctx, e, nLogs)
	if err != nil {
		return nil, err
	}

	run := &engineRun{
		cfg: cfg, e: e, logs: logs, runIdx: runIdx, nLogs: nLogs,
		perLogOK:  make([]atomic.Int64, nLogs),
		perLogErr: make([]atomic.Int64, nLogs),
		producers: make([]*benchProducer, cfg.Producers),
	}
	run.startAt = time.Now()
	run.measureAt = run.startAt.Add(cfg.Warmup)
	run.stopAt = run.measureAt.Add(cfg.Duration)
	var wg sync.WaitGroup
	for p := range run.producers {
		bp := &benchProducer{}
		run.producers[p] = bp
		wg.Add(1)
		go func() {
			defer wg.Done()
			run.produce(ctx, p, bp)
		}()
	}
	m0, m1 := run.coordinate(ctx)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := run.result(m0, m1)
	if cfg.Verify {
		start := time.Now()
		r.verified = verifyBenchLogs(ctx, logs, run.perLogOK, run.perLogErr, cfg.SizeBytes)
		fmt.Fprintf(os.Stderr, "bench logs=%d: verify %s (%.1fs)\n", nLogs, r.verified, time.Since(start).Seconds())
	}
	return r, nil
}

// engineRun is one run of the engine benchmark: its producers append to
// its logs until stopAt, measuring from measureAt.
type engineRun struct {
	cfg    Config
	e      *engine.Engine
	logs   []lakestream.Log
	runIdx int
	nLogs  int

	startAt, measureAt, stopAt time.Time

	perLogOK  []atomic.Int64 // acknowledged appends per log, whole run
	perLogErr []atomic.Int64 // failed (possibly committed) appends per log
	completed atomic.Int64   // appends answered (ok or not), for progress
	failed    atomic.Int64
	rr        atomic.Uint64
	producers []*benchProducer
}

// produce is producer p: one append at a time to a log picked by
// cfg.Pick, until stopAt.
func (run *engineRun) produce(ctx context.Context, p int, bp *benchProducer) {
	cfg, nLogs := run.cfg, run.nLogs
	rng := rand.New(rand.NewPCG(uint64(run.runIdx), uint64(p)))
	payload := make([]byte, cfg.SizeBytes)
	for i := range payload {
		payload[i] = byte(rng.Uint32())
	}
	for ctx.Err() == nil {
		t0 := time.Now()
		if !t0.Before(run.stopAt) {
			return
		}
		var li int
		if cfg.Pick == PickRandom {
			li = rng.IntN(nLogs)
		} else {
			li = int((run.rr.Add(1) - 1) % uint64(nLogs))
		}
		if len(payload) >= benchLogTagBytes {
			binary.BigEndian.PutUint64(payload, uint64(li))
		}
		_, err := run.logs[li].Append(ctx, 1, payload)
		t1 := time.Now()
		run.completed.Add(1)
		if err != nil {
			run.perLogErr[li].Add(1)
			run.failed.Add(1)
			bp.errors++
			if bp.firstErr == nil {
				bp.firstErr = err
			}
			continue
		}
		run.perLogOK[li].Add(1)
		if !t1.Before(run.measureAt) && t1.Before(run.stopAt) {
			bp.lat.Record(t1.Sub(t0))
			bp.appends++
			bp.bytes += int64(len(payload))
		}
	}
}

// coordinate takes the engine counters at the window's edges and prints
// progress once a second, until stopAt (or ctx ends).
func (run *engineRun) coordinate(ctx context.Context) (m0, m1 engine.Metrics) {
	cfg, e := run.cfg, run.e
	measureTimer := time.NewTimer(time.Until(run.measureAt))
	stopTimer := time.NewTimer(time.Until(run.stopAt))
	tick := time.NewTicker(time.Second)
	defer measureTimer.Stop()
	defer stopTimer.Stop()
	defer tick.Stop()
	if cfg.Warmup == 0 {
		m0 = e.Metrics()
	}
	lastN, lastPuts, lastT := int64(0), e.Metrics().ObjectPuts, run.startAt
	progress := func(now time.Time) {
		n := run.completed.Load()
		puts := e.Metrics().ObjectPuts
		dt := now.Sub(lastT).Seconds()
		phase := "measure"
		if now.Before(run.measureAt) {
			phase = "warmup"
		}
		fmt.Fprintf(os.Stderr, "bench logs=%-5d %-7s %5.1fs  appends=%-9d rate=%8.0f/s  puts=%6.0f/s  errors=%d\n",
			run.nLogs, phase, now.Sub(run.startAt).Seconds(), n, float64(n-lastN)/dt, float64(puts-lastPuts)/dt, run.failed.Load())
		lastN, lastPuts, lastT = n, puts, now
	}
	for {
		select {
		case <-measureTimer.C:
			if cfg.Warmup > 0 {
				m0 = e.Metrics()
			}
		case <-stopTimer.C:
			return m0, e.Metrics()
		case now := <-tick.C:
			progress(now)
		case <-ctx.Done():
			return m0, m1
		}
	}
}

// result sums the producers' measurements and the engine's counters
// between m0 and m1, and prints them.
func (run *engineRun) result(m0, m1 engine.Metrics) *benchResult {
	r := &benchResult{
		logs: run.nLogs, seconds: run.cfg.Duration.Seconds(),
		puts: m1.ObjectPuts - m0.ObjectPuts, putBytes: m1.ObjectPutBytes - m0.ObjectPutBytes,
		putNanos: m1.ObjectPutNanos - m0.ObjectPutNanos,
		txns:     m1.Txns - m0.Txns, txnConflicts: m1.TxnConflicts - m0.TxnConflicts,
		txnNanos: m1.TxnNanos - m0.TxnNanos,
		applies:  m1.ApplyWaits - m0.ApplyWaits + m1.OwnApplies - m0.OwnApplies, applyNanos: m1.ApplyWaitNanos - m0.ApplyWaitNanos,
		foldTxns: m1.FoldTxns - m0.FoldTxns,
		verified: "-",
	}
	for _, bp := range run.producers {
		r.lat.Merge(&bp.lat)
		r.appends += bp.appends
		r.appendBytes += bp.bytes
		r.errors += bp.errors
		if r.firstErr == nil {
			r.firstErr = bp.firstErr
		}
	}
	fmt.Fprintf(os.Stderr, "bench logs=%d: %.0f appends/s, %.1f MB/s, p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, max %.2f ms, %.1f PUTs/s (mean %.2f ms), %.1f txns/s (mean %.2f ms, %d conflicts), %d errors\n",
		run.nLogs, r.appendsPerSec(), r.mbPerSec(), ms(r.lat.Quantile(0.5)), ms(r.lat.Quantile(0.99)), ms(r.lat.Quantile(0.999)), ms(r.lat.Max()),
		r.putsPerSec(), r.meanMs(r.putNanos, r.puts), r.txnsPerSec(), r.meanMs(r.txnNanos, r.txns), r.txnConflicts, r.errors)
	if r.firstErr != nil {
		fmt.Fprintln(os.Stderr, "bench: first append error:", r.firstErr)
	}
	return r
}

// openBenchLogs opens (creating) logs 0..n-1 before the clock starts, so
// that log creation is not measured.
func openBenchLogs(ctx context.Context, e *engine.Engine, n int) ([]lakestream.Log, error) {
	logs := make([]lakestream.Log, n)
	err := forEachParallel(n, func(i int) error {
		l, err := e.Log(ctx, lakestream.LogID(i))
		logs[i] = l
		return err
	})
	return logs, err
}

// forEachParallel calls fn(0..n-1) on benchVerifyWorkers goroutines and
// returns the first error.
func forEachParallel(n int, fn func(i int) error) error {
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		first   error
	)
	for range min(n, benchVerifyWorkers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					errOnce.Do(func() { first = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// verifyBenchLogs reads every log back from offset 0 and checks that it
// holds exactly the acknowledged appends (or, for a log with failed
// appends, whose outcome is unknown, between acknowledged and acknowledged
// plus failed), with contiguous offsets, one record per entry, the right
// size and the log's own tag. It returns "ok" or the first problem.
func verifyBenchLogs(ctx context.Context, logs []lakestream.Log, ok, failed []atomic.Int64, size int) string {
	err := forEachParallel(len(logs), func(i int) error {
		l := logs[i]
		lo, hi := ok[i].Load(), ok[i].Load()+failed[i].Load()
		next, err := l.NextOffset(ctx)
		if err != nil {
			return fmt.Errorf("log %d: %w", i, err)
		}
		if next < lo || next > hi {
			return fmt.Errorf("log %d: head %d, but %d appends acknowledged (%d failed)", i, next, lo, hi-lo)
		}
		var off int64
		for off < next {
			ents, err := l.ReadEntries(ctx, off, 1<<16, benchReadBytesMax)
			if err != nil {
				return fmt.Errorf("log %d: read at %d: %w", i, off, err)
			}
			if len(ents) == 0 {
				return fmt.Errorf("log %d: read at %d below head %d returned nothing", i, off, next)
			}
			for _, ent := range ents {
				switch {
				case ent.Offset != off:
					return fmt.Errorf("log %d: entry at %d, want %d", i, ent.Offset, off)
				case ent.Records != 1 || len(ent.Payload) != size:
					return fmt.Errorf("log %d: entry %d has %d records and %d bytes, want 1 and %d", i, off, ent.Records, len(ent.Payload), size)
				case size >= benchLogTagBytes && binary.BigEndian.Uint64(ent.Payload) != uint64(i):
					return fmt.Errorf("log %d: entry %d belongs to log %d", i, off, binary.BigEndian.Uint64(ent.Payload))
				}
				off++
			}
		}
		return nil
	})
	if err != nil {
		return err.Error()
	}
	return "ok"
}

func describeBenchSetup(cfg Config) string {
	objects := "file:// (temporary directory)"
	if cfg.Objects != "" {
		objects = cfg.Objects
	} else if cfg.DataDir != "" {
		objects = "file://" + cfg.DataDir
	}
	etcd := "embedded single member"
	if len(cfg.Etcd) > 0 {
		etcd = strings.Join(cfg.Etcd, ",")
	}
	linger, flush := "engine default", "engine default"
	if cfg.Linger > 0 {
		linger = cfg.Linger.String()
	}
	if cfg.FlushBytes > 0 {
		flush = strconv.Itoa(cfg.FlushBytes)
	}
	return fmt.Sprintf("objects %s, etcd %s; %d producers (closed loop), %d-byte entries, pick %s; linger %s, flush-bytes %s; warmup %s, measured %s per row; GOMAXPROCS %d, %s",
		objects, etcd, cfg.Producers, cfg.SizeBytes, cfg.Pick, linger, flush, cfg.Warmup, cfg.Duration, runtime.GOMAXPROCS(0), runtime.Version())
}

func printBenchTable(w io.Writer, cfg Config, rs []*benchResult) {
	fmt.Fprintf(w, "%s\n\n", describeBenchSetup(cfg))
	fmt.Fprintln(w, "| logs | appends/s | MB/s | p50 ms | p99 ms | p99.9 ms | max ms | PUTs/s | KiB/PUT | PUT ms | commit txns/s | txn ms | apply ms | fold txns/s | errors | verify |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---:|")
	for _, r := range rs {
		fmt.Fprintf(w, "| %d | %.0f | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f | %.1f | %.2f | %.1f | %.2f | %.2f | %.1f | %d | %s |\n",
			r.logs, r.appendsPerSec(), r.mbPerSec(),
			ms(r.lat.Quantile(0.5)), ms(r.lat.Quantile(0.99)), ms(r.lat.Quantile(0.999)), ms(r.lat.Max()),
			r.putsPerSec(), r.kibPerPut(), r.meanMs(r.putNanos, r.puts),
			r.txnsPerSec(), r.meanMs(r.txnNanos, r.txns), r.meanMs(r.applyNanos, r.applies),
			float64(r.foldTxns)/r.seconds, r.errors, r.verified)
	}
}

func writeBenchCSV(cfg Config, rs []*benchResult) error {
	f, err := os.Create(cfg.CSVPath)
	if err != nil {
		return fmt.Errorf("bench engine: --csv: %w", err)
	}
	w := csv.NewWriter(f)
	w.Write([]string{
		"logs", "producers", "size_bytes", "linger", "flush_bytes", "pick", "seconds",
		"appends", "appends_per_s", "mb_per_s", "p50_ms", "p99_ms", "p999_ms", "max_ms", "mean_ms",
		"puts", "puts_per_s", "bytes_per_put", "put_mean_ms",
		"txns", "txns_per_s", "txn_conflicts", "txn_mean_ms", "errors", "verify",
	})
	f64 := func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
	for _, r := range rs {
		bytesPerPut := 0.0
		if r.puts > 0 {
			bytesPerPut = float64(r.putBytes) / float64(r.puts)
		}
		w.Write([]string{
			strconv.Itoa(r.logs), strconv.Itoa(cfg.Producers), strconv.Itoa(cfg.SizeBytes),
			cfg.Linger.String(), strconv.Itoa(cfg.FlushBytes), cfg.Pick, f64(r.seconds),
			strconv.FormatInt(r.appends, 10), f64(r.appendsPerSec()), f64(r.mbPerSec()),
			f64(ms(r.lat.Quantile(0.5))), f64(ms(r.lat.Quantile(0.99))), f64(ms(r.lat.Quantile(0.999))),
			f64(ms(r.lat.Max())), f64(ms(r.lat.Mean())),
			strconv.FormatInt(r.puts, 10), f64(r.putsPerSec()), f64(bytesPerPut), f64(r.meanMs(r.putNanos, r.puts)),
			strconv.FormatInt(r.txns, 10), f64(r.txnsPerSec()), strconv.FormatInt(r.txnConflicts, 10),
			f64(r.meanMs(r.txnNanos, r.txns)), strconv.FormatInt(r.errors, 10), r.verified,
		})
	}
	w.Flush()
	if err := errors.Join(w.Error(), f.Close()); err != nil {
		return fmt.Errorf("bench engine: --csv: %w", err)
	}
	return nil
}
