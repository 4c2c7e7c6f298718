package tables

// Bin-packing of a log's small table files into target-size files, with
// the log's index following the new file (docs/compaction.md,
// "Bin-packing").

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go/catalog"

	"github.com/lakegate/lakegate/engine"
	"github.com/lakegate/lakegate/engine/index"
	"github.com/lakegate/lakegate/lakehouse"
	"github.com/lakegate/lakegate/lakehouse/delta"
	"github.com/lakegate/lakegate/lakehouse/iceberg"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
)

// binpackClaimName is the name of the bin-packing claim among a log's keys:
// logs/<log>/repack (docs/index-format.md; the stored key keeps its name).
const binpackClaimName = "repack"

// Bounds of one bin-packing.
const (
	// binpackSpansMax bounds the spans (index entries) of one new file, so
	// that the index replacement fits one transaction: a group's payload
	// is at most binpackSpansMax × BinpackSpanBytes.
	binpackSpansMax = 16
	// binpackScanEntries bounds the index entries one Binpack call looks at.
	binpackScanEntries = 20_000
)

// errNothingToBinpack: no group of small files to merge.
var errNothingToBinpack = errors.New("tables: nothing to bin-pack")

// binpackAppID is the Delta txn appId of a log's bin-packings.
func binpackAppID(id lakestream.LogID) string {
	return "lakegate-repack-" + strconv.FormatInt(int64(id), 10)
}

// BinpackAttachment tells the engine's GC which file a log's bin-packing
// claim holds: give it to engine.Options.Attachments (EngineOptions does).
func BinpackAttachment() engine.Attachment {
	return engine.Attachment{Name: binpackClaimName, Objects: func(value []byte) ([]string, error) {
		var c binpackClaim
		if err := json.Unmarshal(value, &c); err != nil {
			return nil, err
		}
		return []string{c.Root + "/" + c.File.Path}, nil
	}}
}

// binpackClaim is the value of logs/<log>/repack: the group being (or last)
// merged (docs/compaction.md, "Bin-packing").
type binpackClaim struct {
	Seq     int64        `json:"seq"`
	Root    string       `json:"root"`
	Formats []string     `json:"formats"`
	Ident   []string     `json:"ident,omitempty"`
	Olds    []binpackOld `json:"olds"`
	File    claimFile    `json:"file"`  // the new file (Index unused)
	Spans   [][]byte     `json:"spans"` // its encoded index entries
	Intents []string     `json:"intents,omitempty"`
	Indexed bool         `json:"indexed"`
	// Abandoned: a table no longer held the old files (someone else
	// rearranged them); the index was left on the old files.
	Abandoned bool `json:"abandoned,omitempty"`
}

// binpackOld is one replaced index entry.
type binpackOld struct {
	Path  string `json:"path"`  // of its file, relative to the root
	Index []byte `json:"index"` // the encoded index entry
}

func (c binpackClaim) has(f string) bool { return slices.Contains(c.Formats, f) }

// oldPaths are the distinct files of the claim's old entries, in order.
func (c binpackClaim) oldPaths() []string {
	var out []string
	for _, o := range c.Olds {
		if len(out) == 0 || out[len(out)-1] != o.Path {
			out = append(out, o.Path)
		}
	}
	return out
}

// BinpackStats is what one Binpack call did.
type BinpackStats struct {
	Groups     int   // files written
	FilesIn    int   // files merged
	BytesIn    int64 // their bytes
	BytesOut   int64 // bytes of the files written
	Records    int64 // records moved
	Abandoned  int   // groups given up (a table no longer held the files)
	Unfinished bool  // groups left for the next call (BinpackMaxGroups reached)
}

