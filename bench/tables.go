package bench

// A simulated month of a low-throughput topic's tables (`lakegate bench
// tables`, docs/benchmarks.md, "A month of small ranges"): every
// simulated ten minutes each partition gets a few Pulsar batches and one
// compaction into Delta and Iceberg — a small file per partition per
// range — with or without bin-packing and maintenance, on a clock moved by
// the driver (no sleeping). It prints, per simulated day, the table's
// files and metadata sizes, and at chosen days the time delta-rs and
// pyiceberg take to scan the whole table.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/engine"
	"github.com/lakegate/lakegate/lakehouse/delta"
	"github.com/lakegate/lakegate/lakehouse/iceberg"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
	"github.com/lakegate/lakegate/objstore"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
	"github.com/lakegate/lakegate/tables"
)

// TablesConfig configures RunTables. Zero fields take the defaults in
// parentheses.
type TablesConfig struct {
	Days            int  // simulated days (30)
	RangesPerDay    int  // compactions per partition per day (144: one per 10 min)
	Partitions      int  // topic partitions (2)
	EntriesPerRange int  // Pulsar batches per partition per range (4)
	BatchMessages   int  // messages per batch (25)
	MessageBytes    int  // JSON payload bytes per message (≈200)
	Maintain        bool // bin-packing, snapshot expiry, log cleanup, orphan removal
	// ScanDays are the days after which the readers scan (end of day);
	// the last day always scans.
	ScanDays []int
	// DeltaPython and IcebergPython are Pythons with deltalake and with
	// pyiceberg (e2e/interop/{delta,iceberg}/setup.sh); "" skips that
	// reader. ScanScript is bench/tables_scan.py.
	DeltaPython, IcebergPython, ScanScript string
	Dir                                    string // data directory ("": a temporary one, removed)
	Out                                    io.Writer
}

func (c TablesConfig) withDefaults() TablesConfig {
	if c.Days <= 0 {
		c.Days = 30
	}
	if c.RangesPerDay <= 0 {
		c.RangesPerDay = 144
	}
	if c.Partitions <= 0 {
		c.Partitions = 2
	}
	if c.EntriesPerRange <= 0 {
		c.EntriesPerRange = 4
	}
	if c.BatchMessages <= 0 {
		c.BatchMessages = 25
	}
	if c.MessageBytes <= 0 {
		c.MessageBytes = 200
	}
	if c.Out == nil {
		c.Out = os.Stdout
	}
	return c
}

// TablesDay is the state of the table at the end of one simulated day.
type TablesDay struct {
	Day             int
	Rows            int64 // rows in the Delta table
	LiveFiles       int   // data files of the Delta table
	StoredFiles     int   // objects under data/ (live + not yet removed)
	StoredBytes     int64
	DeltaLogFiles   int
	DeltaLogBytes   int64
	IcebergMetaFile int // objects under metadata/
	IcebergMetaByte int64
	Snapshots       int
	DeltaRS         *ScanResult // nil: not scanned that day
	PyIceberg       *ScanResult
	Elapsed         time.Duration // real time since the start
}

// ScanResult is one reader's full scan (median of three).
type ScanResult struct {
	Rows    int64   `json:"rows"`
	Files   int     `json:"files"`
	Seconds float64 `json:"seconds"`
}

// simClock is the simulated clock.
type simClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *simClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *simClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// simStore reports, for the objects it wrote, their write time on the
// simulated clock (what log cleanup and orphan removal compare).
type simStore struct {
	objstore.Store
	now func() time.Time
	mu  struct {
		sync.Mutex
		mod map[string]int64
	}
}

func (s *simStore) stamp(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.mod[key] = s.now().UnixMilli()
}

func (s *simStore) Put(ctx context.Context, key string, data []byte) error {
	err := s.Store.Put(ctx, key, data)
	if err == nil {
		s.stamp(key)
	}
	return err
}

func (s *simStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	err := s.Store.PutIfAbsent(ctx, key, data)
	if err == nil {
		s.stamp(key)
	}
	return err
}

