package main

// `lakegate bench engine`: flags of the engine benchmark driver (package
// bench runs it).

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lakegate/lakegate/bench"
)

func runBench(args []string) error {
	if len(args) == 0 {
		return errors.New("bench: which benchmark? usage: lakegate bench engine [flags] (-h for flags)")
	}
	switch args[0] {
	case "engine":
		return runBenchEngine(args[1:])
	case "tables":
		return runBenchTables(args[1:])
	case "etcd":
		return runBenchEtcd(args[1:])
	case "-h", "--help", "help":
		fmt.Fprintln(os.Stderr, "usage: lakegate bench engine|tables|etcd [flags]   (lakegate bench engine -h lists the flags)")
		return nil
	default:
		return fmt.Errorf("bench: unknown benchmark %q (have: engine, tables, etcd)", args[0])
	}
}

// parseBench parses a bench subcommand's flags. help is true after -h
// (the usage was printed); arguments left over are an error.
func parseBench(fs *flag.FlagSet, args []string) (help bool, err error) {
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return true, nil
	} else if err != nil {
		return false, err
	}
	if fs.NArg() > 0 {
		return false, fmt.Errorf("%s: unexpected arguments %q", fs.Name(), fs.Args())
	}
	return false, nil
}

// positiveInts parses the comma-separated value of a bench flag: positive
// integers, empty items skipped; what names one in the error.
func positiveInts(fs *flag.FlagSet, name, list, what string) ([]int, error) {
	var out []int
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%s: --%s: %q is not %s", fs.Name(), name, s, what)
		}
		out = append(out, n)
	}
	return out, nil
}

// benchContext is cancelled by SIGINT or SIGTERM.
func benchContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func runBenchEngine(args []string) error {
	cfg, err := parseEngineBenchFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	ctx, stop := benchContext()
	defer stop()
	return bench.Run(ctx, cfg)
}

func parseEngineBenchFlags(args []string) (bench.Config, error) {
	fs := flag.NewFlagSet("bench engine", flag.ContinueOnError)
	var (
		c          bench.Config
		logs, etcd string
	)
	fs.StringVar(&logs, "logs", "1,100,1000", "comma-separated log counts; one run per count")
	fs.DurationVar(&c.Duration, "duration", 10*time.Second, "measured time of each run")
	fs.DurationVar(&c.Warmup, "warmup", 2*time.Second, "unmeasured load before each measured run")
	fs.IntVar(&c.Producers, "producers", 64, "concurrent appenders, each waiting for its append before the next (closed loop)")
	fs.IntVar(&c.SizeBytes, "size", 1024, "payload bytes per entry (one record per entry)")
	fs.DurationVar(&c.Linger, "linger", 0, "engine Linger: flush a WAL object this long after its first entry (0 = engine default: 2ms local, 250ms remote)")
	fs.IntVar(&c.FlushBytes, "flush-bytes", 0, "engine FlushBytes: flush a WAL object at this many payload bytes (0 = engine default: 1 MiB local, 4 MiB remote)")
	fs.StringVar(&c.Pick, "pick", bench.PickRoundRobin, "how each append picks its log: round-robin or random")
	fs.StringVar(&c.Objects, "objects", "", "object store URL (file://, s3://, gs://, azblob://); default file://<data-dir>/<run>/objects")
	fs.StringVar(&etcd, "etcd", "", "comma-separated external etcd endpoints; empty runs an embedded member per run")
	fs.StringVar(&c.DataDir, "data-dir", "", "directory for embedded etcd and local objects (default: a temporary directory, removed afterwards)")
	fs.BoolVar(&c.Keep, "keep", false, "keep the temporary data directory")
	fs.StringVar(&c.CSVPath, "csv", "", "also write the results as CSV to this file")
	fs.StringVar(&c.CPUProfile, "cpuprofile", "", "write a CPU profile of the runs (engine, embedded etcd and load) to this file")
	fs.BoolVar(&c.Verify, "verify", false, "after each run, read every log back and check its entries against the acknowledged appends")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: lakegate bench engine [flags]\n\nProgress goes to stderr (one line a second), the results table (Markdown) to stdout.\n\nflags:")
		fs.PrintDefaults()
	}
	if help, err := parseBench(fs, args); help || err != nil {
		if help {
			err = flag.ErrHelp
		}
		return c, err
	}
	var err error
	if c.LogCounts, err = positiveInts(fs, "logs", logs, "a positive count"); err != nil {
		return c, err
	}
	if etcd != "" {
		c.Etcd = strings.Split(etcd, ",")
	}
	return c, c.Validate()
}