// Binpack merges runs of small table files of log id (the table target)
// into files of about BinpackTargetBytes, at most BinpackMaxGroups per call,
// first finishing one left by a crash. Crash-safe and idempotent: every
// row stays in each table once, every offset stays readable with the same
// entries. It returns lakestream.ErrConflict when another bin-packing of
// the log raced it.
func (t *Tables) Binpack(ctx context.Context, id lakestream.LogID, tg Target) (BinpackStats, error) {
	var st BinpackStats
	if t.opts.BinpackTargetBytes < 0 {
		return st, nil
	}
	if tg.Root == "" || strings.HasPrefix(tg.Root, "/") || strings.HasSuffix(tg.Root, "/") {
		return st, fmt.Errorf("%w: table root %q", lakestream.ErrInvalidArgument, tg.Root)
	}
	for range t.opts.BinpackMaxGroups {
		err := t.binpackOnce(ctx, id, tg, &st)
		if errors.Is(err, errNothingToBinpack) {
			return st, nil
		}
		if err != nil {
			return st, err
		}
	}
	st.Unfinished = true
	return st, nil
}

// binpackOnce finishes an unfinished claim, or picks, builds and commits
// one group.
func (t *Tables) binpackOnce(ctx context.Context, id lakestream.LogID, tg Target, st *BinpackStats) error {
	ms := t.st.Meta
	key := t.e.AttachmentKey(id, binpackClaimName)
	kv, found, err := ms.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("%w: repack claim: %w", lakestream.ErrUnavailable, err)
	}
	var prev binpackClaim
	if found {
		if err := json.Unmarshal(kv.Value, &prev); err != nil {
			return fmt.Errorf("%w: repack claim of log %d: %v", index.ErrCorrupt, id, err)
		}
		if !prev.Indexed {
			return t.finishBinpack(ctx, id, prev, kv.ModRevision, st)
		}
	}

	g, err := t.pickGroup(ctx, id, tg)
	if err != nil {
		return err
	}
	typed, err := t.loadTableDecoder(ctx, tg.Root)
	if err != nil {
		return err
	}
	data, spans, err := t.buildBinpackFile(ctx, id, tg, g, typed.WithWriters(tg.Writers))
	if err != nil {
		return err
	}
	stats, err := delta.StatsFromParquet(data)
	if err != nil {
		return err
	}
	statsJSON, err := json.Marshal(stats)
	if err != nil {
		return fmt.Errorf("tables: table stats: %w", err)
	}
	rel := fmt.Sprintf("data/%s=%d/%s=%s/%s.parquet", lakehouse.ColPartition, tg.Partition, lakehouse.ColPublishDate, g.day, newUUID())
	c := binpackClaim{
		Seq: prev.Seq + 1, Root: tg.Root, Formats: g.formats, Ident: slices.Clone(tg.Ident),
		File: claimFile{Path: rel, Size: int64(len(data)), Stats: string(statsJSON),
			PartitionValues: map[string]string{lakehouse.ColPartition: strconv.Itoa(int(tg.Partition)), lakehouse.ColPublishDate: g.day}},
	}
	for _, o := range g.olds {
		c.Olds = append(c.Olds, binpackOld{Path: strings.TrimPrefix(o.Object, tg.Root+"/"), Index: o.Entry.Encode()})
	}
	for _, sp := range spans {
		sp.Object = tg.Root + "/" + rel
		c.Spans = append(c.Spans, sp.Encode())
	}

	// Step 1: the file, under a pending intent.
	if c.Intents, err = t.e.PutPending(ctx, []engine.PendingObject{{Key: tg.Root + "/" + rel, Data: data}}); err != nil {
		return err
	}
	if err := t.binpackHook(id, "put"); err != nil {
		return err
	}
	// Step 2: the claim (nobody else claimed since we read it), taking the
	// previous claim's leftover intents with it.
	value, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("tables: repack claim: %w", err)
	}
	ops := []meta.Op{meta.Put(key, value)}
	for _, k := range prev.Intents {
		ops = append(ops, meta.Delete(k))
	}
	ok, rev, err := ms.Txn(ctx, []meta.Cmp{{Key: key, ModRevision: kv.ModRevision}}, ops)
	if err != nil {
		return fmt.Errorf("%w: repack claim: %w", lakestream.ErrUnavailable, err)
	}
	if !ok {
		return fmt.Errorf("%w: log %d: another bin-packing claimed a group", lakestream.ErrConflict, id)
	}
	if err := t.binpackHook(id, "claim"); err != nil {
		return err
	}
	return t.finishBinpack(ctx, id, c, rev, st)
}

