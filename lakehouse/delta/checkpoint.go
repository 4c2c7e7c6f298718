package delta

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/lakegate/lakegate/objstore"
)

// Spark's classic checkpoint schema (docs/delta.md); every field nullable.
var (
	strMap = arrow.MapOfWithMetadata(arrow.BinaryTypes.String, arrow.Metadata{},
		arrow.BinaryTypes.String, arrow.Metadata{})
	txnType = arrow.StructOf(
		nf("appId", arrow.BinaryTypes.String),
		nf("version", arrow.PrimitiveTypes.Int64),
		nf("lastUpdated", arrow.PrimitiveTypes.Int64),
	)
	addType = arrow.StructOf(
		nf("path", arrow.BinaryTypes.String),
		nf("partitionValues", strMap),
		nf("size", arrow.PrimitiveTypes.Int64),
		nf("modificationTime", arrow.PrimitiveTypes.Int64),
		nf("dataChange", arrow.FixedWidthTypes.Boolean),
		nf("stats", arrow.BinaryTypes.String),
		nf("tags", strMap),
	)
	removeType = arrow.StructOf(
		nf("path", arrow.BinaryTypes.String),
		nf("deletionTimestamp", arrow.PrimitiveTypes.Int64),
		nf("dataChange", arrow.FixedWidthTypes.Boolean),
		nf("extendedFileMetadata", arrow.FixedWidthTypes.Boolean),
		nf("partitionValues", strMap),
		nf("size", arrow.PrimitiveTypes.Int64),
		nf("tags", strMap),
	)
	metaDataType = arrow.StructOf(
		nf("id", arrow.BinaryTypes.String),
		nf("name", arrow.BinaryTypes.String),
		nf("description", arrow.BinaryTypes.String),
		nf("format", arrow.StructOf(
			nf("provider", arrow.BinaryTypes.String),
			nf("options", strMap),
		)),
		nf("schemaString", arrow.BinaryTypes.String),
		nf("partitionColumns", arrow.ListOf(arrow.BinaryTypes.String)),
		nf("configuration", strMap),
		nf("createdTime", arrow.PrimitiveTypes.Int64),
	)
	protocolType = arrow.StructOf(
		nf("minReaderVersion", arrow.PrimitiveTypes.Int32),
		nf("minWriterVersion", arrow.PrimitiveTypes.Int32),
	)
	checkpointSchema = arrow.NewSchema([]arrow.Field{
		nf("txn", txnType),
		nf("add", addType),
		nf("remove", removeType),
		nf("metaData", metaDataType),
		nf("protocol", protocolType),
	}, nil)
)

func nf(name string, t arrow.DataType) arrow.Field {
	return arrow.Field{Name: name, Type: t, Nullable: true}
}

// lastCheckpoint is the _last_checkpoint hint.
type lastCheckpoint struct {
	Version       int64  `json:"version"`
	Size          int64  `json:"size"`
	SizeInBytes   *int64 `json:"sizeInBytes,omitempty"`
	NumOfAddFiles *int64 `json:"numOfAddFiles,omitempty"`
}