func (s *simStore) List(ctx context.Context, prefix string, fn func(objstore.ObjectInfo) error) error {
	return s.Store.List(ctx, prefix, func(oi objstore.ObjectInfo) error {
		s.mu.Lock()
		if t, ok := s.mu.mod[oi.Key]; ok {
			oi.ModTime = t
		}
		s.mu.Unlock()
		return fn(oi)
	})
}

// RunTables runs the simulation and returns the state at the end of every
// day.
func RunTables(ctx context.Context, cfg TablesConfig) ([]TablesDay, error) {
	cfg = cfg.withDefaults()
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "lakegate-bench-tables-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	clk := &simClock{t: time.Now().UTC().Truncate(24 * time.Hour)}
	storeURL := "file://" + filepath.ToSlash(filepath.Join(dir, "objects")) + "?fsync=false"
	fs, err := objstore.Open(ctx, storeURL)
	if err != nil {
		return nil, err
	}
	store := &simStore{Store: fs, now: clk.now}
	store.mu.mod = map[string]int64{}
	defer store.Close()
	ms := meta.NewMem(meta.MemOptions{})
	defer ms.Close()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	e, err := engine.New(store, ms, tables.EngineOptions(engine.Options{Now: clk.now, Logger: quiet}))
	if err != nil {
		return nil, err
	}
	defer e.Close()
	catalogDB := filepath.Join(dir, "iceberg", "catalog.db")
	topts := tables.Options{
		Now: clk.now, Logger: quiet, CompactAge: time.Second,
		IcebergCatalog: iceberg.CatalogConfig{URI: catalogDB, StoreURL: storeURL},
	}
	step := 24 * time.Hour / time.Duration(cfg.RangesPerDay)
	stepsPerHour := max(1, int(time.Hour/step))
	// Iceberg stamps snapshots with the real clock, and expiry compares
	// real ages: here every snapshot older than 1 ms goes, keeping the
	// last as many as one simulated hour makes (a compaction and a
	// bin-packing per partition per range) — what the default 1 h
	// retention keeps at this rate.
	topts.SnapshotRetention = time.Millisecond
	topts.SnapshotsRetainLast = 2 * cfg.Partitions * stepsPerHour
	if !cfg.Maintain {
		topts.BinpackTargetBytes, topts.MaintenanceInterval = -1, -1
	}
	tb := tables.New(e, tables.Stores{Objects: e.Store(), Meta: e.Meta(), Root: e.MetaRoot()}, topts)
	defer tb.Close()

	ident := []string{"public", "default", "month"}
	root := "tables/public/default/month"
	logs := make([]lakestream.LogID, cfg.Partitions)
	targets := make([]tables.Target, cfg.Partitions)
	for p := range logs {
		logs[p] = lakestream.LogID(p + 1)
		targets[p] = tables.Target{Root: root, Partition: int32(p), Delta: true, Iceberg: true, Ident: ident}
	}
	r := rand.New(rand.NewPCG(1, 2))
	start := time.Now()
	scanDays := map[int]bool{cfg.Days: true}
	for _, d := range cfg.ScanDays {
		scanDays[d] = true
	}
	fmt.Fprintf(cfg.Out, "# %d days × %d ranges/day × %d partitions, %d batches of %d messages per range; maintenance %v; data in %s\n",
		cfg.Days, cfg.RangesPerDay, cfg.Partitions, cfg.EntriesPerRange, cfg.BatchMessages, cfg.Maintain, dir)
	sim := &monthSim{cfg: cfg, e: e, tb: tb, clk: clk, logs: logs, targets: targets, r: r, step: step, stepsPerHour: stepsPerHour}
	var days []TablesDay
	for day := 1; day <= cfg.Days; day++ {
		for s := range cfg.RangesPerDay {
			if err := ctx.Err(); err != nil {
				return days, err
			}
			if err := sim.simulateRange(ctx, day, s); err != nil {
				return days, err
			}
		}
		d, err := tableState(ctx, store, tb, root, ident, day)
		if err != nil {
			return days, err
		}
		if scanDays[day] {
			if err := scanDay(ctx, cfg, &d, dir, root, catalogDB, ident); err != nil {
				return days, err
			}
		}
		d.Elapsed = time.Since(start)
		days = append(days, d)
		fmt.Fprintln(cfg.Out, d.line())
	}
	return days, nil
}

