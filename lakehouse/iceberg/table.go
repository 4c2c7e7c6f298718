package iceberg

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/lakegate/lakegate/lakehouse"
)

// Table properties lakegate sets (docs/iceberg.md).
const (
	// logEndPrefix + "<log id>.end" holds the end offset of the log's last
	// committed range: the idempotency record.
	logEndPrefix = "lakegate.log."
	logEndSuffix = ".end"
	// formatProp marks a table created by lakegate, with its format version.
	formatProp = "lakegate.format"
	// partitionDayField is the name of the day(__publish_time) partition
	// field.
	partitionDayField = "__publish_time_day"
)

// commitAttemptsMax bounds the attempts of one Commit against the catalog's
// compare-and-swap; commitBackoffMax bounds the wait between two.
const (
	commitAttemptsMax = 10
	commitBackoffMax  = 2 * time.Second
)

// LogEndProperty is the table property recording the end offset of log
// id's last committed range.
func LogEndProperty(id int64) string {
	return logEndPrefix + strconv.FormatInt(id, 10) + logEndSuffix
}

// Schema is the Iceberg schema of a message table: lakehouse.Schema(nil)
// with its Parquet field ids kept (docs/table-schema.md). One deviation:
// map values (__properties) are optional, although the files never hold a
// null one, because iceberg-go v0.7.0 scans produce nullable map items
// whatever the schema says, and its ToArrowTable then refuses its own
// batches for a required value.
func Schema() (*ice.Schema, error) {
	sc, err := table.ArrowSchemaToIceberg(lakehouse.Schema(nil), false, nil)
	if err != nil {
		return nil, fmt.Errorf("iceberg: schema: %w", err)
	}
	fields := sc.Fields()
	for i, f := range fields {
		if m, ok := f.Type.(*ice.MapType); ok {
			opt := *m
			opt.ValueRequired = false
			fields[i].Type = &opt
		}
	}
	return ice.NewSchema(sc.ID, fields...), nil
}

// Spec is the partition spec over sc: identity(__partition) (field id
// 1000) and day(__publish_time) (field id 1001, named __publish_time_day).
func Spec(sc *ice.Schema) (ice.PartitionSpec, error) {
	part, ok := sc.FindFieldByName(lakehouse.ColPartition)
	if !ok {
		return ice.PartitionSpec{}, fmt.Errorf("%w: schema has no %s", ErrInvalid, lakehouse.ColPartition)
	}
	pub, ok := sc.FindFieldByName(lakehouse.ColPublishTime)
	if !ok {
		return ice.PartitionSpec{}, fmt.Errorf("%w: schema has no %s", ErrInvalid, lakehouse.ColPublishTime)
	}
	id0, id1 := 1000, 1001
	spec, err := ice.NewPartitionSpecOpts(ice.WithSpecID(0),
		ice.AddPartitionFieldBySourceID(part.ID, lakehouse.ColPartition, ice.IdentityTransform{}, sc, &id0),
		ice.AddPartitionFieldBySourceID(pub.ID, partitionDayField, ice.DayTransform{}, sc, &id1))
	if err != nil {
		return ice.PartitionSpec{}, fmt.Errorf("iceberg: partition spec: %w", err)
	}
	return spec, nil
}

// CommitRequest is one range of one log, as files to add to one table.
type CommitRequest struct {
	// Ident is the table identifier: namespace levels, then the table
	// name (lakegate uses [tenant, namespace, topic]).
	Ident []string
	// Root is the table's key prefix in the object store, no leading or
	// trailing slash; the table location is Location(Root).
	Root string
	// LogID and End identify the range: after the commit the table
	// property lakegate.log.<LogID>.end is End.
	LogID int64
	End   int64
	// More are further logs' ranges committed with this one (distinct
	// logs, none LogID): after the commit each one's property
	// lakegate.log.<id>.end is its End too — the tables' joint commit of a
	// transaction's logs (docs/transactions.md). The commit is left alone
	// when every log's recorded end is at or past its End, and fails
	// ErrTableMismatch when some are and some are not (part of what it
	// claims was committed without the rest).
	More []LogEnd
	// Files are the existing Parquet files, relative to Root
	// ("data/…/x.parquet").
	Files []string
	// Typed are the table's typed columns (nil: none). Columns missing
	// from the table's schema are added, with these field ids, before the
	// files (docs/iceberg.md, "Typed columns").
	Typed *lakehouse.TypedSchema
}

