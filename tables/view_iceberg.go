package tables

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/lakegate/lakegate/lakehouse"
	"github.com/lakegate/lakegate/lakehouse/iceberg"
	"github.com/lakegate/lakegate/lakestream"
)

// IcebergIdent is the Iceberg identifier of a stream's table: its
// namespace levels ("tenant/namespace" → tenant, namespace), then its name.
func IcebergIdent(id lakestream.StreamIdentifier) []string {
	return append(strings.Split(id.Namespace, "/"), id.Name)
}

// IsStreamIdent reports whether an Iceberg identifier is in the space of
// the streams' tables: a two-level namespace (tenant, namespace) and a
// name, as IcebergIdent builds them for every topic. The REST catalog
// reserves that whole space for lakegate, whether the stream exists yet
// or not: a topic can be created (and its table materialized) at any
// time, and a client's table at its identifier would block that for good.
func IsStreamIdent(ident []string) bool { return len(ident) == 3 }

// icebergInfo reports the stream's Iceberg table and the compacted end of
// each of logs in it; ok is false when it has none (or the layer has no
// Iceberg catalog configured).
func (t *Tables) icebergInfo(ctx context.Context, id lakestream.StreamIdentifier, logs []lakestream.LogID) (fi lakestream.TableFormatInfo, ends map[lakestream.LogID]int64, ok bool, err error) {
	if t.opts.IcebergCatalog.StoreURL == "" {
		return fi, nil, false, nil
	}
	cat, err := t.icebergCatalog(ctx)
	if err != nil {
		return fi, nil, false, err
	}
	ident := IcebergIdent(id)
	tbl, err := cat.Catalog().LoadTable(ctx, table.Identifier(ident))
	if errors.Is(err, catalog.ErrNoSuchTable) || errors.Is(err, catalog.ErrNoSuchNamespace) {
		return fi, nil, false, nil
	}
	if err != nil {
		return fi, nil, false, fmt.Errorf("%w: iceberg table %v: %w", lakestream.ErrUnavailable, ident, err)
	}
	if !cat.OwnsTable(tbl, TableRoot(id)) {
		// Another table at the stream's identifier: not reported (its
		// metadata would send readers elsewhere).
		return fi, nil, false, nil
	}
	fi = lakestream.TableFormatInfo{
		Format: lakestream.TableIceberg, URI: tbl.MetadataLocation(), Identifier: strings.Join(ident, "."),
		FormatVersion: strconv.Itoa(tbl.Metadata().Version()),
	}
	if snap := tbl.CurrentSnapshot(); snap != nil {
		fi.Version = snap.SnapshotID
		fi.LastCommitMs = snap.TimestampMs
		if snap.Summary != nil {
			fi.Rows, _ = strconv.ParseInt(snap.Summary.Properties["total-records"], 10, 64)
			files, _ := strconv.Atoi(snap.Summary.Properties["total-data-files"])
			fi.Files = files
		}
	}
	ends = map[lakestream.LogID]int64{}
	for _, l := range logs {
		if v, ok := tbl.Properties()[iceberg.LogEndProperty(int64(l))]; ok {
			ends[l], _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return fi, ends, true, nil
}

// scanIceberg is ScanTable over the stream's Iceberg table: the files of
// its current snapshot, in (partition, first offset) order, one at a time.
// No Iceberg table (or no catalog) is lakestream.ErrNotMaterialized.
func (t *Tables) scanIceberg(ctx context.Context, id lakestream.StreamIdentifier, fn func(rec arrow.RecordBatch) error) error {
	root := TableRoot(id)
	if t.opts.IcebergCatalog.StoreURL == "" {
		return fmt.Errorf("%w: no table at %s", lakestream.ErrNotMaterialized, root)
	}
	cat, err := t.icebergCatalog(ctx)
	if err != nil {
		return err
	}
	files, err := cat.LiveFiles(ctx, IcebergIdent(id), root)
	if errors.Is(err, catalog.ErrNoSuchTable) || errors.Is(err, catalog.ErrNoSuchNamespace) {
		return fmt.Errorf("%w: no table at %s", lakestream.ErrNotMaterialized, root)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", lakestream.ErrUnavailable, err)
	}
	// Field ids 1 and 2 are __offset and __partition (docs/table-schema.md).
	bound := func(f iceberg.LiveFile, id int) int64 {
		b := f.LowerBounds[id]
		switch len(b) {
		case 8:
			return int64(binary.LittleEndian.Uint64(b))
		case 4:
			return int64(int32(binary.LittleEndian.Uint32(b)))
		}
		return 0
	}
	slices.SortFunc(files, func(a, b iceberg.LiveFile) int {
		if c := cmp.Compare(bound(a, 2), bound(b, 2)); c != 0 {
			return c
		}
		if c := cmp.Compare(bound(a, 1), bound(b, 1)); c != 0 {
			return c
		}
		return strings.Compare(a.Path, b.Path)
	})
	store := t.st.Objects
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
