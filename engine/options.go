package engine

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"time"
)

// Options configure an Engine. The zero value of every field means its
// documented default.
type Options struct {
	// NodeID names this engine instance in WAL object names and pending
	// intents. Default: a random 8-byte hex string per Engine.
	NodeID string
	// MetaRoot is the prefix of every metadata key. Default "/lakegate/".
	MetaRoot string
	// RemoteStore selects the S3-class defaults for FlushBytes and Linger
	// (set it for s3://, gs://, azblob://). Default false (local disk).
	RemoteStore bool

	// FlushBytes flushes a WAL object once this many payload bytes are
	// pending. Default 1 MiB local, 4 MiB remote; at most 64 MiB.
	FlushBytes int
	// Linger flushes a WAL object this long after its first entry arrived.
	// Default 2 ms local, 250 ms remote.
	Linger time.Duration
	// NoIdleFlush turns off the local store's idle flush: by default (local
	// stores with the default Linger only) a WAL object is cut at once when
	// no other flush is being PUT or waiting for the commit loop, so an
	// idle node adds no linger to an append and a busy one batches what
	// arrives while its flushes are in flight; Linger bounds the wait only
	// while no flush waits for the commit loop (one cut then would queue
	// behind it). Remote stores, and an explicit Linger, always wait for
	// Linger or FlushBytes (PUTs cost money). Default false.
	NoIdleFlush bool
	// MaxPendingBytes bounds payload bytes accepted but not yet acknowledged
	// (in batches and in flight); Append blocks beyond it (backpressure).
	// Default 64 MiB.
	MaxPendingBytes int64
	// MaxInflightFlushes bounds WAL objects being PUT concurrently; commits
	// stay in object order. Default 4.
	MaxInflightFlushes int
	// WALSegmentBytes is the size up to which a store that can append
	// (objstore.Appender: file://) takes the WAL flushes of this engine in
	// one object, a WAL segment, instead of one object per flush
	// (docs/index-format.md, "WAL segments"). Default 64 MiB; negative:
	// every flush is its own object.
	WALSegmentBytes int64
	// MaxEntryBytes bounds one entry's payload. Default and maximum 16 MiB.
	MaxEntryBytes int
	// CommitTimeout bounds PUT plus commit of one object; appends fail
	// after it. The PUT is retried with backoff (50 ms doubling to 2 s)
	// while it lasts (putretry.go, docs/storage.md). Default 30 s.
	CommitTimeout time.Duration
	// StageMaxChunks bounds the staged chunks of one staging set
	// (docs/transactions.md): CommitStaged of a larger set fails
	// lakestream.ErrStageTooLarge, since its kind-3 commit record must fit
	// one metadata request. Default 8192.
	StageMaxChunks int

	// FoldInterval is how often the commit log is folded into the logs'
	// heads and index keys (docs/index-format.md). Default 200 ms.
	FoldInterval time.Duration
	// FoldDelay: a commit record is folded once it has been applied this
	// long (it stays readable from memory meanwhile). Default 500 ms.
	FoldDelay time.Duration
	// PendingWindow is the time window one WAL window intent covers
	// (docs/index-format.md, "Pending-object intent"). Default 10 s.
	PendingWindow time.Duration

	// CacheBytes bounds the chunk read cache. Default 256 MiB.
	CacheBytes int64
	// MaxConcurrentLoads bounds the chunks read from the store and decoded
	// at once, over every log (a decoded table file or row group holds
	// several times its payload while it is being rebuilt): what reads
	// from behind take beyond the cache is this many decodes. Default 2.
	MaxConcurrentLoads int
	// CursorPersistInterval is how often dirty cursors are written.
	// Default 1 s.
	CursorPersistInterval time.Duration
	// PendingIntentTTL: a pending-object intent older than this belongs to
	// a crashed writer and no longer protects its object from GC.
	// Default 10 min.
	PendingIntentTTL time.Duration

	// ChunkDecoder reads index entries of kind index.KindParquet (table
	// files the tables package writes; port.go). Default nil: reading such
	// an offset fails.
	ChunkDecoder ChunkDecoder
	// Attachments are the per-log metadata values of the layer above whose
	// objects GC keeps (port.go, docs/gc.md). Default none.
	Attachments []Attachment

	// Logger receives the engine's logs. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time

	// hooks are test-only fault points.
	hooks hooks
	// lingerDefault: Linger was left to its default (the idle flush only
	// applies then: an explicit Linger is honoured as given).
	lingerDefault bool
}

// hooks let tests crash a writer at precise points. A hook returning an
// error makes the writer behave as if the process died there: the affected
// appends fail and nothing further is done for the object.
type hooks struct {
	afterPut    func(object string) error
	afterCommit func(object string) error
	// repackStep is called after each step of RepackWAL ("put",
	// "replace", "cursor").
	repackStep func(log int64, step string) error
}

// Caps that keep every flush inside the WAL format's object limit
// (wal.MaxObjectBytes, 256 MiB): a flush is cut at FlushBytes, so it holds at
// most FlushBytes + one entry.
const (
	maxFlushBytes = 64 << 20
	maxEntryBytes = 16 << 20
)

func (o Options) withDefaults() Options {
	if o.NodeID == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		o.NodeID = hex.EncodeToString(b[:])
	}
	if o.MetaRoot == "" {
		o.MetaRoot = "/lakegate/"
	}
	if o.FlushBytes > maxFlushBytes {
		o.FlushBytes = maxFlushBytes
	}
	if o.FlushBytes <= 0 {
		o.FlushBytes = 1 << 20
		if o.RemoteStore {
			o.FlushBytes = 4 << 20
		}
	}
	if o.Linger <= 0 {
		o.lingerDefault = true
		o.Linger = 2 * time.Millisecond
		if o.RemoteStore {
			o.Linger = 250 * time.Millisecond
		}
	}
	if o.MaxPendingBytes <= 0 {
		o.MaxPendingBytes = 64 << 20
	}
	if o.MaxInflightFlushes <= 0 {
		o.MaxInflightFlushes = 4
	}
	if o.MaxEntryBytes <= 0 || o.MaxEntryBytes > maxEntryBytes {
		o.MaxEntryBytes = maxEntryBytes
	}
	if o.CommitTimeout <= 0 {
		o.CommitTimeout = 30 * time.Second
	}
	if o.StageMaxChunks <= 0 {
		o.StageMaxChunks = 8192
	}
	if o.FoldInterval <= 0 {
		o.FoldInterval = 200 * time.Millisecond
	}
	if o.FoldDelay <= 0 {
		o.FoldDelay = 500 * time.Millisecond
	}
	if o.PendingWindow <= 0 {
		o.PendingWindow = 10 * time.Second
	}
	if o.CacheBytes <= 0 {
		o.CacheBytes = 256 << 20
	}
	if o.MaxConcurrentLoads <= 0 {
		o.MaxConcurrentLoads = 2
	}
	if o.CursorPersistInterval <= 0 {
		o.CursorPersistInterval = time.Second
	}
	if o.WALSegmentBytes == 0 {
		o.WALSegmentBytes = 64 << 20
	}
	if o.PendingIntentTTL <= 0 {
		o.PendingIntentTTL = 10 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}