// finishBinpack runs steps 3–6 of a claimed group: Delta, Iceberg, index,
// intents — with the claim's formats. It is what a crashed bin-packing
// resumes.
func (t *Tables) finishBinpack(ctx context.Context, id lakestream.LogID, c binpackClaim, claimRev int64, st *BinpackStats) error {
	olds, news, err := c.entries(id)
	if err != nil {
		return err
	}
	abandoned, err := t.commitBinpack(ctx, id, c)
	if err != nil {
		return err
	}
	if err := t.indexBinpack(ctx, id, c, claimRev, olds, news, abandoned); err != nil {
		return err
	}
	if err := t.binpackHook(id, "index"); err != nil {
		return err
	}
	// Step 6: the intents.
	for _, k := range c.Intents {
		t.e.DropIntent(ctx, k)
	}
	if abandoned {
		st.Abandoned++
		return nil
	}
	st.Groups++
	st.FilesIn += len(c.oldPaths())
	for _, o := range olds {
		st.Records += o.Records
	}
	st.BytesOut += c.File.Size
	seen := map[string]bool{}
	for _, o := range olds {
		if !seen[o.Object] {
			seen[o.Object] = true
			st.BytesIn += o.Length
		}
	}
	return nil
}

// entries decodes the index entries claim c replaces (olds) and those it
// puts (news, one per span of the new file).
func (c binpackClaim) entries(id lakestream.LogID) (olds []index.Entry, news []engine.NewChunk, _ error) {
	olds = make([]index.Entry, len(c.Olds))
	for i, o := range c.Olds {
		ie, err := index.DecodeEntry(o.Index)
		if err != nil {
			return nil, nil, fmt.Errorf("repack claim of log %d: %w", id, err)
		}
		olds[i] = ie
	}
	news = make([]engine.NewChunk, len(c.Spans))
	for i, b := range c.Spans {
		ie, err := index.DecodeEntry(b)
		if err != nil {
			return nil, nil, fmt.Errorf("repack claim of log %d: %w", id, err)
		}
		news[i] = engine.NewChunk{Entry: ie}
	}
	if len(olds) == 0 || len(news) == 0 {
		return nil, nil, fmt.Errorf("%w: repack claim of log %d has no files", index.ErrCorrupt, id)
	}
	return olds, news, nil
}