// encodeCheckpoint writes the state as a checkpoint Parquet file; rows is
// the number of actions.
// Tombstones with a deletionTimestamp before minDeletionMs are left out.
func encodeCheckpoint(s *state, minDeletionMs int64) (data []byte, rows int64, err error) {
	mem := memory.DefaultAllocator
	b := array.NewRecordBuilder(mem, checkpointSchema)
	defer b.Release()
	txnB := b.Field(0).(*array.StructBuilder)
	addB := b.Field(1).(*array.StructBuilder)
	remB := b.Field(2).(*array.StructBuilder)
	mdB := b.Field(3).(*array.StructBuilder)
	prB := b.Field(4).(*array.StructBuilder)
	nullRow := func(except *array.StructBuilder) {
		for _, sb := range []*array.StructBuilder{txnB, addB, remB, mdB, prB} {
			if sb != except {
				sb.AppendNull()
			}
		}
		rows++
	}

	// protocol
	nullRow(prB)
	prB.Append(true)
	prB.FieldBuilder(0).(*array.Int32Builder).Append(s.protocol.MinReaderVersion)
	prB.FieldBuilder(1).(*array.Int32Builder).Append(s.protocol.MinWriterVersion)

	// metaData
	m := s.metadata
	nullRow(mdB)
	mdB.Append(true)
	appendStr(mdB.FieldBuilder(0), m.ID, true)
	appendStr(mdB.FieldBuilder(1), m.Name, m.Name != "")
	appendStr(mdB.FieldBuilder(2), m.Description, m.Description != "")
	fb := mdB.FieldBuilder(3).(*array.StructBuilder)
	fb.Append(true)
	appendStr(fb.FieldBuilder(0), m.Format.Provider, true)
	appendMap(fb.FieldBuilder(1), m.Format.Options, true)
	appendStr(mdB.FieldBuilder(4), m.SchemaString, true)
	lb := mdB.FieldBuilder(5).(*array.ListBuilder)
	lb.Append(true)
	for _, c := range m.PartitionColumns {
		lb.ValueBuilder().(*array.StringBuilder).Append(c)
	}
	appendMap(mdB.FieldBuilder(6), m.Configuration, true)
	appendInt64(mdB.FieldBuilder(7), m.CreatedTime)

	// txn, sorted for determinism
	for _, id := range slices.Sorted(mapKeys(s.txns)) {
		t := s.txns[id]
		nullRow(txnB)
		txnB.Append(true)
		appendStr(txnB.FieldBuilder(0), t.AppID, true)
		txnB.FieldBuilder(1).(*array.Int64Builder).Append(t.Version)
		appendInt64(txnB.FieldBuilder(2), t.LastUpdated)
	}

	// add
	paths := slices.Sorted(mapKeys(s.files))
	for _, p := range paths {
		f := s.files[p]
		j, err := f.toJSON()
		if err != nil {
			return nil, 0, err
		}
		nullRow(addB)
		addB.Append(true)
		appendStr(addB.FieldBuilder(0), j.Path, true)
		appendMap(addB.FieldBuilder(1), j.PartitionValues, true)
		addB.FieldBuilder(2).(*array.Int64Builder).Append(j.Size)
		addB.FieldBuilder(3).(*array.Int64Builder).Append(j.ModificationTime)
		addB.FieldBuilder(4).(*array.BooleanBuilder).Append(j.DataChange)
		if j.Stats != nil {
			appendStr(addB.FieldBuilder(5), *j.Stats, true)
		} else {
			addB.FieldBuilder(5).AppendNull()
		}
		appendMap(addB.FieldBuilder(6), j.Tags, j.Tags != nil)
	}

	// remove: tombstones within the retention
	for _, p := range slices.Sorted(mapKeys(s.tombstones)) {
		r := s.tombstones[p]
		if r.DeletionTimestamp == nil || *r.DeletionTimestamp < minDeletionMs {
			continue
		}
		nullRow(remB)
		remB.Append(true)
		appendStr(remB.FieldBuilder(0), encodePath(p), true)
		appendInt64(remB.FieldBuilder(1), r.DeletionTimestamp)
		remB.FieldBuilder(2).(*array.BooleanBuilder).Append(false)
		if r.ExtendedFileMetadata != nil {
			remB.FieldBuilder(3).(*array.BooleanBuilder).Append(*r.ExtendedFileMetadata)
		} else {
			remB.FieldBuilder(3).AppendNull()
		}
		appendMap(remB.FieldBuilder(4), r.PartitionValues, r.PartitionValues != nil)
		appendInt64(remB.FieldBuilder(5), r.Size)
		appendMap(remB.FieldBuilder(6), r.Tags, r.Tags != nil)
	}

	rec := b.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	props := parquet.NewWriterProperties(
		parquet.WithCompression(compress.Codecs.Snappy),
		parquet.WithCreatedBy("lakegate"),
	)
	w, err := pqarrow.NewFileWriter(checkpointSchema, &buf, props, pqarrow.NewArrowWriterProperties())
	if err != nil {
		return nil, 0, fmt.Errorf("delta: checkpoint writer: %w", err)
	}
	if err := w.Write(rec); err != nil {
		w.Close()
		return nil, 0, fmt.Errorf("delta: checkpoint write: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, 0, fmt.Errorf("delta: checkpoint close: %w", err)
	}
	return buf.Bytes(), rows, nil
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func appendStr(b array.Builder, s string, valid bool) {
	if !valid {
		b.AppendNull()
		return
	}
	b.(*array.StringBuilder).Append(s)
}

func appendInt64(b array.Builder, v *int64) {
	if v == nil {
		b.AppendNull()
		return
	}
	b.(*array.Int64Builder).Append(*v)
}

func appendMap(b array.Builder, m map[string]string, valid bool) {
	mb := b.(*array.MapBuilder)
	if !valid {
		mb.AppendNull()
		return
	}
	mb.Append(true)
	for _, k := range slices.Sorted(mapKeys(m)) {
		mb.KeyBuilder().(*array.StringBuilder).Append(k)
		mb.ItemBuilder().(*array.StringBuilder).Append(m[k])
	}
}

// writeCheckpoint writes the checkpoint of s (at s.version) and then the
// _last_checkpoint hint, unless a newer hint is already there.
func writeCheckpoint(ctx context.Context, store objstore.Store, k logKeys, s *state, minDeletionMs int64) error {
	data, rows, err := encodeCheckpoint(s, minDeletionMs)
	if err != nil {
		return err
	}
	key := k.checkpoint(s.version)
	if err := store.PutIfAbsent(ctx, key, data); err != nil && !errors.Is(err, objstore.ErrExists) {
		return fmt.Errorf("delta: put %s: %w", key, err)
	}
	if cur, err := store.Get(ctx, k.lastCheckpoint()); err == nil {
		var lc lastCheckpoint
		if json.Unmarshal(cur, &lc) == nil && lc.Version >= s.version {
			return nil
		}
	}
	size, adds := int64(len(data)), int64(len(s.files))
	hint, _ := json.Marshal(lastCheckpoint{Version: s.version, Size: rows, SizeInBytes: &size, NumOfAddFiles: &adds})
	if err := store.Put(ctx, k.lastCheckpoint(), hint); err != nil {
		return fmt.Errorf("delta: put %s: %w", k.lastCheckpoint(), err)
	}
	return nil
}

// readCheckpoint loads checkpoint v into s (which must be empty). Columns
// are found by name, so checkpoints written by Spark (with extra columns)
// are read too.
func readCheckpoint(ctx context.Context, store objstore.Store, k logKeys, v int64, s *state) error {
	key := k.checkpoint(v)
	data, err := store.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("delta: get %s: %w", key, err)
	}
	tbl, err := pqarrow.ReadTable(ctx, bytes.NewReader(data), nil, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorruptLog, key, err)
	}
	defer tbl.Release()
	tr := array.NewTableReader(tbl, 0)
	defer tr.Release()
	for tr.Next() {
		rec := tr.RecordBatch()
		cols := map[string]*array.Struct{}
		for i, f := range rec.Schema().Fields() {
			if st, ok := rec.Column(i).(*array.Struct); ok {
				cols[f.Name] = st
			}
		}
		for row := 0; row < int(rec.NumRows()); row++ {
			a, err := checkpointRow(cols, row)
			if err != nil {
				return fmt.Errorf("%w: %s row %d: %v", ErrCorruptLog, key, row, err)
			}
			if err := s.apply(&a); err != nil {
				return fmt.Errorf("%w: %s row %d: %w", ErrCorruptLog, key, row, err)
			}
		}
	}
	if err := tr.Err(); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorruptLog, key, err)
	}
	s.version, s.checkpoint = v, v
	return nil
}