// monthSim is the state of the simulated month: the engine and tables,
// the partitions' logs, the simulated clock.
type monthSim struct {
	cfg          TablesConfig
	e            *engine.Engine
	tb           *tables.Tables
	clk          *simClock
	logs         []lakestream.LogID
	targets      []tables.Target
	r            *rand.Rand
	seq          uint64
	step         time.Duration
	stepsPerHour int
}

// simulateRange appends range s of day to every partition, advances the
// clock, materializes (and bin-packs) each partition and, once a
// simulated hour, runs table maintenance and GC.
func (m *monthSim) simulateRange(ctx context.Context, day, s int) error {
	cfg := m.cfg
	for p, id := range m.logs {
		for range cfg.EntriesPerRange {
			entry, n, err := monthEntry(m.r, m.seq, cfg.BatchMessages, cfg.MessageBytes, m.clk.now().UnixMilli(), p)
			if err != nil {
				return err
			}
			m.seq += uint64(n)
			if _, err := m.e.Append(ctx, id, n, entry, lakestream.WithPublishTime(m.clk.now().UnixMilli())); err != nil {
				return err
			}
		}
	}
	m.clk.advance(m.step)
	for p, id := range m.logs {
		for {
			_, err := m.tb.Materialize(ctx, id, m.targets[p])
			if errors.Is(err, engine.ErrNothingToCompact) {
				break
			}
			if err != nil {
				return fmt.Errorf("day %d: materialization: %w", day, err)
			}
		}
		if cfg.Maintain {
			if _, err := m.tb.Binpack(ctx, id, m.targets[p]); err != nil {
				return fmt.Errorf("day %d: bin-packing: %w", day, err)
			}
		}
	}
	if (s+1)%m.stepsPerHour != 0 {
		return nil
	}
	if cfg.Maintain {
		if _, err := m.tb.Maintain(ctx, m.targets[0]); err != nil {
			return fmt.Errorf("day %d: maintenance: %w", day, err)
		}
		if _, err := m.tb.RemoveOrphans(ctx, m.targets[0], m.logs); err != nil {
			return fmt.Errorf("day %d: orphans: %w", day, err)
		}
	}
	if _, err := m.e.CollectGarbage(ctx); err != nil {
		return fmt.Errorf("day %d: gc: %w", day, err)
	}
	return nil
}

// scanDay times a full scan of the tables by delta-rs and PyIceberg, for
// the readers configured.
func scanDay(ctx context.Context, cfg TablesConfig, d *TablesDay, dir, root, catalogDB string, ident []string) error {
	var err error
	if cfg.DeltaPython != "" {
		if d.DeltaRS, err = runScan(ctx, cfg.DeltaPython, cfg.ScanScript, "deltars", filepath.Join(dir, "objects", root)); err != nil {
			return err
		}
	}
	if cfg.IcebergPython != "" {
		if d.PyIceberg, err = runScan(ctx, cfg.IcebergPython, cfg.ScanScript, "pyiceberg", catalogDB, strings.Join(ident, ".")); err != nil {
			return err
		}
	}
	return nil
}

