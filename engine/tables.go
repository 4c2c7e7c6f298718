package engine

// Compaction of WAL chunks into a stream's Delta and Iceberg tables
// (docs/compaction.md, docs/iceberg.md).

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lakegate/lakegate/lakehouse"
	"github.com/lakegate/lakegate/lakehouse/delta"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
)

// TableTarget names the table a log is compacted into. The engine knows
// logs, not topics: the caller resolves it from the catalog.
type TableTarget struct {
	// Root is the table's key prefix in the object store, no leading or
	// trailing slash: "tables/<tenant>/<namespace>/<topic>".
	Root string
	// Partition is the topic partition the log holds (-1: not
	// partitioned); it becomes the __partition column.
	Partition int32
	// Delta commits the files to the Delta table at Root (docs/delta.md).
	Delta bool
	// Iceberg commits the same files to the Iceberg table Ident, located at
	// Root in the store, through Options.IcebergCatalog (docs/iceberg.md).
	// At least one of Delta and Iceberg must be set.
	Iceberg bool
	// Ident is the Iceberg table identifier, namespace levels then name:
	// [tenant, namespace, topic]. Required with Iceberg.
	Ident []string
	// Schema is the stream's latest value schema: AVRO, JSON and primitive
	// schemas add typed columns (docs/table-schema.md); the zero value
	// adds none.
	Schema lakestream.SchemaConfig
}

// Table formats of a claim (tableClaim.Formats).
const (
	formatDelta   = "delta"
	formatIceberg = "iceberg"
)

// maxFilesPerRange bounds the table files (one per publish day in the
// range, so usually one) of one CompactToTable call.
const maxFilesPerRange = 16

// tableAppID is the Delta txn appId of a log's compactions.
func tableAppID(id lakestream.LogID) string {
	return "lakegate-log-" + strconv.FormatInt(int64(id), 10)
}

// tableClaimKey is the key of a log's table claim (docs/compaction.md).
func (k keys) tableClaimKey(id lakestream.LogID) string { return k.log(id) + "table" }

// tableClaim is the value of the claim key: the range being (or last)
// compacted into the table, with its files.
type tableClaim struct {
	From    int64       `json:"from"`
	End     int64       `json:"end"`
	Root    string      `json:"root"`
	Files   []claimFile `json:"files"`
	Intents []string    `json:"intents,omitempty"`
	Indexed bool        `json:"indexed"`
	// Formats are the tables the range is committed to ("delta",
	// "iceberg"); absent in claims written before Iceberg: Delta only.
	Formats []string `json:"formats,omitempty"`
	// Ident is the Iceberg table identifier (with "iceberg").
	Ident []string `json:"ident,omitempty"`
}

// has reports whether the claim commits to format f.
func (c tableClaim) has(f string) bool {
	if c.Formats == nil {
		return f == formatDelta
	}
	for _, g := range c.Formats {
		if g == f {
			return true
		}
	}
	return false
}

// claimFile is one table file of a claim.
type claimFile struct {
	Path            string            `json:"path"` // relative to the table root
	PartitionValues map[string]string `json:"partitionValues"`
	Size            int64             `json:"size"`
	Stats           string            `json:"stats"` // Delta add.stats
	Index           []byte            `json:"index"` // encoded KindParquet index entry
}

// CompactToTable compacts the oldest eligible committed WAL chunks of log
// id into Parquet files of the Delta table t, then makes those files the
// log's storage for their offsets (docs/compaction.md). A chunk is
// eligible once it is CompactAge old; one call takes up to
// CompactMaxBytes of payload. It first finishes a range left unfinished by
// a crash (then it compacts nothing new). It returns ErrNothingToCompact
// when no chunk is eligible and lakestream.ErrConflict when another
// compaction of the log raced it (retry later). Any error leaves the log
// readable and the table without duplicate rows; calling again resumes.
// It records its outcome with ObserveCompaction (docs/metrics.md).
func (e *Engine) CompactToTable(ctx context.Context, id lakestream.LogID, t TableTarget) (CompactStats, error) {
	start := time.Now()
	st, err := e.compactToTable(ctx, id, t)
	e.ObserveCompaction(id, st, time.Since(start), err)
	return st, err
}