// LogEnd is one log's range of a CommitRequest's More.
type LogEnd struct {
	LogID int64
	End   int64
}

// Commit adds req.Files to the table (creating namespace and table when
// missing) and records req.End in one catalog commit. A table whose
// recorded end for the log is already ≥ req.End is left alone: committed
// reports whether this call committed. On a lost compare-and-swap it
// reloads and tries again, at most commitAttemptsMax times (ErrConflict).
// An error from the catalog leaves the table either without the files and
// the property or with both.
func (c *Catalog) Commit(ctx context.Context, req CommitRequest) (committed bool, err error) {
	if err := validIdent(req.Ident); err != nil {
		return false, err
	}
	if req.Root == "" || strings.HasPrefix(req.Root, "/") || strings.HasSuffix(req.Root, "/") {
		return false, fmt.Errorf("%w: table root %q", ErrInvalid, req.Root)
	}
	if len(req.Files) == 0 {
		return false, fmt.Errorf("%w: no files to commit", ErrInvalid)
	}
	loc := c.Location(req.Root)
	paths := make([]string, len(req.Files))
	for i, f := range req.Files {
		if f == "" || strings.HasPrefix(f, "/") || strings.Contains(f, "..") {
			return false, fmt.Errorf("%w: file path %q", ErrInvalid, f)
		}
		paths[i] = loc + "/" + f
	}
	ident := table.Identifier(req.Ident)
	ends := append([]LogEnd{{LogID: req.LogID, End: req.End}}, req.More...)
	props := ice.Properties{}
	for _, le := range ends {
		key := LogEndProperty(le.LogID)
		if _, dup := props[key]; dup {
			return false, fmt.Errorf("%w: log %d twice in one commit", ErrInvalid, le.LogID)
		}
		props[key] = strconv.FormatInt(le.End, 10)
	}
	var lastErr error
	for attempt := range commitAttemptsMax {
		if attempt > 0 {
			if err := backoff(ctx, attempt); err != nil {
				return false, errors.Join(err, lastErr)
			}
		}
		tbl, err := c.loadOrCreate(ctx, ident, loc)
		if err != nil {
			lastErr = err
			if errors.Is(err, ErrTableMismatch) || errors.Is(err, ErrInvalid) {
				return false, err
			}
			continue
		}
		done := 0 // logs recorded at or past their End
		for _, le := range ends {
			end, err := recordedEnd(tbl, LogEndProperty(le.LogID))
			if err != nil {
				return false, err
			}
			if end >= le.End {
				done++
			}
		}
		switch {
		case done == len(ends):
			return false, nil
		case done > 0:
			return false, fmt.Errorf("%w: %s: %d of the commit's %d logs are recorded already", ErrTableMismatch, ident, done, len(ends))
		}
		if tbl, err = c.addColumns(ctx, ident, tbl, req.Typed); err != nil {
			lastErr = err
			continue
		}
		txn := tbl.NewTransaction()
		if err := txn.SetProperties(props); err != nil {
			return false, fmt.Errorf("iceberg: %s: %w", ident, err)
		}
		summary := ice.Properties{"lakegate.log": strconv.FormatInt(req.LogID, 10), "lakegate.end": strconv.FormatInt(req.End, 10)}
		// ignoreDuplicates: the property above is the duplicate check; the
		// library's own would read every manifest of the table.
		if err := txn.AddFiles(ctx, paths, summary, true, table.WithAddFilesConcurrency(4)); err != nil {
			return false, fmt.Errorf("iceberg: add files to %s: %w", ident, err)
		}
		if _, err := txn.Commit(ctx); err != nil {
			// A lost compare-and-swap, a failed requirement (another
			// commit came first) or an unknown outcome: the next attempt
			// reloads and finds the property if it did commit.
			lastErr = err
			continue
		}
		return true, nil
	}
	return false, fmt.Errorf("%w: %s after %d attempts: %w", ErrConflict, ident, commitAttemptsMax, lastErr)
}