// structView reads fields of one row of a struct column by name.
type structView struct {
	st  *array.Struct
	row int
}

func (v structView) col(name string) arrow.Array {
	t := v.st.DataType().(*arrow.StructType)
	if i, ok := t.FieldIdx(name); ok {
		c := v.st.Field(i)
		if c.IsNull(v.row) {
			return nil
		}
		return c
	}
	return nil
}

func (v structView) str(name string) (string, bool) {
	switch c := v.col(name).(type) {
	case *array.String:
		return c.Value(v.row), true
	case *array.LargeString:
		return c.Value(v.row), true
	case *array.Binary:
		return string(c.Value(v.row)), true
	}
	return "", false
}

func (v structView) i64(name string) (int64, bool) {
	switch c := v.col(name).(type) {
	case *array.Int64:
		return c.Value(v.row), true
	case *array.Int32:
		return int64(c.Value(v.row)), true
	}
	return 0, false
}

func (v structView) boolean(name string) bool {
	if c, ok := v.col(name).(*array.Boolean); ok {
		return c.Value(v.row)
	}
	return false
}

func (v structView) sub(name string) (structView, bool) {
	if c, ok := v.col(name).(*array.Struct); ok {
		return structView{c, v.row}, true
	}
	return structView{}, false
}

func (v structView) strMap(name string) map[string]string {
	c, ok := v.col(name).(*array.Map)
	if !ok {
		return nil
	}
	start, end := c.ValueOffsets(v.row)
	out := make(map[string]string, end-start)
	for i := int(start); i < int(end); i++ {
		k, _ := strAt(c.Keys(), i)
		val, _ := strAt(c.Items(), i)
		out[k] = val
	}
	return out
}