// compactToTable is CompactToTable without the metrics.
func (e *Engine) compactToTable(ctx context.Context, id lakestream.LogID, t TableTarget) (CompactStats, error) {
	var st CompactStats
	if t.Root == "" || strings.HasPrefix(t.Root, "/") || strings.HasSuffix(t.Root, "/") {
		return st, fmt.Errorf("%w: table root %q", lakestream.ErrInvalidArgument, t.Root)
	}
	if !t.Delta && !t.Iceberg {
		return st, fmt.Errorf("%w: table %s: no format (set Delta and/or Iceberg)", lakestream.ErrInvalidArgument, t.Root)
	}
	var formats []string
	if t.Delta {
		formats = append(formats, formatDelta)
	}
	if t.Iceberg {
		if len(t.Ident) < 2 || slices.Contains(t.Ident, "") {
			return st, fmt.Errorf("%w: table %s: Iceberg identifier %q", lakestream.ErrInvalidArgument, t.Root, t.Ident)
		}
		formats = append(formats, formatIceberg)
		// A catalog that cannot open fails the call before any work, not
		// a claimed range at step 3b.
		if _, err := e.icebergCatalog(ctx); err != nil {
			return st, err
		}
	}
	l, err := e.log(ctx, id)
	if err != nil {
		return st, err
	}
	claimKey := e.keys.tableClaimKey(id)
	kv, found, err := e.meta.Get(ctx, claimKey)
	if err != nil {
		return st, fmt.Errorf("%w: table claim: %w", lakestream.ErrUnavailable, err)
	}
	var prev tableClaim
	if found {
		if err := json.Unmarshal(kv.Value, &prev); err != nil {
			return st, fmt.Errorf("%w: table claim of log %d: %v", errCorruptMeta, id, err)
		}
		if !prev.Indexed {
			if prev.Root != t.Root {
				return st, fmt.Errorf("%w: log %d has an unfinished compaction into %s", lakestream.ErrConflict, id, prev.Root)
			}
			return e.finishClaim(ctx, l, prev, kv.ModRevision, nil)
		}
		// A crash after step 4 left the cursor behind.
		if err := e.advanceCompactCursor(ctx, id, prev.End); err != nil {
			return st, err
		}
	}

	// A new range from the end of the previous one.
	h, err := l.refresh(ctx)
	if err != nil {
		return st, err
	}
	filesCap := max(1, min(maxFilesPerRange, (e.meta.MaxTxnOps()-1)/2))
	maxChunks := e.meta.MaxTxnOps() - 1 - filesCap
	if maxChunks < 1 {
		return st, ErrNothingToCompact
	}
	start := max(h.First, prev.End)
	p := e.keys.idxPrefix(id)
	kvs, err := e.meta.Range(ctx, e.keys.idx(id, start), prefixEnd(p), maxChunks)
	if err != nil {
		return st, fmt.Errorf("%w: log %d index: %w", lakestream.ErrUnavailable, id, err)
	}
	cutoffMs := e.opts.Now().Add(-e.opts.CompactAge).UnixMilli()
	var old []indexEntry
	var payloadBytes int64
	for _, kv := range kvs {
		ie, err := decodeIndexEntry(kv.Value)
		if err != nil {
			return st, err
		}
		if ie.Kind != kindWAL || ie.WriteMs > cutoffMs {
			break
		}
		if len(old) == 0 && ie.First < prev.End {
			return st, fmt.Errorf("%w: log %d: WAL chunk %d..%d straddles the table's end %d", lakestream.ErrConflict, id, ie.First, ie.Last(), prev.End)
		}
		if len(old) > 0 && (ie.First != old[len(old)-1].End() || payloadBytes+ie.PayloadBytes > e.opts.CompactMaxBytes) {
			break
		}
		old = append(old, ie)
		payloadBytes += ie.PayloadBytes
	}
	if len(old) == 0 {
		return st, ErrNothingToCompact
	}

	// The entries, cut at chunk boundaries so the range needs ≤ filesCap files.
	var ents []tableEntry
	chunkEnds := make([]int, len(old)) // ents[:chunkEnds[i]] are the entries of old[:i+1]
	for i, ie := range old {
		c, err := l.loadChunk(ctx, ie)
		if err != nil {
			return st, err
		}
		off, bytes := ie.First, ie.BytesEnd-ie.PayloadBytes
		for _, de := range c.entries {
			pub := de.PublishTimeMs
			if pub == 0 {
				pub = c.writeMs
			}
			bytes += int64(len(de.Payload))
			ents = append(ents, tableEntry{offset: off, records: de.Records, publishMs: pub, writeMs: c.writeMs, bytesEnd: bytes, payload: de.Payload})
			off += int64(de.Records)
		}
		if off != ie.End() || bytes != ie.BytesEnd {
			return st, fmt.Errorf("%w: log %d chunk %s@%d disagrees with its index entry", errCorruptMeta, id, ie.Object, ie.Offset)
		}
		chunkEnds[i] = len(ents)
	}
	n := len(old)
	for n > 0 && len(splitRuns(ents[:chunkEnds[n-1]])) > filesCap {
		n--
	}
	if n == 0 {
		return st, fmt.Errorf("engine: log %d chunk %s@%d spans more than %d publish days", id, old[0].Object, old[0].Offset, filesCap)
	}
	old, ents = old[:n], ents[:chunkEnds[n-1]]

	// The typed columns of the files (shared by every log of the table).
	typed, err := e.tableSchema(ctx, t.Root, t.Schema)
	if err != nil {
		return st, err
	}

	// Step 1: the files, each under a pending intent.
	c := tableClaim{From: old[0].First, End: old[n-1].End(), Root: t.Root, Formats: formats}
	if t.Iceberg {
		c.Ident = slices.Clone(t.Ident)
	}
	type built struct {
		object string
		data   []byte
		chunk  *loadedChunk
	}
	var files []built
	for _, run := range splitRuns(ents) {
		ie := indexEntry{Kind: kindParquet, First: run[0].offset, Entries: int64(len(run)),
			MinPublishMs: run[0].publishMs, MaxPublishMs: run[0].publishMs, BytesEnd: run[len(run)-1].bytesEnd}
		for _, te := range run {
			ie.Records += int64(te.records)
			ie.PayloadBytes += int64(len(te.payload))
			ie.MinPublishMs = min(ie.MinPublishMs, te.publishMs)
			ie.MaxPublishMs = max(ie.MaxPublishMs, te.publishMs)
			ie.WriteMs = max(ie.WriteMs, te.writeMs)
		}
		data, chunk, fst, err := buildParquet(ctx, run, t.Partition, int64(id), ie.WriteMs, typed)
		if err != nil {
			return st, err
		}
		stats, err := delta.StatsFromParquet(data)
		if err != nil {
			return st, err
		}
		statsJSON, err := json.Marshal(stats)
		if err != nil {
			return st, fmt.Errorf("engine: table stats: %w", err)
		}
		rel := fmt.Sprintf("data/%s=%d/%s=%s/%s.parquet", lakehouse.ColPartition, t.Partition,
			lakehouse.ColPublishDate, run[0].day(), newUUID())
		ie.Object = t.Root + "/" + rel
		ie.Length = int64(len(data))
		c.Files = append(c.Files, claimFile{Path: rel, PartitionValues: fst.PartitionValues, Size: int64(len(data)), Stats: string(statsJSON), Index: ie.Encode()})
		c.Intents = append(c.Intents, e.keys.pending(e.opts.NodeID, ie.Object))
		files = append(files, built{ie.Object, data, chunk})
	}
	intentOps := make([]meta.Op, len(c.Intents))
	for i, k := range c.Intents {
		intentOps[i] = meta.Put(k, fmt.Appendf(nil, `{"created":%d}`, e.opts.Now().UnixMilli()))
	}
	if _, _, err := e.meta.Txn(ctx, nil, intentOps); err != nil {
		return st, fmt.Errorf("%w: pending intents: %w", lakestream.ErrUnavailable, err)
	}
	for _, f := range files {
		if err := e.store.PutIfAbsent(ctx, f.object, f.data); err != nil {
			return st, fmt.Errorf("%w: put %s: %w", lakestream.ErrUnavailable, f.object, err)
		}
		e.metrics.observePut(len(f.data), 0)
	}
	if err := e.compactHook(id, "put"); err != nil {
		return st, err
	}

	// Step 2: claim the range (nobody else claimed one since we read the claim).
	value, err := json.Marshal(c)
	if err != nil {
		return st, fmt.Errorf("engine: table claim: %w", err)
	}
	// The previous claim's leftover intents go with it (a crash between
	// its steps 5 and 6): GC may then take any table file whose intent
	// outlives every claim for an orphan (docs/gc.md, "Table files").
	claimOps := []meta.Op{meta.Put(claimKey, value)}
	for _, k := range prev.Intents {
		claimOps = append(claimOps, meta.Delete(k))
	}
	ok, rev, err := e.meta.Txn(ctx, []meta.Cmp{{Key: claimKey, ModRevision: kv.ModRevision}}, claimOps)
	if err != nil {
		return st, fmt.Errorf("%w: table claim: %w", lakestream.ErrUnavailable, err)
	}
	if !ok {
		return st, fmt.Errorf("%w: log %d: another compaction claimed a range", lakestream.ErrConflict, id)
	}
	if err := e.compactHook(id, "claim"); err != nil {
		return st, err
	}
	chunks := map[string]*loadedChunk{}
	for _, f := range files {
		chunks[f.object] = f.chunk
	}
	return e.finishClaim(ctx, l, c, rev, chunks)
}

