package tables

// The table port, as this layer declares it: what the tables need of the
// storage engine, in facets, each named for what it is used for.
// *engine.Engine satisfies it (engine/port.go documents the guarantees);
// New takes any Port, so a test may give a part of it a fake.

import (
	"context"
	"time"

	"github.com/lakegate/lakegate/engine"
	"github.com/lakegate/lakegate/engine/index"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
	"github.com/lakegate/lakegate/objstore"
)

// Port is the table port: the storage engine as the tables use it.
type Port interface {
	LogAccess
	ChunkSource
	ChunkReplacer
	Observer
}

// LogAccess reads logs and trims them: table retention reads a log's
// cursors and offsets (through the lakestream.LogCursors and
// lakestream.LogReader facets of its handle: logCursors, logReader) and
// hard-trims it below what the tables and its cursors still hold.
type LogAccess interface {
	Log(ctx context.Context, id lakestream.LogID) (lakestream.Log, error)
	FirstOffset(ctx context.Context, id lakestream.LogID) (int64, error)
	LastOffset(ctx context.Context, id lakestream.LogID) (int64, error)
	HardTrim(ctx context.Context, id lakestream.LogID, exclusive int64) error
}

// ChunkSource reads a log's committed chunks (materialization's input,
// bin-packing's candidates).
type ChunkSource interface {
	Chunks(ctx context.Context, id lakestream.LogID, from int64, limit int) ([]engine.Chunk, error)
	ChunkEntries(ctx context.Context, id lakestream.LogID, c index.Entry) ([]lakestream.Entry, error)
}

// ChunkReplacer makes table files a log's storage: PUTs under pending
// intents, index replacement with the claim's compare, the compaction
// cursor.
type ChunkReplacer interface {
	PutPending(ctx context.Context, objects []engine.PendingObject) ([]string, error)
	DropIntent(ctx context.Context, key string)
	ReplaceChunks(ctx context.Context, id lakestream.LogID, from, end int64, news []engine.NewChunk, cmps []meta.Cmp, ops []meta.Op) (replaced int, err error)
	ReplaceTableChunks(ctx context.Context, id lakestream.LogID, olds []engine.Chunk, news []engine.NewChunk, cmps []meta.Cmp, ops []meta.Op) error
	AdvanceCompacted(ctx context.Context, id lakestream.LogID, end int64) error
	// AttachmentKey is the metadata key of the value name (an Attachment
	// registered through EngineOptions) that this layer keeps for log id:
	// the key a claim's compare names, deleted with the log.
	AttachmentKey(id lakestream.LogID, name string) string
}

// Observer records the outcomes of materialization and table retention in
// the node's metrics (docs/metrics.md).
type Observer interface {
	ObserveMaterialization(id lakestream.LogID, st engine.CompactStats, d time.Duration, err error)
	ObserveTableRetention(files int, bytes int64, held, trims int)
	// ObserveJointFallback: a transaction's records in several logs of a
	// table are materialized per log after all (joint.go).
	ObserveJointFallback()
}

// Stores are the node's stores, in which this layer keeps its own objects
// (tables/, the Delta logs) and keys (under Root; the claims under the
// port's AttachmentKey, so that ReplaceChunks can compare them in its
// transaction). The node gives the engine's counted stores
// (lakegate_object_requests_total, lakegate_etcd_txns_total), so the
// tables' I/O is counted with the engine's.
type Stores struct {
	Objects objstore.Store
	Meta    meta.Store
	// Root is the prefix of the node's metadata keys (the engine's
	// MetaRoot); the tables' keys are Root + "table-…/".
	Root string
}

var _ Port = (*engine.Engine)(nil)

// logReader is the reading facet of log id.
func (t *Tables) logReader(ctx context.Context, id lakestream.LogID) (lakestream.LogReader, error) {
	return t.e.Log(ctx, id)
}

// logCursors is the cursor facet of log id.
func (t *Tables) logCursors(ctx context.Context, id lakestream.LogID) (lakestream.LogCursors, error) {
	return t.e.Log(ctx, id)
}