// commitBinpack runs steps 3 and 4 of claim c under the table's lock:
// the Delta and Iceberg commits that remove the old files and add the new
// one. abandoned reports that a table no longer holds the old files (the
// group is then given up, not retried).
func (t *Tables) commitBinpack(ctx context.Context, id lakestream.LogID, c binpackClaim) (abandoned bool, _ error) {
	paths := c.oldPaths()
	unlock := t.lockTable(c.Root)
	defer unlock()
	// Step 3: Delta, idempotent by the txn version.
	if c.has(formatDelta) {
		tbl, err := delta.Open(ctx, t.st.Objects, c.Root, delta.WithClock(t.opts.Now), delta.WithTombstoneRetention(t.opts.OrphanAge))
		if err != nil {
			return false, err
		}
		_, _, err = tbl.Commit(ctx, delta.CommitRequest{
			AppID: binpackAppID(id), TxnVersion: c.Seq, Removes: paths, NoDataChange: true, Operation: "OPTIMIZE",
			Adds: []delta.AddFile{{Path: c.File.Path, PartitionValues: c.File.PartitionValues, Size: c.File.Size, StatsJSON: c.File.Stats,
				Tags: map[string]string{"lakegate.log": strconv.FormatInt(int64(id), 10)}}},
		})
		switch {
		case err == nil:
		case errors.Is(err, delta.ErrCheckpoint):
			t.opts.Logger.Warn("tables: delta checkpoint", "table", c.Root, "err", err)
		case errors.Is(err, delta.ErrConflict):
			abandoned = true
			t.opts.Logger.Warn("tables: bin-packing abandoned: the Delta table no longer holds its files", "log", id, "table", c.Root, "err", err)
		default:
			return false, fmt.Errorf("tables: bin-packing commit to %s: %w", c.Root, err)
		}
	}
	if err := t.binpackHook(id, "delta"); err != nil {
		return false, err
	}
	// Step 4: Iceberg, idempotent by lakegate.repack.<log>.seq.
	if c.has(formatIceberg) && !abandoned {
		cat, err := t.icebergCatalog(ctx)
		if err != nil {
			return false, err
		}
		_, err = cat.Replace(ctx, iceberg.ReplaceRequest{Ident: c.Ident, Root: c.Root, LogID: int64(id), Seq: c.Seq, Remove: paths, Add: c.File.Path})
		switch {
		case err == nil:
		case errors.Is(err, iceberg.ErrConflict) && strings.Contains(err.Error(), "not a live data file"):
			abandoned = true
			t.opts.Logger.Warn("tables: bin-packing abandoned: the Iceberg table no longer holds its files", "log", id, "table", c.Root, "err", err)
		case errors.Is(err, iceberg.ErrConflict):
			return false, fmt.Errorf("%w: log %d: %w", lakestream.ErrConflict, id, err)
		default:
			return false, fmt.Errorf("%w: log %d: %w", lakestream.ErrUnavailable, id, err)
		}
	}
	if err := t.binpackHook(id, "iceberg"); err != nil {
		return false, err
	}
	return abandoned, nil
}

// indexBinpack is step 5 of claim c: the index follows the new file, and
// the claim is marked, in one transaction; if the index no longer holds
// exactly the old entries (a trim), or the group was abandoned, only the
// claim.
func (t *Tables) indexBinpack(ctx context.Context, id lakestream.LogID, c binpackClaim, claimRev int64, olds []index.Entry, news []engine.NewChunk, abandoned bool) error {
	key := t.e.AttachmentKey(id, binpackClaimName)
	c.Indexed, c.Abandoned = true, abandoned
	value, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("tables: repack claim: %w", err)
	}
	cmps := []meta.Cmp{{Key: key, ModRevision: claimRev}}
	ops := []meta.Op{meta.Put(key, value)}
	cur, err := t.e.Chunks(ctx, id, olds[0].First, len(olds))
	if err != nil {
		return err
	}
	same := !abandoned && len(cur) == len(olds)
	for i := 0; same && i < len(cur); i++ {
		same = bytes.Equal(cur[i].Entry.Encode(), c.Olds[i].Index)
	}
	if same {
		return t.e.ReplaceTableChunks(ctx, id, cur, news, cmps, ops)
	}
	if !abandoned {
		t.opts.Logger.Warn("tables: bin-packed files no longer indexed as claimed; index left as is", "log", id, "from", olds[0].First)
	}
	ok, _, err := t.st.Meta.Txn(ctx, cmps, ops)
	if err == nil && !ok {
		err = fmt.Errorf("%w: log %d: repack claim changed", lakestream.ErrConflict, id)
	}
	return err
}

// binpackGroup is a run of small files to merge.
type binpackGroup struct {
	olds    []engine.Chunk // their index entries, consecutive
	day     string         // their __publish_date
	formats []string       // the tables they are live in
}

// liveTableFiles are the live files of a stream's tables, relative to its root;
// nil for a table that does not exist.
type liveTableFiles struct {
	delta, iceberg map[string]bool
}