// finishClaim runs steps 3–5 of a claimed range: Delta commit, Iceberg
// commit, index replacement, cursor — with the claim's formats, not the
// caller's. It is what a crashed compaction resumes. chunks are the decoded
// files by object key, to cache (nil on resume).
func (e *Engine) finishClaim(ctx context.Context, l *logHandle, c tableClaim, claimRev int64, chunks map[string]*loadedChunk) (CompactStats, error) {
	id := l.id
	st := CompactStats{Records: c.End - c.From, From: c.From, End: c.End, Files: len(c.Files)}
	for _, f := range c.Files {
		st.FileBytes += f.Size
	}
	news := make([]indexEntry, len(c.Files))
	for i, f := range c.Files {
		ie, err := decodeIndexEntry(f.Index)
		if err != nil {
			return st, fmt.Errorf("table claim of log %d: %w", id, err)
		}
		news[i] = ie
	}

	// The table's typed columns, as stored now: a superset of those of
	// the claim's files (they only grow); both formats add what they lack.
	typed, err := e.loadTableSchema(ctx, c.Root)
	if err != nil {
		return st, err
	}

	// Step 3: commit to Delta; idempotent by the txn version.
	if c.has(formatDelta) {
		tbl, err := delta.Open(ctx, e.store, c.Root, delta.WithClock(e.opts.Now))
		if err != nil {
			return st, err
		}
		if err := e.commitClaim(ctx, tbl, id, c, typed); err != nil {
			return st, err
		}
	}
	if err := e.compactHook(id, "commit"); err != nil {
		return st, err
	}

	// Step 3b: commit to Iceberg; idempotent by the lakegate.log.<id>.end
	// table property.
	if c.has(formatIceberg) {
		if err := e.commitIceberg(ctx, id, c, typed); err != nil {
			return st, err
		}
	}
	if err := e.compactHook(id, "iceberg"); err != nil {
		return st, err
	}

	// Step 4: replace the WAL index entries of [From, End) by the files'.
	claimKey := e.keys.tableClaimKey(id)
	c.Indexed = true
	value, err := json.Marshal(c)
	if err != nil {
		return st, fmt.Errorf("engine: table claim: %w", err)
	}
	cmps := []meta.Cmp{{Key: claimKey, ModRevision: claimRev}}
	ops := []meta.Op{meta.Put(claimKey, value)}
	old, revs, tiled, err := e.walRun(ctx, id, c.From, c.End)
	if err != nil {
		return st, err
	}
	if tiled {
		newKeys := map[string]bool{}
		for _, ie := range news {
			k := e.keys.idx(id, ie.Last())
			newKeys[k] = true
			ops = append(ops, meta.Put(k, ie.Encode()))
		}
		for i, ie := range old {
			k := e.keys.idx(id, ie.Last())
			cmps = append(cmps, meta.Cmp{Key: k, ModRevision: revs[i]})
			if !newKeys[k] {
				ops = append(ops, meta.Delete(k))
			}
		}
		st.Chunks = len(old)
	} else {
		e.opts.Logger.Warn("engine: compacted range no longer tiled by WAL chunks; index left as is",
			"log", id, "from", c.From, "end", c.End)
	}
	ok, _, err := e.meta.Txn(ctx, cmps, ops)
	if err != nil {
		return st, fmt.Errorf("%w: replace index: %w", lakestream.ErrUnavailable, err)
	}
	if !ok {
		return st, fmt.Errorf("%w: log %d index changed during compaction", lakestream.ErrConflict, id)
	}
	if tiled {
		for _, ie := range news {
			if ch := chunks[ie.Object]; ch != nil {
				e.cache.put(chunkLoc{ie.Object, 0}, ch)
			}
		}
	}
	if err := e.compactHook(id, "replace"); err != nil {
		return st, err
	}

	// Step 5: the cursor, then the intents.
	if err := e.advanceCompactCursor(ctx, id, c.End); err != nil {
		return st, err
	}
	if err := e.compactHook(id, "cursor"); err != nil {
		return st, err
	}
	for _, k := range c.Intents {
		e.dropIntentKey(ctx, k)
	}
	return st, nil
}

