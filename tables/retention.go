package tables

// Table retention (docs/compaction.md, "Table retention"): removing whole
// data files from a stream's Delta and Iceberg tables by age and by size,
// and trimming the stream's logs behind them, never past what a durable
// subscription still needs. A step of table maintenance: run by the
// table's compaction owner, under the table's commit lock.

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lakegate/lakegate/lakehouse"
	"github.com/lakegate/lakegate/lakehouse/delta"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
)

// retentionFilesMax bounds the files one ApplyRetention removes (one Delta
// commit, one Iceberg snapshot); the rest go at the next run.
const retentionFilesMax = 1000

// Retention is a stream's table retention: its resolved materialization
// policy's RetentionMs and RetentionBytes. A zero field is no limit.
type Retention struct {
	// Ms: a file whose newest row was published more than Ms ago (by the
	// Tables clock) is removed.
	Ms int64
	// Bytes: while the live files add up to more than Bytes, the oldest
	// are removed, never the newest file of the table.
	Bytes int64
}

// on reports whether r limits anything.
func (r Retention) on() bool { return r.Ms > 0 || r.Bytes > 0 }

// RetentionStats is what one ApplyRetention did.
type RetentionStats struct {
	Files int   // data files removed from the tables
	Bytes int64 // their bytes
	// Held counts the files retention would have removed but kept: a
	// durable subscription has not acknowledged all their rows, an
	// unfinished claim lists them, or an older file of their log stays.
	Held int
	// LiveBytes is the live files' total after the run.
	LiveBytes int64
	// Trimmed maps each log trimmed by this run to its new first offset.
	Trimmed map[lakestream.LogID]int64
}

// retentionRunKey is the key of the last retention run of the table at
// root: a retentionRunJSON (docs/compaction.md, "Table retention").
func (t *Tables) retentionRunKey(root string) string {
	return t.st.Root + "table-retention/" + root
}

// retentionRunJSON is the value of retentionRunKey (v 1).
type retentionRunJSON struct {
	V              int   `json:"v"`
	AtMs           int64 `json:"atMs"`
	RetentionMs    int64 `json:"retentionMs"`
	RetentionBytes int64 `json:"retentionBytes"`
	FilesRemoved   int   `json:"filesRemoved"`
	BytesRemoved   int64 `json:"bytesRemoved"`
	FilesHeld      int   `json:"filesHeld"`
	LiveBytes      int64 `json:"liveBytes"`
}

// RecordRetention stores st, the outcome of an ApplyRetention of r on the
// table at root, as the table's last retention run (one put, overwriting
// the previous run's): what Info reports to operators. The compaction
// owner calls it after each successful run.
func (t *Tables) RecordRetention(ctx context.Context, root string, r Retention, st RetentionStats) error {
	b, err := json.Marshal(retentionRunJSON{V: 1, AtMs: t.opts.Now().UnixMilli(), RetentionMs: r.Ms, RetentionBytes: r.Bytes,
		FilesRemoved: st.Files, BytesRemoved: st.Bytes, FilesHeld: st.Held, LiveBytes: st.LiveBytes})
	if err != nil {
		return err
	}
	if _, _, err := t.st.Meta.Txn(ctx, nil, []meta.Op{meta.Put(t.retentionRunKey(root), b)}); err != nil {
		return fmt.Errorf("tables: record retention run of %s: %w", root, err)
	}
	return nil
}

// lastRetention returns the last retention run recorded for the table at
// root, or nil.
func (t *Tables) lastRetention(ctx context.Context, root string) (*lakestream.TableRetentionRun, error) {
	kv, found, err := t.st.Meta.Get(ctx, t.retentionRunKey(root))
	if err != nil || !found {
		return nil, err
	}
	var v retentionRunJSON
	if err := json.Unmarshal(kv.Value, &v); err != nil || v.V != 1 {
		return nil, fmt.Errorf("tables: retention run of %s: version %d, %v", root, v.V, err)
	}
	return &lakestream.TableRetentionRun{AtMs: v.AtMs, RetentionMs: v.RetentionMs, RetentionBytes: v.RetentionBytes,
		FilesRemoved: v.FilesRemoved, BytesRemoved: v.BytesRemoved, FilesHeld: v.FilesHeld, LiveBytes: v.LiveBytes}, nil
}

