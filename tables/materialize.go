package tables

// Table materialization: a log's committed WAL chunks into Parquet files of
// its stream's Delta and Iceberg tables, with the claim protocol
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
	"sync"
	"time"

	"github.com/lakegate/lakegate/engine"
	"github.com/lakegate/lakegate/engine/index"
	"github.com/lakegate/lakegate/engine/wal"
	"github.com/lakegate/lakegate/lakehouse"
	"github.com/lakegate/lakegate/lakehouse/delta"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
)

// Target names the table a log is materialized into. The engine knows logs,
// not topics: the caller resolves it from the catalog (TargetOf).
type Target struct {
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
	// Writers are the Avro definitions of the stream's schema versions by
	// schema_version bytes (lakehouse.SchemaHistory of its properties):
	// each row is decoded with the version it was written with. Nil: with
	// Schema (rows of older Avro versions then get nulls).
	Writers map[string][]byte
	// Logs are every log of the table, in partition order (the log of
	// partition p is Logs[p]): a transaction's chunks in two or more of
	// them are materialized together, in one table commit (joint.go,
	// docs/compaction.md "Transactions across partitions"). Nil: each log
	// alone, whatever its chunks.
	Logs []lakestream.LogID
}

// Table formats of a claim (tableClaim.Formats).
const (
	formatDelta   = "delta"
	formatIceberg = "iceberg"
)

// maxFilesPerRange bounds the table files (one per publish day in the
// range, so usually one) of one Materialize call.
const maxFilesPerRange = 16

// tableAppID is the Delta txn appId of a log's materializations.
func tableAppID(id lakestream.LogID) string {
	return "lakegate-log-" + strconv.FormatInt(int64(id), 10)
}

// claimName is the name of the table claim among a log's keys:
// logs/<log>/table (docs/index-format.md); the engine knows it only as an
// Attachment (ClaimAttachment).
const claimName = "table"

// claimKey is the key of a log's table claim (docs/compaction.md).
func (t *Tables) claimKey(id lakestream.LogID) string { return t.e.AttachmentKey(id, claimName) }

// ClaimAttachment tells the engine's GC which table files a log's claim
// holds (docs/gc.md, "Table files"): give it to engine.Options.Attachments.
func ClaimAttachment() engine.Attachment {
	return engine.Attachment{Name: claimName, Objects: func(value []byte) ([]string, error) {
		var c tableClaim
		if err := json.Unmarshal(value, &c); err != nil {
			return nil, err
		}
		objs := make([]string, len(c.Files))
		for i, f := range c.Files {
			objs[i] = c.Root + "/" + f.Path
		}
		return objs, nil
	}}
}

// tableClaim is the value of the claim key: the range being (or last)
// materialized into the table, with its files.
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
	// Joint, in a claim of a joint job (joint.go), names the transaction's
	// record and every log claimed with this one, in the same metadata
	// transaction: a resume finishes them together.
	Joint *claimJoint `json:"joint,omitempty"`
}