// line is the progress line of a day.
func (d TablesDay) line() string {
	s := fmt.Sprintf("day %2d: rows %d, live files %d, stored files %d (%.1f MiB), delta log %d files %.1f KiB, iceberg metadata %d files %.1f KiB, %d snapshots",
		d.Day, d.Rows, d.LiveFiles, d.StoredFiles, mib(d.StoredBytes), d.DeltaLogFiles, float64(d.DeltaLogBytes)/1024,
		d.IcebergMetaFile, float64(d.IcebergMetaByte)/1024, d.Snapshots)
	if d.DeltaRS != nil {
		s += fmt.Sprintf(", delta-rs scan %.2f s (%d rows)", d.DeltaRS.Seconds, d.DeltaRS.Rows)
	}
	if d.PyIceberg != nil {
		s += fmt.Sprintf(", pyiceberg scan %.2f s (%d rows)", d.PyIceberg.Seconds, d.PyIceberg.Rows)
	}
	return s + fmt.Sprintf(" [%s]", d.Elapsed.Round(time.Second))
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// tableState measures the table at the end of a day.
func tableState(ctx context.Context, store objstore.Store, tb *tables.Tables, root string, ident []string, day int) (TablesDay, error) {
	d := TablesDay{Day: day}
	tbl, err := delta.Open(ctx, store, root)
	if err != nil {
		return d, err
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		return d, err
	}
	d.LiveFiles = len(snap.Files)
	d.Rows, _ = snap.NumRecords()
	err = store.List(ctx, root+"/", func(oi objstore.ObjectInfo) error {
		rel := strings.TrimPrefix(oi.Key, root+"/")
		switch {
		case strings.HasPrefix(rel, "data/"):
			d.StoredFiles++
			d.StoredBytes += oi.Size
		case strings.HasPrefix(rel, "_delta_log/"):
			d.DeltaLogFiles++
			d.DeltaLogBytes += oi.Size
		case strings.HasPrefix(rel, "metadata/"):
			d.IcebergMetaFile++
			d.IcebergMetaByte += oi.Size
		}
		return nil
	})
	if err != nil {
		return d, err
	}
	cat, err := tb.IcebergCatalog(ctx)
	if err != nil {
		return d, err
	}
	it, err := cat.Catalog().LoadTable(ctx, ident)
	if err != nil {
		return d, err
	}
	d.Snapshots = len(it.Metadata().Snapshots())
	return d, nil
}

// runScan runs the scan script with python and decodes its result.
func runScan(ctx context.Context, python, script string, args ...string) (*ScanResult, error) {
	cmd := exec.CommandContext(ctx, python, append([]string{script}, args...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", python, strings.Join(args, " "), err)
	}
	var r ScanResult
	if err := json.Unmarshal(out, &r); err != nil {
		return nil, fmt.Errorf("%s: %q: %w", args[0], out, err)
	}
	return &r, nil
}

// monthEntry builds one LZ4-compressed Pulsar batch of n JSON messages
// published at publishMs, as a producer sends it.
func monthEntry(r *rand.Rand, seq uint64, n, size int, publishMs int64, partition int) ([]byte, int, error) {
	md := &pb.MessageMetadata{
		ProducerName:       proto.String(fmt.Sprintf("producer-%d", partition)),
		SequenceId:         proto.Uint64(seq),
		PublishTime:        proto.Uint64(uint64(publishMs)),
		NumMessagesInBatch: proto.Int32(int32(n)),
	}
	var raw []byte
	pad := strings.Repeat("x", max(0, size-120))
	for i := range n {
		sm := &pb.SingleMessageMetadata{SequenceId: proto.Uint64(seq + uint64(i)), PartitionKey: proto.String(fmt.Sprintf("user-%d", r.IntN(1000)))}
		body := fmt.Sprintf(`{"order":%d,"user":"user-%d","amount":%.2f,"ts":%d,"note":"%s"}`, seq+uint64(i), r.IntN(1000), r.Float64()*100, publishMs, pad)
		var err error
		if raw, err = protocol.AppendBatchMessage(raw, sm, []byte(body)); err != nil {
			return nil, 0, err
		}
	}
	md.Compression = pb.CompressionType_LZ4.Enum()
	md.UncompressedSize = proto.Uint32(uint32(len(raw)))
	payload, err := protocol.Compress(nil, pb.CompressionType_LZ4, raw)
	if err != nil {
		return nil, 0, err
	}
	mdb, err := protocol.MarshalMetadata(md)
	if err != nil {
		return nil, 0, err
	}
	entry, err := protocol.AppendEntry(nil, mdb, payload)
	return entry, n, err
}