// backoff waits before attempt (≥ 1): 50 ms doubling, at most
// commitBackoffMax.
func backoff(ctx context.Context, attempt int) error {
	d := min(commitBackoffMax, 50*time.Millisecond<<min(attempt-1, 10))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func validIdent(ident []string) error {
	if len(ident) < 2 {
		return fmt.Errorf("%w: identifier %q needs a namespace and a name", ErrInvalid, ident)
	}
	for _, p := range ident {
		if p == "" {
			return fmt.Errorf("%w: identifier %q has an empty level", ErrInvalid, ident)
		}
	}
	return nil
}

// recordedEnd returns the table's end offset for the property key, -1
// when absent.
func recordedEnd(tbl *table.Table, key string) (int64, error) {
	v, ok := tbl.Properties()[key]
	if !ok {
		return -1, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: property %s=%q", ErrTableMismatch, tbl.Identifier(), key, v)
	}
	return n, nil
}

// RecordedEnd returns the end offset recorded for log id in the table, -1
// when none.
func (c *Catalog) RecordedEnd(ctx context.Context, ident []string, id int64) (int64, error) {
	tbl, err := c.cat.LoadTable(ctx, table.Identifier(ident))
	if err != nil {
		return 0, fmt.Errorf("iceberg: load %v: %w", ident, err)
	}
	return recordedEnd(tbl, LogEndProperty(id))
}

// loadOrCreate loads the table, creating its namespace levels and itself
// when missing, and checks that it is lakegate's table at loc.
func (c *Catalog) loadOrCreate(ctx context.Context, ident table.Identifier, loc string) (*table.Table, error) {
	tbl, err := c.cat.LoadTable(ctx, ident)
	if errors.Is(err, catalog.ErrNoSuchTable) || errors.Is(err, catalog.ErrNoSuchNamespace) {
		if err := c.create(ctx, ident, loc); err != nil {
			return nil, err
		}
		tbl, err = c.cat.LoadTable(ctx, ident)
	}
	if err != nil {
		return nil, fmt.Errorf("iceberg: load %s: %w", ident, err)
	}
	if got := strings.TrimSuffix(tbl.Location(), "/"); got != loc {
		return nil, fmt.Errorf("%w: %s is at %s, not %s", ErrTableMismatch, ident, got, loc)
	}
	if err := checkSchema(tbl.Schema()); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrTableMismatch, ident, err)
	}
	if n := tbl.Properties().Get(table.CommitNumRetriesKey, "0"); n != "0" {
		// The library would replay a conflicting append on fresh metadata,
		// past our property check: a duplicate. Commits are retried here.
		return nil, fmt.Errorf("%w: %s: %s=%s (lakegate needs 0)", ErrTableMismatch, ident, table.CommitNumRetriesKey, n)
	}
	return tbl, nil
}

// checkSchema checks that every system column has its field id in sc.
func checkSchema(sc *ice.Schema) error {
	want, err := Schema()
	if err != nil {
		return err
	}
	for _, f := range want.Fields() {
		got, ok := sc.FindFieldByName(f.Name)
		if !ok || got.ID != f.ID {
			return fmt.Errorf("column %s: field id %d, want %d", f.Name, got.ID, f.ID)
		}
	}
	return nil
}

// create makes the namespace levels and the table. The table is created
// through a commit with an assert-create requirement and explicit
// metadata updates rather than CreateTable, because catalogs' CreateTable
// reassigns fresh field ids and the files' ids must stay ours. Losing a
// race to create is not an error (the caller reloads).
func (c *Catalog) create(ctx context.Context, ident table.Identifier, loc string) error {
	ns := catalog.NamespaceFromIdent(ident)
	for i := 1; i <= len(ns); i++ {
		err := c.cat.CreateNamespace(ctx, ns[:i], nil)
		if err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
			return fmt.Errorf("iceberg: create namespace %s: %w", strings.Join(ns[:i], "."), err)
		}
	}
	sc, err := Schema()
	if err != nil {
		return err
	}
	spec, err := Spec(sc)
	if err != nil {
		return err
	}
	sort := table.UnsortedSortOrder
	updates := []table.Update{
		table.NewAssignUUIDUpdate(uuid.New()),
		table.NewUpgradeFormatVersionUpdate(2),
		table.NewAddSchemaUpdate(sc),
		table.NewSetCurrentSchemaUpdate(-1),
		table.NewAddPartitionSpecUpdate(&spec, true),
		table.NewSetDefaultSpecUpdate(-1),
		table.NewAddSortOrderUpdate(&sort),
		table.NewSetDefaultSortOrderUpdate(-1),
		table.NewSetLocationUpdate(loc),
		table.NewSetPropertiesUpdate(ice.Properties{
			formatProp:                  "1",
			table.CommitNumRetriesKey:   "0",
			table.ParquetCompressionKey: "zstd",
			// Bounded metadata: appends merge manifests once a snapshot
			// has commit.manifest.min-count-to-merge (100) of them, and
			// only the last write.metadata.previous-versions-max (100)
			// metadata files are kept.
			table.ManifestMergeEnabledKey:             "true",
			table.MetadataDeleteAfterCommitEnabledKey: "true",
		}),
	}
	if _, _, err := c.cat.CommitTable(ctx, ident, []table.Requirement{table.AssertCreate()}, updates); err != nil {
		if exists, cerr := c.cat.CheckTableExists(ctx, ident); cerr == nil && exists {
			return nil
		}
		return fmt.Errorf("iceberg: create table %s: %w", ident, err)
	}
	return nil
}

