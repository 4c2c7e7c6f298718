package tables

// The table view of a stream: scans of its Delta table and what Info
// reports (docs/compaction.md, "Reading the table").

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lakegate/lakegate/lakehouse"
	"github.com/lakegate/lakegate/lakehouse/delta"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/objstore"
)

// TableRoot is the key prefix of a stream's tables in the object store:
// "tables/<tenant>/<namespace>/<stream>" (a Pulsar topic's stream namespace
// is "<tenant>/<namespace>").
func TableRoot(id lakestream.StreamIdentifier) string {
	return "tables/" + id.Namespace + "/" + id.Name
}

// ScanTable calls fn with every row of the Delta table at root as Arrow
// record batches, file by file: files in order of (partition, first
// offset), rows in offset order within a file. A batch is valid only during
// fn. It returns lakestream.ErrNotMaterialized when the table does not
// exist yet. Memory is bounded by one file plus one batch.
func ScanTable(ctx context.Context, store objstore.Store, root string, fn func(rec arrow.RecordBatch) error) error {
	tbl, err := delta.Open(ctx, store, root)
	if err != nil {
		return err
	}
	snap, err := tbl.Snapshot(ctx)
	if errors.Is(err, delta.ErrNoTable) {
		return fmt.Errorf("%w: no table at %s", lakestream.ErrNotMaterialized, root)
	}
	if err != nil {
		return err
	}
	files := slices.Clone(snap.Files)
	slices.SortStableFunc(files, func(a, b delta.AddFile) int {
		pa, _ := strconv.Atoi(a.PartitionValues[lakehouse.ColPartition])
		pb, _ := strconv.Atoi(b.PartitionValues[lakehouse.ColPartition])
		if pa != pb {
			return pa - pb
		}
		oa, ob := minOffset(a), minOffset(b)
		switch {
		case oa < ob:
			return -1
		case oa > ob:
			return 1
		}
		return strings.Compare(a.Path, b.Path)
	})
	for _, f := range files {
		key := root + "/" + f.Path
		data, err := store.Get(ctx, key)
		if err != nil {
			return fmt.Errorf("%w: table file %s: %w", lakestream.ErrUnavailable, key, err)
		}
		if err := lakehouse.ScanParquet(ctx, bytes.NewReader(data), memory.DefaultAllocator, fn); err != nil {
			return fmt.Errorf("table file %s: %w", key, err)
		}
	}
	return nil
}

// minOffset is a file's smallest __offset from its stats (0 if unknown).
func minOffset(f delta.AddFile) int64 {
	st := f.Stats
	if st == nil && f.StatsJSON != "" {
		st, _ = delta.ParseStats(f.StatsJSON)
	}
	if st == nil {
		return 0
	}
	if v, ok := st.MinValues[lakehouse.ColOffset].(float64); ok {
		return int64(v)
	}
	return 0
}

// tableView implements lakestream.Table for one stream.
type tableView struct {
	t        *Tables
	md       lakestream.StreamMetadata
	storeURL string
}

// View returns the table view of a stream whose objects are in the
// store at storeURL (for the URIs Info reports): the stream catalog's
// TableProvider (Stream.Table()).
func (t *Tables) View(md lakestream.StreamMetadata, storeURL string) lakestream.Table {
	return &tableView{t: t, md: md, storeURL: storeURL}
}

// Scan returns every row as Arrow IPC stream bytes, one element per batch.
// It holds the whole table in memory: for large tables use ScanTable.
func (v *tableView) Scan(ctx context.Context) ([][]byte, error) {
	var out [][]byte
	fn := func(rec arrow.RecordBatch) error {
		var buf bytes.Buffer
		w := ipc.NewWriter(&buf, ipc.WithSchema(rec.Schema()))
		if err := w.Write(rec); err != nil {
			return fmt.Errorf("tables: arrow ipc: %w", err)
		}
		if err := w.Close(); err != nil {
			return fmt.Errorf("tables: arrow ipc: %w", err)
		}
		out = append(out, buf.Bytes())
		return nil
	}
	err := ScanTable(ctx, v.t.st.Objects, TableRoot(v.md.ID), fn)
	if errors.Is(err, lakestream.ErrNotMaterialized) {
		// No Delta table: a stream materialized into Iceberg only.
		err = v.t.scanIceberg(ctx, v.md.ID, fn)
	}
	return out, err
}

// Info reports the stream's Delta table (and Iceberg, when committed),
// each log's compacted position and the last table retention run
// (RecordRetention).
func (v *tableView) Info(ctx context.Context) (lakestream.TableInfo, error) {
	root := TableRoot(v.md.ID)
	info := lakestream.TableInfo{Location: StoreURI(v.storeURL, root)}
	tbl, err := delta.Open(ctx, v.t.st.Objects, root)
	if err != nil {
		return info, err
	}
	snap, err := tbl.Snapshot(ctx)
	switch {
	case errors.Is(err, delta.ErrNoTable):
	case err != nil:
		return info, err
	default:
		rows, _ := snap.NumRecords()
		var last int64
		for _, f := range snap.Files {
			last = max(last, f.ModificationTime)
		}
		info.Formats = append(info.Formats, lakestream.TableFormatInfo{
			Format: lakestream.TableDelta, URI: info.Location, Version: snap.Version,
			FormatVersion: fmt.Sprintf("reader %d / writer %d", snap.Protocol.MinReaderVersion, snap.Protocol.MinWriterVersion),
			Rows:          rows, Files: len(snap.Files), LastCommitMs: last,
		})
	}
	fi, iceEnds, ok, err := v.t.icebergInfo(ctx, v.md.ID, v.md.LogIDs)
	if err != nil {
		return info, err
	}
	if ok {
		info.Formats = append(info.Formats, fi)
	}
	if len(info.Formats) == 0 {
		return info, fmt.Errorf("%w: stream %s has no table yet", lakestream.ErrNotMaterialized, v.md.ID)
	}
	for i, id := range v.md.LogIDs {
		// Where both formats exist, the Delta commit comes first: the
		// smaller end is what every format holds.
		end, ok := snap.Txns[tableAppID(id)]
		if iceEnd, iok := iceEnds[id]; iok && (!ok || iceEnd < end) {
			end = iceEnd
		}
		p := lakestream.TablePartitionInfo{Partition: -1, Log: id, CompactedEnd: end}
		if v.md.Partitioning.NumPartitions > 0 {
			p.Partition = i
		}
		if last, err := v.t.e.LastOffset(ctx, id); err == nil {
			p.LogEnd = last + 1
		}
		info.Partitions = append(info.Partitions, p)
	}
	if info.LastRetention, err = v.t.lastRetention(ctx, root); err != nil {
		return info, err
	}
	return info, nil
}

// StoreURI is the URI of key in the store at storeURL: the URL's prefix
// parameter applied, its other parameters (endpoints, credentials options)
// left out.
func StoreURI(storeURL, key string) string {
	base, query, _ := strings.Cut(storeURL, "?")
	if q, err := url.ParseQuery(query); err == nil {
		if p := strings.Trim(q.Get("prefix"), "/"); p != "" {
			key = p + "/" + key
		}
	}
	return strings.TrimSuffix(base, "/") + "/" + key
}