// retFile is one live data file of a stream's tables, as retention sees
// it.
type retFile struct {
	path     string // relative to the table root
	size     int64
	part     int32 // __partition
	minOff   int64 // lowest __offset: the first offset of its first entry
	maxPubMs int64 // newest __publish_time, Unix ms
	known    bool  // partition, offset and publish time came from stats
	delta    bool  // live in the Delta table
	iceberg  bool  // live in the Iceberg table
	remove   bool
}

// retLog is the retention state of one log of the stream.
type retLog struct {
	id    lakestream.LogID
	files []*retFile // live files of its partition, by minOff
	// holds are what the log still needs (lakestream.TrimFloor): its
	// durable subscriptions, a compacted topic's next key compaction and
	// its table claim.
	holds lakestream.TrimHolds
	// floor is the lowest offset a durable subscription (or a compacted
	// topic's next key compaction) still needs; NoHold when none.
	floor int64
	// end is the offset up to which the tables surely hold the log (the
	// table claim's end, its start while it is unfinished); -1 without
	// a claim.
	end int64
	// unknown: a live file of the log has no usable stats; the log is
	// left alone.
	unknown bool
	// held are the files an unfinished table or bin-packing claim lists.
	held map[string]bool
}

// fileEnd is the offset just past the last row of lg.files[i]: the next
// file's first offset, or the log's table end for its last file.
func (lg *retLog) fileEnd(i int) int64 {
	if i+1 < len(lg.files) {
		return lg.files[i+1].minOff
	}
	if lg.end < 0 {
		return math.MaxInt64
	}
	return lg.end
}

// removable reports whether retention may drop lg.files[i], given that
// every earlier file of the log is dropped.
func (lg *retLog) removable(i int) bool {
	f := lg.files[i]
	return !lg.held[f.path] && lg.fileEnd(i) <= lg.floor
}

// ApplyRetention applies r to the tables of tg (docs/compaction.md, "Table
// retention"); logs are the stream's logs in partition order (logs[p] is
// partition p's; a file of partition -1 belongs to logs[0]).
//
// A live data file goes when its newest row is older than now − r.Ms, or,
// oldest first, while the live files exceed r.Bytes (the newest file of
// the table never goes by size) — always whole files, and per log a
// prefix in offset order: a file stays while an older file of its log
// stays. A file goes only when every durable subscription of its log has
// acknowledged all its rows as persisted, and no unfinished claim lists
// it. The files are removed from the Delta table (one commit of removes)
// and the Iceberg table (one overwrite snapshot), and each log is then
// hard-trimmed below the first offset the tables still hold for it
// (bounded by the subscriptions): its index no longer names the removed
// files. The files stay in storage; orphan removal deletes them after
// OrphanAge. Every step is idempotent (the plan is recomputed from the
// tables each run), so a crash between them is finished by the next run.
// A zero r does nothing.
func (t *Tables) ApplyRetention(ctx context.Context, tg Target, logs []lakestream.LogID, r Retention) (RetentionStats, error) {
	st := RetentionStats{}
	if !r.on() || len(logs) == 0 {
		return st, nil
	}
	if r.Ms < 0 || r.Bytes < 0 {
		return st, fmt.Errorf("%w: table retention %+v", lakestream.ErrInvalidArgument, r)
	}
	unlock := t.lockTable(tg.Root)
	defer unlock()
	files, missing, err := t.retentionFiles(ctx, tg)
	if err != nil {
		return st, err
	}
	if missing {
		// A table tg names does not exist (yet): what the tables hold
		// then says nothing about what retention removed, and the logs
		// could not be trimmed safely behind a removal. Wait for it.
		return st, nil
	}
	lgs := make([]*retLog, len(logs))
	for i, id := range logs {
		if lgs[i], err = t.retentionLog(ctx, id); err != nil {
			return st, err
		}
	}
	for _, f := range files {
		st.LiveBytes += f.size
		if !f.known {
			continue // never removed; its log is left alone below
		}
		p := int(f.part)
		if p < 0 {
			p = 0
		}
		if p < len(lgs) {
			lgs[p].files = append(lgs[p].files, f)
		}
	}
	for _, f := range files {
		if !f.known {
			p := max(int(f.part), 0)
			if p < len(lgs) {
				lgs[p].unknown = true
			}
		}
	}
	for _, lg := range lgs {
		slices.SortFunc(lg.files, func(a, b *retFile) int { return cmp.Compare(a.minOff, b.minOff) })
	}
	st.Held = planRetention(lgs, t.opts.Now().UnixMilli(), r, st.LiveBytes)

	var dels []string
	var delBytes int64
	for _, lg := range lgs {
		for _, f := range lg.files {
			if f.remove && len(dels) < retentionFilesMax {
				dels = append(dels, f.path)
				delBytes += f.size
			} else if f.remove {
				f.remove = false // next run
			}
		}
	}
	if len(dels) > 0 {
		if err := t.removeTableFiles(ctx, tg, files, dels, r); err != nil {
			return st, err
		}
		st.Files, st.Bytes = len(dels), delBytes
		st.LiveBytes -= delBytes
	}
	// Trim every log below what the tables still hold of it, also when
	// this run removed nothing (a crash after the table commits).
	for _, lg := range lgs {
		cut, ok := lg.trimPoint()
		if !ok {
			continue
		}
		first, err := t.trimLog(ctx, lg.id, cut)
		if err != nil {
			return st, err
		}
		if first >= 0 {
			if st.Trimmed == nil {
				st.Trimmed = map[lakestream.LogID]int64{}
			}
			st.Trimmed[lg.id] = first
		}
	}
	t.e.ObserveTableRetention(st.Files, st.Bytes, st.Held, len(st.Trimmed))
	return st, nil
}