// addColumns adds the typed columns missing from tbl's current schema, as
// optional fields with their own ids, and the nested fields missing from
// its struct columns (mergeType), in one schema commit guarded by the
// current schema id (a concurrent change makes it fail: the caller
// reloads and tries again). It returns the reloaded table, or tbl when
// nothing was missing.
func (c *Catalog) addColumns(ctx context.Context, ident table.Identifier, tbl *table.Table, typed *lakehouse.TypedSchema) (*table.Table, error) {
	if typed == nil {
		return tbl, nil
	}
	want, err := table.ArrowSchemaToIceberg(lakehouse.Schema(typed), false, nil)
	if err != nil {
		return nil, fmt.Errorf("iceberg: typed schema: %w", err)
	}
	cur := tbl.Schema()
	fields := cur.Fields()
	added := 0
	for _, f := range want.Fields() {
		if f.ID < lakehouse.FirstTypedFieldID {
			continue
		}
		if got, ok := cur.FindFieldByID(f.ID); ok {
			if got.Name != f.Name {
				return nil, fmt.Errorf("%w: %s: field id %d is %q, want %q", ErrTableMismatch, ident, f.ID, got.Name, f.Name)
			}
			if t, grown := mergeType(got.Type, f.Type); grown {
				for i := range fields {
					if fields[i].ID == got.ID {
						fields[i].Type = t
					}
				}
				added++
			}
			continue
		}
		f.Required = false
		fields = append(fields, f)
		added++
	}
	if added == 0 {
		return tbl, nil
	}
	nextID := 0
	for _, sc := range tbl.Metadata().Schemas() {
		nextID = max(nextID, sc.ID+1)
	}
	ns := ice.NewSchema(nextID, fields...)
	reqs := []table.Requirement{table.AssertCurrentSchemaID(cur.ID)}
	updates := []table.Update{table.NewAddSchemaUpdate(ns), table.NewSetCurrentSchemaUpdate(-1)}
	if _, _, err := c.cat.CommitTable(ctx, ident, reqs, updates); err != nil {
		return nil, fmt.Errorf("iceberg: add columns to %s: %w", ident, err)
	}
	tbl, err = c.cat.LoadTable(ctx, ident)
	if err != nil {
		return nil, fmt.Errorf("iceberg: load %s: %w", ident, err)
	}
	return tbl, nil
}

// mergeType returns cur with the optional struct fields of add that it
// lacks (by field id) appended, at any depth through structs, lists and
// maps, and whether anything was added. Fields of cur are never removed or
// retyped: where the two disagree, cur's type stays.
func mergeType(cur, add ice.Type) (ice.Type, bool) {
	switch c := cur.(type) {
	case *ice.StructType:
		a, ok := add.(*ice.StructType)
		if !ok {
			return cur, false
		}
		out := &ice.StructType{FieldList: append([]ice.NestedField(nil), c.FieldList...)}
		grown := false
		for _, af := range a.FieldList {
			i := slices.IndexFunc(out.FieldList, func(f ice.NestedField) bool { return f.ID == af.ID })
			if i < 0 {
				af.Required = false
				out.FieldList = append(out.FieldList, af)
				grown = true
				continue
			}
			if t, ok := mergeType(out.FieldList[i].Type, af.Type); ok {
				out.FieldList[i].Type = t
				grown = true
			}
		}
		return out, grown
	case *ice.ListType:
		a, ok := add.(*ice.ListType)
		if !ok || a.ElementID != c.ElementID {
			return cur, false
		}
		if t, ok := mergeType(c.Element, a.Element); ok {
			out := *c
			out.Element = t
			return &out, true
		}
	case *ice.MapType:
		a, ok := add.(*ice.MapType)
		if !ok || a.ValueID != c.ValueID {
			return cur, false
		}
		if t, ok := mergeType(c.ValueType, a.ValueType); ok {
			out := *c
			out.ValueType = t
			return &out, true
		}
	}
	return cur, false
}