// liveFiles reads the live files of the tables at tg.Root: the Delta
// table's, and the Iceberg table's when the layer has a catalog.
func (t *Tables) liveFiles(ctx context.Context, tg Target) (liveTableFiles, error) {
	var tf liveTableFiles
	tbl, err := delta.Open(ctx, t.st.Objects, tg.Root)
	if err != nil {
		return tf, err
	}
	snap, err := tbl.Snapshot(ctx)
	switch {
	case err == nil:
		tf.delta = map[string]bool{}
		for _, f := range snap.Files {
			tf.delta[f.Path] = true
		}
	case !errors.Is(err, delta.ErrNoTable):
		return tf, err
	}
	if t.opts.IcebergCatalog.StoreURL == "" || len(tg.Ident) < 2 {
		return tf, nil
	}
	cat, err := t.icebergCatalog(ctx)
	if err != nil {
		return tf, err
	}
	live, _, err := cat.DataFiles(ctx, tg.Ident, tg.Root, false)
	switch {
	case err == nil:
		tf.iceberg = live
	case !errors.Is(err, catalog.ErrNoSuchTable) && !errors.Is(err, catalog.ErrNoSuchNamespace):
		return tf, err
	}
	return tf, nil
}

// pickGroup finds the first run of small files of log id to merge.
func (t *Tables) pickGroup(ctx context.Context, id lakestream.LogID, tg Target) (binpackGroup, error) {
	var g binpackGroup
	target := t.opts.BinpackTargetBytes
	small := target / 4 * 3
	maxOlds := t.st.Meta.MaxTxnOps() - 1 - binpackSpansMax
	maxPayload := binpackSpansMax * t.opts.BinpackSpanBytes
	if maxOlds < 2 {
		return g, errNothingToBinpack
	}
	tf, err := t.liveFiles(ctx, tg)
	if err != nil {
		return g, err
	}
	// formatsOf says in which tables a file is live ("" when in none).
	formatsOf := func(obj string) []string {
		rel := strings.TrimPrefix(obj, tg.Root+"/")
		var fs []string
		if tf.delta[rel] {
			fs = append(fs, formatDelta)
		}
		if tf.iceberg[rel] {
			fs = append(fs, formatIceberg)
		}
		return fs
	}
	first, err := t.e.FirstOffset(ctx, id)
	if err != nil {
		return g, err
	}
	// The files of the log's Parquet prefix, in offset order.
	type unit struct {
		entries []engine.Chunk
		size    int64
		payload int64
		day     string
		formats []string
	}
	var units []unit
	from, scanned := first, 0
scan:
	for scanned < binpackScanEntries {
		cs, err := t.e.Chunks(ctx, id, from, 1000)
		if err != nil {
			return g, err
		}
		for _, c := range cs {
			scanned++
			if c.Kind != index.KindParquet {
				break scan
			}
			if n := len(units); n == 0 || units[n-1].entries[0].Object != c.Object {
				units = append(units, unit{size: c.Length, day: dayOfPath(c.Object), formats: formatsOf(c.Object)})
			}
			u := &units[len(units)-1]
			u.entries = append(u.entries, c)
			u.payload += c.PayloadBytes
		}
		if len(cs) < 1000 {
			break
		}
		from = cs[len(cs)-1].End()
	}
	eligible := func(u unit) bool {
		return u.size < small && u.day != "" && len(u.formats) > 0 && len(u.entries) <= maxOlds
	}
	// A group is a run from a small file on of files that fit together,
	// whose largest file is at most half of the run (so a file is merged
	// again only once as many new bytes join it: every byte is rewritten
	// about log2(target / file size) times, not once per new file) —
	// except in a closed day (before yesterday, UTC), which is merged
	// whole.
	closedBefore := lakehouse.PublishDate(t.opts.Now().Add(-24 * time.Hour).UnixMilli())
	for i := range units {
		if !eligible(units[i]) {
			continue
		}
		closed := units[i].day < closedBefore
		best := 0
		var size, payload, largest int64
		entries := 0
		for j := i; j < len(units); j++ {
			u := units[j]
			if !eligible(u) || u.day != units[i].day || !slices.Equal(u.formats, units[i].formats) ||
				size+u.size > target || payload+u.payload > maxPayload || entries+len(u.entries) > maxOlds {
				break
			}
			size += u.size
			payload += u.payload
			entries += len(u.entries)
			largest = max(largest, u.size)
			if j > i && (closed || 2*largest <= size) {
				best = j + 1
			}
		}
		if best > 0 {
			for _, u := range units[i:best] {
				g.olds = append(g.olds, u.entries...)
			}
			g.day, g.formats = units[i].day, units[i].formats
			return g, nil
		}
	}
	return g, errNothingToBinpack
}