// planRetention marks the files to remove (f.remove) and returns how many
// expired files it keeps. The pure core of ApplyRetention: nowMs is the
// clock, total the live files' bytes.
func planRetention(lgs []*retLog, nowMs int64, r Retention, total int64) (held int) {
	// next[i] is the index of log i's first file not removed; files before
	// it are removed.
	next := make([]int, len(lgs))
	blocked := make([]bool, len(lgs))
	if r.Ms > 0 {
		cutoff := nowMs - r.Ms
		for i, lg := range lgs {
			if lg.unknown {
				blocked[i] = true
				continue
			}
			for next[i] < len(lg.files) && lg.files[next[i]].maxPubMs < cutoff {
				if !lg.removable(next[i]) {
					blocked[i] = true
					break
				}
				f := lg.files[next[i]]
				f.remove = true
				total -= f.size
				next[i]++
			}
			if blocked[i] {
				for j := next[i]; j < len(lg.files) && lg.files[j].maxPubMs < cutoff; j++ {
					held++
				}
			}
		}
	}
	if r.Bytes <= 0 || total <= r.Bytes {
		return held
	}
	// The newest file of the table never goes by size.
	var newest *retFile
	for _, lg := range lgs {
		for _, f := range lg.files {
			if newest == nil || f.maxPubMs > newest.maxPubMs || (f.maxPubMs == newest.maxPubMs && f.minOff > newest.minOff) {
				newest = f
			}
		}
	}
	// Oldest first across the logs: repeatedly the oldest head of a log.
	for total > r.Bytes {
		best := -1
		for i, lg := range lgs {
			if lg.unknown || blocked[i] || next[i] >= len(lg.files) {
				continue
			}
			if best < 0 || lg.files[next[i]].maxPubMs < lgs[best].files[next[best]].maxPubMs {
				best = i
			}
		}
		if best < 0 {
			break
		}
		lg := lgs[best]
		f := lg.files[next[best]]
		if f == newest {
			blocked[best] = true
			continue
		}
		if !lg.removable(next[best]) {
			blocked[best] = true
			held++
			continue
		}
		f.remove = true
		total -= f.size
		next[best]++
	}
	return held
}

// trimPoint is the offset lg is to be trimmed below: the first offset the
// tables still hold of it (its table end when they hold none), bounded by
// its floor. ok is false when the log is to be left alone.
func (lg *retLog) trimPoint() (cut int64, ok bool) {
	if lg.unknown || lg.end < 0 {
		return 0, false
	}
	cut = lg.end
	for _, f := range lg.files {
		if !f.remove {
			cut = min(cut, f.minOff)
			break
		}
	}
	return lakestream.TrimFloor(cut, lg.holds), true
}

// trimLog hard-trims log id below cut, rounded down to an entry boundary;
// it returns the new first offset, or -1 when nothing was trimmed.
func (t *Tables) trimLog(ctx context.Context, id lakestream.LogID, cut int64) (int64, error) {
	lg, err := t.logReader(ctx, id)
	if err != nil {
		return -1, err
	}
	first, err := lg.FirstOffset(ctx)
	if err != nil {
		return -1, err
	}
	if cut <= first {
		return -1, nil
	}
	next, err := lg.NextOffset(ctx)
	if err != nil {
		return -1, err
	}
	if cut >= next {
		cut = next
	} else {
		h, err := lg.EntryHeader(ctx, cut)
		if err != nil {
			return -1, err
		}
		cut = h.Offset
	}
	if cut <= first {
		return -1, nil
	}
	if err := t.e.HardTrim(ctx, id, cut); err != nil {
		return -1, fmt.Errorf("tables: retention trim of log %d below %d: %w", id, cut, err)
	}
	return cut, nil
}

