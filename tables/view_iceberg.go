package tables

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/lakegate/lakegate/lakehouse/iceberg"
	"github.com/lakegate/lakegate/lakestream"
)

// IcebergIdent is the Iceberg identifier of a stream's table: its
// namespace levels ("tenant/namespace" → tenant, namespace), then its name.
func IcebergIdent(id lakestream.StreamIdentifier) []string {
	return append(strings.Split(id.Namespace, "/"), id.Name)
}

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