// dayOfPath is the __publish_date of a table file's path ("" if none).
func dayOfPath(p string) string {
	const k = "/" + lakehouse.ColPublishDate + "="
	i := strings.Index(p, k)
	if i < 0 {
		return ""
	}
	d := p[i+len(k):]
	if j := strings.IndexByte(d, '/'); j >= 0 {
		return d[:j]
	}
	return ""
}

// buildBinpackFile writes the entries of g's files as one Parquet file, a
// row group per span of BinpackSpanBytes of payload, and returns it with
// the spans' index entries (Object unset). Entries are read one file at a
// time; before returning, the file is read back span by span through the
// Decoder and every entry checked against the source (a SHA-256 per span).
func (t *Tables) buildBinpackFile(ctx context.Context, id lakestream.LogID, tg Target, g binpackGroup, typed *lakehouse.TypedSchema) ([]byte, []index.Entry, error) {
	rb := lakehouse.NewRecordBuilder(nil, typed, lakehouse.RecordLimits{})
	defer rb.Release()
	var buf bytes.Buffer
	wopts := lakehouse.WriteOptions{RowGroupRows: math.MaxInt64}
	fw, err := pqarrow.NewFileWriter(rb.Schema(), &buf, wopts.WriterProperties(), pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		return nil, nil, fmt.Errorf("tables: parquet writer: %w", err)
	}
	closed := false
	defer func() {
		if !closed {
			fw.Close()
		}
	}()
	var spans []index.Entry
	var sums [][]byte
	var cur index.Entry // the open span
	h := sha256.New()
	rowGroupOpen := false
	writeRecord := func() error {
		rec := rb.NewRecord()
		if rec == nil {
			return nil
		}
		defer rec.Release()
		if !rowGroupOpen {
			fw.NewBufferedRowGroup()
			rowGroupOpen = true
		}
		if err := fw.WriteBuffered(rec); err != nil {
			return fmt.Errorf("tables: writing parquet: %w", err)
		}
		return nil
	}
	closeSpan := func() error {
		if err := writeRecord(); err != nil {
			return err
		}
		spans = append(spans, cur)
		sums = append(sums, h.Sum(nil))
		cur, rowGroupOpen = index.Entry{}, false
		h.Reset()
		return nil
	}
	for _, c := range g.olds {
		es, err := t.e.ChunkEntries(ctx, id, c.Entry)
		if err != nil {
			return nil, nil, err
		}
		for _, e := range es {
			// The last allowed span takes whatever is left, so the index
			// replacement always fits one transaction.
			if cur.Entries > 0 && cur.PayloadBytes+int64(len(e.Payload)) > t.opts.BinpackSpanBytes && len(spans) < binpackSpansMax-1 {
				if err := closeSpan(); err != nil {
					return nil, nil, err
				}
			}
			te := tableEntry{offset: e.Offset, records: e.Records, publishMs: e.PublishTimeMs, writeMs: e.WriteTimeMs, bytesEnd: e.CumulativeSize, payload: e.Payload}
			if te.day() != g.day {
				return nil, nil, fmt.Errorf("%w: log %d: entry at %d is of %s in a file of %s", index.ErrCorrupt, id, e.Offset, te.day(), g.day)
			}
			msgs, err := entryRows(te, tg.Partition, int64(id))
			if err != nil {
				return nil, nil, err
			}
			for i := range msgs {
				rb.Append(&msgs[i])
				if rb.Full() {
					if err := writeRecord(); err != nil {
						return nil, nil, err
					}
				}
			}
			if cur.Entries == 0 {
				cur = index.Entry{Kind: index.KindParquet, First: e.Offset, MinPublishMs: e.PublishTimeMs, MaxPublishMs: e.PublishTimeMs}
			}
			cur.Entries++
			cur.Records += int64(e.Records)
			cur.PayloadBytes += int64(len(e.Payload))
			cur.BytesEnd = e.CumulativeSize
			cur.MinPublishMs = min(cur.MinPublishMs, e.PublishTimeMs)
			cur.MaxPublishMs = max(cur.MaxPublishMs, e.PublishTimeMs)
			cur.WriteMs = max(cur.WriteMs, c.WriteMs)
			hashEntry(h, e.Records, e.PublishTimeMs, e.Payload)
		}
	}
	if cur.Entries > 0 {
		if err := closeSpan(); err != nil {
			return nil, nil, err
		}
	}
	closed = true
	if err := fw.Close(); err != nil {
		return nil, nil, fmt.Errorf("tables: closing parquet: %w", err)
	}
	md, err := fw.FileMetadata()
	if err != nil {
		return nil, nil, fmt.Errorf("tables: parquet footer: %w", err)
	}
	if md.NumRowGroups() != len(spans) {
		return nil, nil, fmt.Errorf("tables: bin-packed file has %d row groups for %d spans", md.NumRowGroups(), len(spans))
	}
	data := buf.Bytes()
	if err := verifyBinpackFile(ctx, data, md, spans, sums); err != nil {
		return nil, nil, err
	}
	return data, spans, nil
}

