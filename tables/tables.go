package tables

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lakegate/lakegate/engine"
	"github.com/lakegate/lakegate/lakehouse/iceberg"
	"github.com/lakegate/lakegate/lakestream"
)

// Options configure Tables. The zero value of every field means its
// documented default.
type Options struct {
	// CompactAge: Materialize takes only WAL chunks written at least
	// this long ago. Default 30 s.
	CompactAge time.Duration
	// CompactMaxBytes bounds the WAL payload bytes one Materialize call
	// turns into table files (its first chunk is always taken). Default
	// 64 MiB.
	CompactMaxBytes int64
	// IcebergCatalog is the Iceberg catalog Materialize commits to for
	// a Target with Iceberg set (docs/iceberg.md): Kind "sql" (default;
	// URI = the sqlite file) or "rest" (URI = the catalog's base URL),
	// Props, and StoreURL = the engine's object store URL, from which table
	// locations are built. Default (node.Start): the sqlite file
	// <DataDir>/iceberg/catalog.db and the node's ObjectURL. Tables with no
	// StoreURL refuse Iceberg targets. Opened on first use.
	IcebergCatalog iceberg.CatalogConfig

	// MaintenanceInterval is how often the materialization job runner
	// maintains a table it materializes (Maintain); negative turns maintenance off.
	// Default 10 min.
	MaintenanceInterval time.Duration
	// SnapshotRetention: Iceberg snapshots older than this are expired.
	// Default 1 h.
	SnapshotRetention time.Duration
	// SnapshotsRetainLast: at least this many Iceberg snapshots are kept,
	// however old. Default 10.
	SnapshotsRetainLast int
	// DeltaLogRetention: Delta log files (commits, checkpoints) before the
	// newest checkpoint are deleted once this old. Default 24 h.
	DeltaLogRetention time.Duration

	// BinpackTargetBytes is the size bin-packing merges small table files
	// into; files under ¾ of it are small. Negative turns bin-packing off.
	// Default 128 MiB.
	BinpackTargetBytes int64
	// BinpackSpanBytes: a bin-packed file gets a row group (and an index
	// entry) per this many bytes of entry payload; what one cold read
	// decodes. Default 16 MiB.
	BinpackSpanBytes int64
	// BinpackInterval is how often the materialization job runner
	// bin-packs a log it materializes; negative: never. Default 10 min.
	BinpackInterval time.Duration
	// BinpackMaxGroups bounds the files one Binpack call writes. Default 4.
	BinpackMaxGroups int
	// OrphanAge is the safety window of orphan removal: unreferenced table
	// files (and Delta tombstones) younger than this stay. Also the Delta
	// checkpoints' tombstone retention. Default 7 days.
	OrphanAge time.Duration

	// JointWait: a log whose materialization waits at a transaction's
	// chunks for the table's other logs to reach theirs (the joint job,
	// docs/compaction.md "Transactions across partitions") gives up waiting
	// after this long and materializes them alone, so that a sibling that
	// never comes stalls nobody for good. Default 30 min.
	JointWait time.Duration

	// Logger receives the layer's logs. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time

	// hooks are test-only fault points.
	hooks hooks
}

// hooks let tests crash a materialization or bin-packing at precise points. A hook returning an
// error makes Materialize behave as if the process died there.
type hooks struct {
	// materializeStep is called after each step of a materialization ("put",
	// "claim", "commit", "iceberg", "replace", "cursor").
	materializeStep func(log int64, step string) error
	// binpackStep is called after each step of a bin-packing ("put",
	// "claim", "delta", "iceberg", "index").
	binpackStep func(log int64, step string) error
	// retentionStep is called after each table commit of a retention
	// ("delta", "iceberg"), before the logs are trimmed.
	retentionStep func(step string) error
}

func (o Options) withDefaults() Options {
	if o.CompactAge <= 0 {
		o.CompactAge = 30 * time.Second
	}
	if o.CompactMaxBytes <= 0 {
		o.CompactMaxBytes = 64 << 20
	}
	if o.MaintenanceInterval == 0 {
		o.MaintenanceInterval = 10 * time.Minute
	}
	if o.SnapshotRetention <= 0 {
		o.SnapshotRetention = time.Hour
	}
	if o.SnapshotsRetainLast <= 0 {
		o.SnapshotsRetainLast = 10
	}
	if o.DeltaLogRetention <= 0 {
		o.DeltaLogRetention = 24 * time.Hour
	}
	if o.BinpackTargetBytes == 0 {
		o.BinpackTargetBytes = 128 << 20
	}
	if o.BinpackSpanBytes <= 0 {
		o.BinpackSpanBytes = 16 << 20
	}
	if o.BinpackInterval == 0 {
		o.BinpackInterval = 10 * time.Minute
	}
	if o.BinpackMaxGroups <= 0 {
		o.BinpackMaxGroups = 4
	}
	if o.OrphanAge <= 0 {
		o.OrphanAge = 7 * 24 * time.Hour
	}
	if o.JointWait <= 0 {
		o.JointWait = 30 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Tables materializes the logs of one engine into tables: Parquet
// committed to Delta and Iceberg (Materialize), the table view of a stream
// (View) and the engine's read of materialized offsets (Decoder). Safe for
// concurrent use; any number of Tables, on any number of nodes, may
// materialize the same logs (the claim lets one win).
type Tables struct {
	e    Port
	st   Stores
	opts Options

	// iceberg is the Iceberg catalog, opened on first use (iceberg.go).
	iceberg icebergState

	// tableLocks serialize the commits of one table (lockTable). Lock
	// order: tableLocks, then a tableLock's mu is taken without it.
	tableLocks struct {
		sync.Mutex
		m map[string]*tableLock
	}
	// maintained is when each table was last maintained by this node.
	maintained struct {
		sync.Mutex
		m map[string]time.Time
	}
	// binpacked is when each log was last bin-packed by this node.
	binpacked struct {
		sync.Mutex
		m map[lakestream.LogID]time.Time
	}
	// jointWaits are, per log, the joint record its materialization
	// waits at (joint.go), since when, or that it gave up waiting.
	jointWaits struct {
		sync.Mutex
		m map[lakestream.LogID]jointWait
	}
	// caughtUp is, per log, the revision (LogRevision) at which the
	// table last held the whole log, and when: the worker's periodic
	// calls skip the log until the revision changes (caughtup.go).
	caughtUp struct {
		sync.Mutex
		m map[lakestream.LogID]caughtUpAt
	}
	// materializeCalls counts Materialize calls (tests).
	materializeCalls atomic.Int64
}

// New returns the table layer over e. e must have been built with
// EngineOptions (the Parquet decoder and the claim attachment), or reads
// of compacted offsets fail and GC may take claimed files. Close it
// before e.
func New(e Port, st Stores, opts Options) *Tables {
	return &Tables{e: e, st: st, opts: opts.withDefaults()}
}

// EngineOptions sets what the engine needs from this layer (engine/port.go):
// the Decoder of table files and the ClaimAttachment for GC.
func EngineOptions(o engine.Options) engine.Options {
	o.ChunkDecoder = Decoder{}
	o.Attachments = append(o.Attachments, ClaimAttachment(), BinpackAttachment())
	return o
}

// Close closes the Iceberg catalog, if one was opened.
func (t *Tables) Close() error { return t.closeIceberg() }

// hook runs the test hook of a materialization step.
func (t *Tables) hook(id lakestream.LogID, step string) error {
	if h := t.opts.hooks.materializeStep; h != nil {
		return h(int64(id), step)
	}
	return nil
}