// retentionLog reads what retention needs of log id: its subscriptions'
// floor, its table claim's end and the files unfinished claims list.
func (t *Tables) retentionLog(ctx context.Context, id lakestream.LogID) (*retLog, error) {
	lg := &retLog{id: id, holds: lakestream.NoHolds(), end: -1, held: map[string]bool{}}
	l, err := t.logCursors(ctx, id)
	if err != nil {
		return nil, err
	}
	names, err := l.CursorNames(ctx)
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		if lakestream.IsInternalCursor(name) && name != lakestream.CompactionCursor {
			continue // the broker's own state (dedup, epochs): holds nothing
		}
		c, err := l.LoadCursor(ctx, name)
		if errors.Is(err, lakestream.ErrNoSuchCursor) {
			continue
		}
		if err != nil {
			return nil, err
		}
		lg.holds.AddCursor(name, c.MarkDeleteOffset(), c.PersistedMarkDeleteOffset(), c.Properties())
		_ = c.Close(ctx) // loaded, not changed: writes nothing
	}
	lg.floor = lakestream.TrimFloor(lakestream.NoHold, lg.holds)
	ms := t.st.Meta
	kv, ok, err := ms.Get(ctx, t.claimKey(id))
	if err != nil {
		return nil, fmt.Errorf("%w: claim of log %d: %w", lakestream.ErrUnavailable, id, err)
	}
	if ok {
		var c tableClaim
		if err := json.Unmarshal(kv.Value, &c); err != nil {
			return nil, fmt.Errorf("tables: table claim of log %d: %w", id, err)
		}
		lg.end = c.End
		lg.holds.TableEnd = c.End
		if !c.Indexed {
			lg.end = c.From
			lg.holds.UnfinishedClaim = c.From
			for _, f := range c.Files {
				lg.held[f.Path] = true
			}
		}
	}
	kv, ok, err = ms.Get(ctx, t.e.AttachmentKey(id, binpackClaimName))
	if err != nil {
		return nil, fmt.Errorf("%w: repack claim of log %d: %w", lakestream.ErrUnavailable, id, err)
	}
	if ok {
		var c binpackClaim
		if err := json.Unmarshal(kv.Value, &c); err != nil {
			return nil, fmt.Errorf("tables: repack claim of log %d: %w", id, err)
		}
		if !c.Indexed {
			lg.held[c.File.Path] = true
			for _, o := range c.Olds {
				lg.held[o.Path] = true
			}
		}
	}
	return lg, nil
}

// retentionFiles returns the live data files of tg's tables (a file live in
// either), with their stats; missing reports that a table tg names does
// not exist.
func (t *Tables) retentionFiles(ctx context.Context, tg Target) (_ []*retFile, missing bool, _ error) {
	byPath := map[string]*retFile{}
	var out []*retFile
	get := func(p string) *retFile {
		f, ok := byPath[p]
		if !ok {
			f = &retFile{path: p}
			byPath[p] = f
			out = append(out, f)
		}
		return f
	}
	// Both tables are read whenever they exist, whatever formats tg names
	// now: a file one of them still holds is never trimmed from the log.
	{
		tbl, err := delta.Open(ctx, t.st.Objects, tg.Root, delta.WithClock(t.opts.Now))
		if err != nil {
			return nil, false, err
		}
		snap, err := tbl.Snapshot(ctx)
		switch {
		case errors.Is(err, delta.ErrNoTable):
			missing = missing || tg.Delta
		case err != nil:
			return nil, false, fmt.Errorf("tables: retention of %s: %w", tg.Root, err)
		default:
			for _, a := range snap.Files {
				f := get(a.Path)
				f.delta, f.size = true, a.Size
				f.part, f.minOff, f.maxPubMs, f.known = deltaFileStats(a)
			}
		}
	}
	if tg.Iceberg || (t.opts.IcebergCatalog.StoreURL != "" && len(tg.Ident) >= 2) {
		cat, err := t.icebergCatalog(ctx)
		if err != nil {
			return nil, false, err
		}
		lfs, err := cat.LiveFiles(ctx, tg.Ident, tg.Root)
		if err != nil && !isNoTable(err) {
			return nil, false, fmt.Errorf("tables: retention of %s: %w", tg.Root, err)
		}
		if err != nil {
			missing = missing || tg.Iceberg
		}
		for _, lf := range lfs {
			f := get(lf.Path)
			f.iceberg = true
			if f.known {
				continue
			}
			f.size = lf.Size
			// Field ids (docs/table-schema.md): 1 __offset, 2 __partition,
			// 14 __publish_time (µs).
			part, ok1 := icebergBound(lf.LowerBounds[2])
			off, ok2 := icebergBound(lf.LowerBounds[1])
			pub, ok3 := icebergBound(lf.UpperBounds[14])
			f.part, f.minOff, f.maxPubMs, f.known = int32(part), off, pub/1000, ok1 && ok2 && ok3
		}
	}
	slices.SortFunc(out, func(a, b *retFile) int { return strings.Compare(a.path, b.path) })
	return out, missing, nil
}