func strAt(a arrow.Array, i int) (string, bool) {
	if a.IsNull(i) {
		return "", false
	}
	switch c := a.(type) {
	case *array.String:
		return c.Value(i), true
	case *array.LargeString:
		return c.Value(i), true
	case *array.Binary:
		return string(c.Value(i)), true
	}
	return "", false
}

func (v structView) strList(name string) []string {
	c, ok := v.col(name).(*array.List)
	if !ok {
		return nil
	}
	start, end := c.ValueOffsets(v.row)
	out := make([]string, 0, end-start)
	for i := int(start); i < int(end); i++ {
		s, _ := strAt(c.ListValues(), i)
		out = append(out, s)
	}
	return out
}

func checkpointRow(cols map[string]*array.Struct, row int) (action, error) {
	get := func(name string) (structView, bool) {
		st, ok := cols[name]
		if !ok || st.IsNull(row) {
			return structView{}, false
		}
		return structView{st, row}, true
	}
	var a action
	if v, ok := get("protocol"); ok {
		r, _ := v.i64("minReaderVersion")
		w, _ := v.i64("minWriterVersion")
		a.Protocol = &Protocol{MinReaderVersion: int32(r), MinWriterVersion: int32(w),
			ReaderFeatures: v.strList("readerFeatures"), WriterFeatures: v.strList("writerFeatures")}
		return a, nil
	}
	if v, ok := get("metaData"); ok {
		m := &Metadata{PartitionColumns: v.strList("partitionColumns"), Configuration: v.strMap("configuration")}
		m.ID, _ = v.str("id")
		m.Name, _ = v.str("name")
		m.Description, _ = v.str("description")
		m.SchemaString, _ = v.str("schemaString")
		if ct, ok := v.i64("createdTime"); ok {
			m.CreatedTime = &ct
		}
		if f, ok := v.sub("format"); ok {
			m.Format.Provider, _ = f.str("provider")
			m.Format.Options = f.strMap("options")
		}
		if m.Format.Options == nil {
			m.Format.Options = map[string]string{}
		}
		if m.Configuration == nil {
			m.Configuration = map[string]string{}
		}
		a.MetaData = m
		return a, nil
	}
	if v, ok := get("txn"); ok {
		t := &Txn{}
		t.AppID, _ = v.str("appId")
		t.Version, _ = v.i64("version")
		if lu, ok := v.i64("lastUpdated"); ok {
			t.LastUpdated = &lu
		}
		a.Txn = t
		return a, nil
	}
	if v, ok := get("add"); ok {
		j := &addJSON{PartitionValues: v.strMap("partitionValues"), Tags: v.strMap("tags")}
		var ok bool
		if j.Path, ok = v.str("path"); !ok {
			return a, errors.New("add without path")
		}
		j.Size, _ = v.i64("size")
		j.ModificationTime, _ = v.i64("modificationTime")
		j.DataChange = v.boolean("dataChange")
		if st, ok := v.str("stats"); ok {
			j.Stats = &st
		}
		if _, ok := v.sub("deletionVector"); ok {
			j.DeletionVector = json.RawMessage(`{}`)
		}
		a.Add = j
		return a, nil
	}
	if v, ok := get("remove"); ok {
		r := &RemoveFile{}
		r.Path, _ = v.str("path")
		if ts, ok := v.i64("deletionTimestamp"); ok {
			r.DeletionTimestamp = &ts
		}
		if n, ok := v.i64("size"); ok {
			r.Size = &n
		}
		r.PartitionValues = v.strMap("partitionValues")
		a.Remove = r
		return a, nil
	}
	return a, nil // a row of an action we do not track (e.g. commitInfo, domainMetadata)
}