// verifyBinpackFile reads back the bin-packed file data (footer md) span
// by span and checks each one decodes to the entries it was built from
// (sums: the hashes of those entries, per span); it sets the spans'
// offset and length in the file.
func verifyBinpackFile(ctx context.Context, data []byte, md *metadata.FileMetaData, spans []index.Entry, sums [][]byte) error {
	read := func(_ context.Context, off, n int64) ([]byte, error) {
		if n < 0 || off+n > int64(len(data)) {
			n = int64(len(data)) - off
		}
		return data[off : off+n], nil
	}
	h := sha256.New()
	for i := range spans {
		start, _, err := rowGroupBytes(md, i)
		if err != nil {
			return err
		}
		if md.RowGroup(i).NumRows() != spans[i].Records {
			return fmt.Errorf("tables: row group %d has %d rows, span %d records", i, md.RowGroup(i).NumRows(), spans[i].Records)
		}
		spans[i].Offset, spans[i].Length = start, int64(len(data))
		des, err := Decoder{}.DecodeChunk(ctx, read, spans[i])
		if err != nil {
			return fmt.Errorf("tables: bin-packed file read-back: %w", err)
		}
		h.Reset()
		for _, de := range des {
			hashEntry(h, de.Records, de.PublishTimeMs, de.Payload)
		}
		if !bytes.Equal(h.Sum(nil), sums[i]) {
			return fmt.Errorf("tables: bin-packed file read-back differs in span %d (offsets from %d)", i, spans[i].First)
		}
	}
	return nil
}

// hashEntry feeds one entry (records, publish time, payload) to h.
func hashEntry(h hash.Hash, records int32, publishMs int64, payload []byte) {
	var b [20]byte
	binary.LittleEndian.PutUint32(b[0:], uint32(records))
	binary.LittleEndian.PutUint64(b[4:], uint64(publishMs))
	binary.LittleEndian.PutUint64(b[12:], uint64(len(payload)))
	h.Write(b[:])
	h.Write(payload)
}

// binpackHook runs the test hook of a bin-packing step.
func (t *Tables) binpackHook(id lakestream.LogID, step string) error {
	if h := t.opts.hooks.binpackStep; h != nil {
		return h(int64(id), step)
	}
	return nil
}