// claimJoint is the joint job of a claim: the marked record's revision
// (index.Joint.Rev) and the logs claimed together, ascending.
type claimJoint struct {
	Rev  int64              `json:"rev"`
	Logs []lakestream.LogID `json:"logs"`
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

// Materialize turns the oldest eligible committed WAL chunks of log
// id into Parquet files of the table target, then makes those files the
// log's storage for their offsets (docs/compaction.md). A chunk is
// eligible once it is CompactAge old; one call takes up to
// CompactMaxBytes of payload. It first finishes a range left unfinished by
// a crash (then it materializes nothing new). It returns
// engine.ErrNothingToCompact when no chunk is eligible and
// lakestream.ErrConflict when another materialization of the log raced it
// (retry later). Any error leaves the log readable and the table without
// duplicate rows; calling again resumes. It records its outcome with the
// engine's ObserveMaterialization (docs/metrics.md).
func (t *Tables) Materialize(ctx context.Context, id lakestream.LogID, target Target) (engine.CompactStats, error) {
	start := time.Now()
	t.materializeCalls.Add(1)
	st, err := t.materialize(ctx, id, target)
	t.e.ObserveMaterialization(id, st, time.Since(start), err)
	return st, err
}

// materialize is Materialize without the metrics.
func (t *Tables) materialize(ctx context.Context, id lakestream.LogID, tg Target) (engine.CompactStats, error) {
	var st engine.CompactStats
	formats, err := t.targetFormats(ctx, tg)
	if err != nil {
		return st, err
	}
	ms := t.st.Meta
	claimKey := t.claimKey(id)
	kv, found, err := ms.Get(ctx, claimKey)
	if err != nil {
		return st, fmt.Errorf("%w: table claim: %w", lakestream.ErrUnavailable, err)
	}
	var prev tableClaim
	if found {
		if err := json.Unmarshal(kv.Value, &prev); err != nil {
			return st, fmt.Errorf("%w: table claim of log %d: %v", index.ErrCorrupt, id, err)
		}
		if !prev.Indexed {
			if prev.Root != tg.Root {
				return st, fmt.Errorf("%w: log %d has an unfinished materialization into %s", lakestream.ErrConflict, id, prev.Root)
			}
			if prev.Joint != nil {
				return t.resumeJoint(ctx, id, prev)
			}
			return t.finishClaim(ctx, id, prev, kv.ModRevision, nil)
		}
		// A crash after step 4 left the cursor behind.
		if err := t.e.AdvanceCompacted(ctx, id, prev.End); err != nil {
			return st, err
		}
	}
	old, ents, joint, err := t.eligibleRange(ctx, id, prev.End, tg)
	if err != nil {
		return st, err
	}
	if joint != nil {
		return t.materializeJoint(ctx, id, tg, joint)
	}

	// The typed columns of the files (shared by every log of the table).
	typed, err := t.tableSchema(ctx, tg.Root, tg.Schema)
	if err != nil {
		return st, err
	}
	typed = typed.WithWriters(tg.Writers)

	// Step 1: the files, each under a pending intent.
	c := tableClaim{From: old[0].First, End: old[len(old)-1].End(), Root: tg.Root, Formats: formats}
	if tg.Iceberg {
		c.Ident = slices.Clone(tg.Ident)
	}
	files, decoded, err := t.buildFiles(ctx, id, tg, ents, typed, &c)
	if err != nil {
		return st, err
	}
	if c.Intents, err = t.e.PutPending(ctx, files); err != nil {
		return st, err
	}
	if err := t.hook(id, "put"); err != nil {
		return st, err
	}

	// Step 2: claim the range (nobody else claimed one since we read the claim).
	rev, err := t.claimRange(ctx, id, c, prev, kv.ModRevision)
	if err != nil {
		return st, err
	}
	if err := t.hook(id, "claim"); err != nil {
		return st, err
	}
	return t.finishClaim(ctx, id, c, rev, decoded)
}

// targetFormats checks tg and returns the formats it commits to. A target
// with Iceberg opens the Iceberg catalog first, so that one that cannot
// open fails the call before any work, not a claimed range at step 3b.
func (t *Tables) targetFormats(ctx context.Context, tg Target) ([]string, error) {
	if tg.Root == "" || strings.HasPrefix(tg.Root, "/") || strings.HasSuffix(tg.Root, "/") {
		return nil, fmt.Errorf("%w: table root %q", lakestream.ErrInvalidArgument, tg.Root)
	}
	if !tg.Delta && !tg.Iceberg {
		return nil, fmt.Errorf("%w: table %s: no format (set Delta and/or Iceberg)", lakestream.ErrInvalidArgument, tg.Root)
	}
	var formats []string
	if tg.Delta {
		formats = append(formats, formatDelta)
	}
	if tg.Iceberg {
		if len(tg.Ident) < 2 || slices.Contains(tg.Ident, "") {
			return nil, fmt.Errorf("%w: table %s: Iceberg identifier %q", lakestream.ErrInvalidArgument, tg.Root, tg.Ident)
		}
		formats = append(formats, formatIceberg)
		if _, err := t.icebergCatalog(ctx); err != nil {
			return nil, err
		}
	}
	return formats, nil
}

// eligibleRange returns the next range of log id to materialize, from the
// table's end tableEnd on: its WAL chunks (contiguous, CompactAge old, at
// most CompactMaxBytes of payload, cut at chunk boundaries so the range
// needs at most as many files as one claim may list) and their entries.
// No eligible chunk is engine.ErrNothingToCompact. The range ends before
// a chunk of a transaction that other logs of tg's table hold chunks of
// too (jointLogs); when it is the first, eligibleRange returns its mark
// instead, for the joint job (unless the log gave up waiting: jointPassed).
func (t *Tables) eligibleRange(ctx context.Context, id lakestream.LogID, tableEnd int64, tg Target) ([]engine.Chunk, []tableEntry, *index.Joint, error) {
	ms := t.st.Meta
	first, err := t.e.FirstOffset(ctx, id)
	if err != nil {
		return nil, nil, nil, err
	}
	filesCap := max(1, min(maxFilesPerRange, (ms.MaxTxnOps()-1)/2))
	maxChunks := ms.MaxTxnOps() - 1 - filesCap
	if maxChunks < 1 {
		return nil, nil, nil, engine.ErrNothingToCompact
	}
	chunks, err := t.e.Chunks(ctx, id, max(first, tableEnd), maxChunks)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(chunks) == 0 {
		return nil, nil, nil, errCaughtUp
	}
	cutoffMs := t.opts.Now().Add(-t.opts.CompactAge).UnixMilli()
	var old []engine.Chunk
	var payloadBytes int64
	for _, c := range chunks {
		if c.Kind != index.KindWAL || c.WriteMs > cutoffMs {
			break
		}
		if logs := jointLogs(c.Joint, tg); logs != nil && !t.jointPassed(id, c.Joint, logs) {
			if len(old) == 0 {
				return nil, nil, c.Joint, nil
			}
			break
		}
		if len(old) == 0 && c.First < tableEnd {
			return nil, nil, nil, fmt.Errorf("%w: log %d: WAL chunk %d..%d straddles the table's end %d", lakestream.ErrConflict, id, c.First, c.Last(), tableEnd)
		}
		if len(old) > 0 && (c.First != old[len(old)-1].End() || payloadBytes+c.PayloadBytes > t.opts.CompactMaxBytes) {
			break
		}
		old = append(old, c)
		payloadBytes += c.PayloadBytes
	}
	if len(old) == 0 {
		return nil, nil, nil, engine.ErrNothingToCompact
	}

	// The entries, cut at chunk boundaries so the range needs ≤ filesCap files.
	var ents []tableEntry
	chunkEnds := make([]int, len(old)) // ents[:chunkEnds[i]] are the entries of old[:i+1]
	for i, c := range old {
		es, err := t.e.ChunkEntries(ctx, id, c.Entry)
		if err != nil {
			return nil, nil, nil, err
		}
		for _, e := range es {
			ents = append(ents, tableEntry{offset: e.Offset, records: e.Records, publishMs: e.PublishTimeMs, writeMs: e.WriteTimeMs, bytesEnd: e.CumulativeSize, payload: e.Payload})
		}
		chunkEnds[i] = len(ents)
	}
	n := len(old)
	for n > 0 && len(splitRuns(ents[:chunkEnds[n-1]])) > filesCap {
		n--
	}
	if n == 0 {
		return nil, nil, nil, fmt.Errorf("tables: log %d chunk %s@%d spans more than %d publish days", id, old[0].Object, old[0].Offset, filesCap)
	}
	return old[:n], ents[:chunkEnds[n-1]], nil, nil
}

// buildFiles builds the Parquet files of ents (one per publish day and
// partition: splitRuns) and lists them in claim c; it returns them, to be
// PUT, with their decoded entries by object key, for the engine's cache.
func (t *Tables) buildFiles(ctx context.Context, id lakestream.LogID, tg Target, ents []tableEntry, typed *lakehouse.TypedSchema, c *tableClaim) ([]engine.PendingObject, map[string][]wal.DecodedEntry, error) {
	var files []engine.PendingObject
	decoded := map[string][]wal.DecodedEntry{}
	for _, run := range splitRuns(ents) {
		ie := index.Entry{Kind: index.KindParquet, First: run[0].offset, Entries: int64(len(run)),
			MinPublishMs: run[0].publishMs, MaxPublishMs: run[0].publishMs, BytesEnd: run[len(run)-1].bytesEnd}
		for _, te := range run {
			ie.Records += int64(te.records)
			ie.PayloadBytes += int64(len(te.payload))
			ie.MinPublishMs = min(ie.MinPublishMs, te.publishMs)
			ie.MaxPublishMs = max(ie.MaxPublishMs, te.publishMs)
			ie.WriteMs = max(ie.WriteMs, te.writeMs)
		}
		data, des, fst, err := buildParquet(ctx, run, tg.Partition, int64(id), typed)
		if err != nil {
			return nil, nil, err
		}
		stats, err := delta.StatsFromParquet(data)
		if err != nil {
			return nil, nil, err
		}
		statsJSON, err := json.Marshal(stats)
		if err != nil {
			return nil, nil, fmt.Errorf("tables: table stats: %w", err)
		}
		rel := fmt.Sprintf("data/%s=%d/%s=%s/%s.parquet", lakehouse.ColPartition, tg.Partition,
			lakehouse.ColPublishDate, run[0].day(), newUUID())
		ie.Object = tg.Root + "/" + rel
		ie.Length = int64(len(data))
		c.Files = append(c.Files, claimFile{Path: rel, PartitionValues: fst.PartitionValues, Size: int64(len(data)), Stats: string(statsJSON), Index: ie.Encode()})
		files = append(files, engine.PendingObject{Key: ie.Object, Data: data})
		decoded[ie.Object] = des
	}
	return files, decoded, nil
}

// claimRange puts claim c for log id if the claim key is still at revision
// prevRev (nobody claimed a range since prev was read), with prev's
// leftover intents deleted, and returns the claim's revision.
func (t *Tables) claimRange(ctx context.Context, id lakestream.LogID, c, prev tableClaim, prevRev int64) (int64, error) {
	value, err := json.Marshal(c)
	if err != nil {
		return 0, fmt.Errorf("tables: table claim: %w", err)
	}
	// The previous claim's leftover intents go with it (a crash between
	// its steps 5 and 6): GC may then take any table file whose intent
	// outlives every claim for an orphan (docs/gc.md, "Table files").
	claimKey := t.claimKey(id)
	claimOps := []meta.Op{meta.Put(claimKey, value)}
	for _, k := range prev.Intents {
		claimOps = append(claimOps, meta.Delete(k))
	}
	ok, rev, err := t.st.Meta.Txn(ctx, []meta.Cmp{{Key: claimKey, ModRevision: prevRev}}, claimOps)
	if err != nil {
		return 0, fmt.Errorf("%w: table claim: %w", lakestream.ErrUnavailable, err)
	}
	if !ok {
		return 0, fmt.Errorf("%w: log %d: another materialization claimed a range", lakestream.ErrConflict, id)
	}
	return rev, nil
}

// finishClaim runs steps 3–5 of a claimed range: Delta commit, Iceberg
// commit, index replacement, cursor — with the claim's formats, not the
// caller's. It is what a crashed materialization resumes. decoded are the
// files' entries by object key, for the engine to cache (nil on resume).
func (t *Tables) finishClaim(ctx context.Context, id lakestream.LogID, c tableClaim, claimRev int64, decoded map[string][]wal.DecodedEntry) (engine.CompactStats, error) {
	st := engine.CompactStats{Records: c.End - c.From, From: c.From, End: c.End, Files: len(c.Files)}
	for _, f := range c.Files {
		st.FileBytes += f.Size
	}
	news := make([]engine.NewChunk, len(c.Files))
	for i, f := range c.Files {
		ie, err := index.DecodeEntry(f.Index)
		if err != nil {
			return st, fmt.Errorf("table claim of log %d: %w", id, err)
		}
		news[i] = engine.NewChunk{Entry: ie, Decoded: decoded[ie.Object]}
	}

	// Steps 3 and 3b: the Delta and Iceberg commits.
	if err := t.commitTables(ctx, id, []claimPart{{id: id, c: c}}); err != nil {
		return st, err
	}

	// Step 4: replace the WAL index entries of [From, End) by the files',
	// and mark the claim indexed, in one transaction.
	claimKey := t.claimKey(id)
	c.Indexed = true
	value, err := json.Marshal(c)
	if err != nil {
		return st, fmt.Errorf("tables: table claim: %w", err)
	}
	st.Chunks, err = t.e.ReplaceChunks(ctx, id, c.From, c.End, news,
		[]meta.Cmp{{Key: claimKey, ModRevision: claimRev}}, []meta.Op{meta.Put(claimKey, value)})
	if err != nil {
		return st, err
	}
	if err := t.hook(id, "replace"); err != nil {
		return st, err
	}

	// Step 5: the cursor, then the intents.
	if err := t.e.AdvanceCompacted(ctx, id, c.End); err != nil {
		return st, err
	}
	if err := t.hook(id, "cursor"); err != nil {
		return st, err
	}
	for _, k := range c.Intents {
		t.e.DropIntent(ctx, k)
	}
	return st, nil
}

// commitTables runs steps 3 and 3b of claims (one, or a joint job's, all
// of one table: claims[0]'s root and formats): one Delta commit, then one
// Iceberg commit, of every claim's files and end, each idempotent (by the
// Delta txn versions and the lakegate.log.<id>.end table properties).
// Test hooks "commit" and "iceberg" run after each, as log id.
func (t *Tables) commitTables(ctx context.Context, id lakestream.LogID, claims []claimPart) error {
	c := claims[0].c
	// The table's typed columns, as stored now: a superset of those of
	// the claims' files (they only grow); both formats add what they lack.
	typed, err := t.loadTableSchema(ctx, c.Root)
	if err != nil {
		return err
	}

	// Steps 3 and 3b run one job at a time per table on this node: the
	// partitions of a topic share its tables, and racing them would only
	// lose compare-and-swaps to each other (docs/compaction.md,
	// "Scheduling").
	unlock := t.lockTable(c.Root)
	defer unlock()

	// Step 3: one Delta commit, a txn per log.
	if c.has(formatDelta) {
		tbl, err := delta.Open(ctx, t.st.Objects, c.Root, delta.WithClock(t.opts.Now))
		if err != nil {
			return err
		}
		if err := t.commitClaim(ctx, tbl, claims, typed); err != nil {
			return err
		}
	}
	if err := t.hook(id, "commit"); err != nil {
		return err
	}

	// Step 3b: one Iceberg commit, every log's end property.
	if c.has(formatIceberg) {
		if err := t.commitIceberg(ctx, claims, typed); err != nil {
			return err
		}
	}
	return t.hook(id, "iceberg")
}

// claimPart is one log's claim in a table commit: one of a joint job's
// (joint.go), or a plain materialization's only one.
type claimPart struct {
	id  lakestream.LogID
	c   tableClaim
	rev int64 // the claim key's ModRevision (joint jobs)
}

// commitClaim adds the claims' files to the Delta table (creating the
// table on first use) in one commit, with txn (lakegate-log-<id>, End) of
// each claim's log.
func (t *Tables) commitClaim(ctx context.Context, tbl *delta.Table, parts []claimPart, typed *lakehouse.TypedSchema) error {
	c := parts[0].c
	var adds []delta.AddFile
	for _, p := range parts {
		for _, f := range p.c.Files {
			adds = append(adds, delta.AddFile{
				Path: f.Path, PartitionValues: f.PartitionValues, Size: f.Size, StatsJSON: f.Stats,
				Tags: map[string]string{"lakegate.log": strconv.FormatInt(int64(p.id), 10)},
			})
		}
	}
	// Typed columns missing from the Delta schema are added, merged per
	// attempt: never dropping another writer's.
	schema, err := deltaSchemaOf(typed)
	if err != nil {
		return err
	}
	req := delta.CommitRequest{AppID: tableAppID(parts[0].id), TxnVersion: c.End, Adds: adds, Operation: "WRITE"}
	for _, p := range parts[1:] {
		req.MoreTxns = append(req.MoreTxns, delta.TxnVersion{AppID: tableAppID(p.id), Version: p.c.End})
	}
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
			t.opts.Logger.Warn("tables: delta checkpoint", "table", c.Root, "err", err)
			return nil
		case errors.Is(err, delta.ErrNoTable) && attempt == 0:
			if cerr := tbl.Create(ctx, schema, []string{lakehouse.ColPartition, lakehouse.ColPublishDate}, nil); cerr != nil {
				return fmt.Errorf("tables: create table %s: %w", c.Root, cerr)
			}
		default:
			return fmt.Errorf("tables: commit to table %s: %w", c.Root, err)
		}
	}
}

// newUUID returns a random RFC 4122 version 4 UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// lockTable serializes the table commits of one table on this node; the
// returned unlock may be called more than once.
func (t *Tables) lockTable(root string) (unlock func()) {
	t.tableLocks.Lock()
	if t.tableLocks.m == nil {
		t.tableLocks.m = map[string]*tableLock{}
	}
	l := t.tableLocks.m[root]
	if l == nil {
		l = &tableLock{}
		t.tableLocks.m[root] = l
	}
	l.users++
	t.tableLocks.Unlock()
	l.mu.Lock()
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Unlock()
			t.tableLocks.Lock()
			if l.users--; l.users == 0 {
				delete(t.tableLocks.m, root)
			}
			t.tableLocks.Unlock()
		})
	}
}

// tableLock is one table's commit lock; users counts holders and waiters
// (the entry goes when it drops to 0).
type tableLock struct {
	mu    sync.Mutex
	users int
}