// runBenchTables runs the simulated month of small ranges (bench/tables.go).
func runBenchTables(args []string) error {
	fs := flag.NewFlagSet("bench tables", flag.ContinueOnError)
	var (
		c        bench.TablesConfig
		scanDays string
	)
	fs.IntVar(&c.Days, "days", 30, "simulated days")
	fs.IntVar(&c.RangesPerDay, "ranges-per-day", 144, "compactions per partition per simulated day (144: one every 10 min)")
	fs.IntVar(&c.Partitions, "partitions", 2, "topic partitions")
	fs.IntVar(&c.EntriesPerRange, "batches", 4, "Pulsar batches per partition per range")
	fs.IntVar(&c.BatchMessages, "batch-messages", 25, "messages per batch")
	fs.IntVar(&c.MessageBytes, "message-bytes", 200, "JSON bytes per message")
	fs.BoolVar(&c.Maintain, "maintain", true, "bin-packing, snapshot expiry, Delta log cleanup and orphan removal (false: the tables only grow)")
	fs.StringVar(&scanDays, "scan-days", "1,7,14", "days after which delta-rs and pyiceberg scan the table (and after the last)")
	fs.StringVar(&c.DeltaPython, "deltars-python", "", "a Python with deltalake (e2e/interop/delta/setup.sh); empty: no delta-rs scans")
	fs.StringVar(&c.IcebergPython, "pyiceberg-python", "", "a Python with pyiceberg (e2e/interop/iceberg/setup.sh); empty: no pyiceberg scans")
	fs.StringVar(&c.ScanScript, "scan-script", "bench/tables_scan.py", "the scan script")
	fs.StringVar(&c.Dir, "data-dir", "", "data directory (default: a temporary one, removed afterwards)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: lakegate bench tables [flags]\n\nA simulated month of a low-throughput topic: one small compaction per partition\nevery simulated 10 minutes; one progress line per simulated day.\n\nflags:")
		fs.PrintDefaults()
	}
	if help, err := parseBench(fs, args); help || err != nil {
		return err
	}
	var err error
	if c.ScanDays, err = positiveInts(fs, "scan-days", scanDays, "a day"); err != nil {
		return err
	}
	ctx, stop := benchContext()
	defer stop()
	_, err = bench.RunTables(ctx, c)
	return err
}

func runBenchEtcd(args []string) error {
	fs := flag.NewFlagSet("bench etcd", flag.ContinueOnError)
	var (
		c              bench.EtcdConfig
		endpoints, rbs string
	)
	fs.StringVar(&endpoints, "etcd", "", "comma-separated etcd endpoints (required; bench/etcd-capacity.sh starts a member)")
	fs.StringVar(&rbs, "record-bytes", "400,4000,25000", "commit record sizes, one run each (≈ 100 + 25 bytes per log of a flush)")
	fs.IntVar(&c.Writers, "writers", 3, "commit loops (nodes), one transaction at a time each")
	fs.IntVar(&c.Watchers, "watchers", 3, "watches of the commit records (nodes)")
	fs.DurationVar(&c.Duration, "duration", 10*time.Second, "measured time of each run (after 1 s of warm-up)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: lakegate bench etcd --etcd URL[,URL…] [flags]\n\nCommit records per second one etcd cluster carries: writers shaped as the WAL\nwriter's commit loop, watchers as the nodes' commit-log watches.\n\nflags:")
		fs.PrintDefaults()
	}
	if help, err := parseBench(fs, args); help || err != nil {
		return err
	}
	for _, e := range strings.Split(endpoints, ",") {
		if e = strings.TrimSpace(e); e != "" {
			c.Endpoints = append(c.Endpoints, e)
		}
	}
	var err error
	if c.RecordBytes, err = positiveInts(fs, "record-bytes", rbs, "a size"); err != nil {
		return err
	}
	ctx, stop := benchContext()
	defer stop()
	return bench.RunEtcd(ctx, c, os.Stdout)
}