// icebergBound decodes a single-value bound: an int (4 bytes) or a long or
// timestamp (8), little-endian.
func icebergBound(b []byte) (int64, bool) {
	switch len(b) {
	case 8:
		return int64(binary.LittleEndian.Uint64(b)), true
	case 4:
		return int64(int32(binary.LittleEndian.Uint32(b))), true
	}
	return 0, false
}

// deltaFileStats reads a Delta file's partition (its partition value), its
// lowest __offset and newest __publish_time (its stats).
func deltaFileStats(a delta.AddFile) (part int32, minOff, maxPubMs int64, ok bool) {
	p, err := strconv.ParseInt(a.PartitionValues[lakehouse.ColPartition], 10, 32)
	if err != nil {
		return 0, 0, 0, false
	}
	s := a.Stats
	if s == nil && a.StatsJSON != "" {
		s, _ = delta.ParseStats(a.StatsJSON)
	}
	if s == nil {
		return 0, 0, 0, false
	}
	switch v := s.MinValues[lakehouse.ColOffset].(type) {
	case int64:
		minOff = v
	case float64:
		minOff = int64(v)
	case json.Number:
		if minOff, err = v.Int64(); err != nil {
			return 0, 0, 0, false
		}
	default:
		return 0, 0, 0, false
	}
	ts, isString := s.MaxValues[lakehouse.ColPublishTime].(string)
	if !isString {
		return 0, 0, 0, false
	}
	pt, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return 0, 0, 0, false
	}
	return int32(p), minOff, pt.UnixMilli(), true
}

// removeTableFiles removes dels from the tables that still hold them: one
// Delta commit of removes, one Iceberg overwrite snapshot.
func (t *Tables) removeTableFiles(ctx context.Context, tg Target, files []*retFile, dels []string, r Retention) error {
	del := map[string]bool{}
	for _, p := range dels {
		del[p] = true
	}
	var fromDelta, fromIceberg []string
	for _, f := range files {
		if !del[f.path] {
			continue
		}
		if f.delta {
			fromDelta = append(fromDelta, f.path)
		}
		if f.iceberg {
			fromIceberg = append(fromIceberg, f.path)
		}
	}
	reason := fmt.Sprintf("retentionMs=%d retentionBytes=%d", r.Ms, r.Bytes)
	if len(fromDelta) > 0 {
		tbl, err := delta.Open(ctx, t.st.Objects, tg.Root, delta.WithClock(t.opts.Now))
		if err != nil {
			return err
		}
		if _, _, err := tbl.Commit(ctx, delta.CommitRequest{Removes: fromDelta, Operation: "DELETE"}); err != nil && !errors.Is(err, delta.ErrCheckpoint) {
			return fmt.Errorf("tables: retention of %s: delta: %w", tg.Root, err)
		}
		if h := t.opts.hooks.retentionStep; h != nil {
			if err := h("delta"); err != nil {
				return err
			}
		}
	}
	if len(fromIceberg) > 0 {
		cat, err := t.icebergCatalog(ctx)
		if err != nil {
			return err
		}
		if _, err := cat.RemoveFiles(ctx, tg.Ident, tg.Root, fromIceberg, reason); err != nil {
			return fmt.Errorf("tables: retention of %s: iceberg: %w", tg.Root, err)
		}
		if h := t.opts.hooks.retentionStep; h != nil {
			if err := h("iceberg"); err != nil {
				return err
			}
		}
	}
	return nil
}