// commitClaim adds the claim's files to the Delta table (creating the table
// on first use) with txn (lakegate-log-<id>, End).
func (e *Engine) commitClaim(ctx context.Context, tbl *delta.Table, id lakestream.LogID, c tableClaim, typed *lakehouse.TypedSchema) error {
	adds := make([]delta.AddFile, len(c.Files))
	for i, f := range c.Files {
		adds[i] = delta.AddFile{
			Path: f.Path, PartitionValues: f.PartitionValues, Size: f.Size, StatsJSON: f.Stats,
			Tags: map[string]string{"lakegate.log": strconv.FormatInt(int64(id), 10)},
		}
	}
	// Typed columns missing from the Delta schema are added, merged per
	// attempt: never dropping another writer's.
	schema, err := deltaSchemaOf(typed)
	if err != nil {
		return err
	}
	req := delta.CommitRequest{AppID: tableAppID(id), TxnVersion: c.End, Adds: adds, Operation: "WRITE"}
	if typed != nil {
		for _, f := range schema.Fields {
			if _, ok := f.Metadata[typedMetaType]; ok {
				req.AddColumns = append(req.AddColumns, f)
			}
		}
	}
	for attempt := 0; ; attempt++ {
		_, _, err := tbl.Commit(ctx, req)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, delta.ErrCheckpoint):
			e.opts.Logger.Warn("engine: delta checkpoint", "table", c.Root, "err", err)
			return nil
		case errors.Is(err, delta.ErrNoTable) && attempt == 0:
			if cerr := tbl.Create(ctx, schema, []string{lakehouse.ColPartition, lakehouse.ColPublishDate}, nil); cerr != nil {
				return fmt.Errorf("engine: create table %s: %w", c.Root, cerr)
			}
		default:
			return fmt.Errorf("engine: commit to table %s: %w", c.Root, err)
		}
	}
}

// walRun returns the index entries of [from, end) with their revisions;
// tiled reports whether they are WAL chunks that tile the range exactly.
func (e *Engine) walRun(ctx context.Context, id lakestream.LogID, from, end int64) ([]indexEntry, []int64, bool, error) {
	kvs, err := e.meta.Range(ctx, e.keys.idx(id, from), e.keys.idx(id, end), e.meta.MaxTxnOps())
	if err != nil {
		return nil, nil, false, fmt.Errorf("%w: log %d index: %w", lakestream.ErrUnavailable, id, err)
	}
	var old []indexEntry
	var revs []int64
	pos := from
	for _, kv := range kvs {
		ie, err := decodeIndexEntry(kv.Value)
		if err != nil {
			return nil, nil, false, err
		}
		if ie.Kind != kindWAL || ie.First != pos {
			return nil, nil, false, nil
		}
		old = append(old, ie)
		revs = append(revs, kv.ModRevision)
		pos = ie.End()
	}
	return old, revs, len(old) > 0 && pos == end, nil
}

// newUUID returns a random RFC 4122 version 4 UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
