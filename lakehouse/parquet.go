package lakehouse

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// ErrMixedPartitions is returned by WriteParquet when the records hold more
// than one (__partition, __publish_date) pair: a Delta data file belongs to
// exactly one partition. The caller rolls a new file at the boundary.
var ErrMixedPartitions = errors.New("lakehouse: records span more than one table partition")

// ErrNotMessageTable is returned by ReadParquet and MessagesFromRecord when
// a column of the message table is missing or has another type.
var ErrNotMessageTable = errors.New("lakehouse: not a message table")

// WriteOptions configure WriteParquet. The zero value gives the defaults.
type WriteOptions struct {
	// RowGroupBytes cuts a row group once its buffered Arrow data reaches
	// this many bytes; default 128 MiB. The writer holds one row group in
	// memory.
	RowGroupBytes int64
	// RowGroupRows caps a row group's rows; default 1 Mi.
	RowGroupRows int64
	// MaxFileBytes: WriteParquet takes no further record once the file
	// (closed row groups compressed + the open one's Arrow size) reaches
	// it; default 512 MiB. A file may exceed it by one record plus footer.
	MaxFileBytes int64
	// ZstdLevel is the zstd level; 0 = the codec's default (3).
	ZstdLevel int
	// Allocator for the writer; nil = memory.DefaultAllocator.
	Allocator memory.Allocator
}

const (
	defaultRowGroupBytes = 128 << 20
	defaultRowGroupRows  = 1 << 20
	defaultMaxFileBytes  = 512 << 20
)

// ColumnStats are footer statistics of one leaf column, merged over the
// file's row groups.
type ColumnStats struct {
	// Path is the dotted leaf path, e.g. "__offset" or
	// "__properties.key_value.key".
	Path    string
	FieldID int32
	// ValueCount counts leaf values including nulls; NullCount the nulls.
	ValueCount, NullCount int64
	// CompressedBytes and UncompressedBytes are the column chunks' sizes.
	CompressedBytes, UncompressedBytes int64
	// HasMinMax is false when a row group had no statistics (blob columns,
	// all-null chunks) — then Min and Max are not known for the file.
	HasMinMax bool
	// Min and Max have the physical type's Go value: bool, int32, int64,
	// float32, float64 or []byte (strings and binaries, unsigned byte
	// order). Timestamps are int64 µs UTC.
	Min, Max any
}

// FileStats describe a written file, read from its footer.
type FileStats struct {
	// Records is the number of input records written (the rest go to the
	// next file); Rows the rows in the file.
	Records   int
	Rows      int64
	RowGroups int
	// SizeBytes is the exact file size.
	SizeBytes int64
	// PartitionValues maps each of PartitionColumns to its single value
	// in the file, as Delta writes partitionValues.
	PartitionValues map[string]string
	// Columns holds one entry per leaf column, in schema order.
	Columns []ColumnStats
}

// Column returns the stats of the leaf column at path, or nil.
func (s *FileStats) Column(path string) *ColumnStats {
	for i := range s.Columns {
		if s.Columns[i].Path == path {
			return &s.Columns[i]
		}
	}
	return nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// WriterProperties returns the Parquet writer properties WriteParquet uses:
// zstd everywhere, no statistics on BlobColumns, row groups capped in rows.
func (o WriteOptions) WriterProperties() *parquet.WriterProperties {
	o = o.withDefaults()
	props := []parquet.WriterProperty{
		parquet.WithAllocator(o.Allocator),
		parquet.WithCompression(compress.Codecs.Zstd),
		parquet.WithMaxRowGroupLength(o.RowGroupRows),
		parquet.WithCreatedBy("lakegate"),
		parquet.WithStats(true),
	}
	if o.ZstdLevel != 0 {
		props = append(props, parquet.WithCompressionLevel(o.ZstdLevel))
	}
	for _, c := range BlobColumns {
		props = append(props, parquet.WithStatsFor(c, false), parquet.WithDictionaryFor(c, false))
	}
	return parquet.NewWriterProperties(props...)
}

func (o WriteOptions) withDefaults() WriteOptions {
	if o.RowGroupBytes <= 0 {
		o.RowGroupBytes = defaultRowGroupBytes
	}
	if o.RowGroupRows <= 0 {
		o.RowGroupRows = defaultRowGroupRows
	}
	if o.MaxFileBytes <= 0 {
		o.MaxFileBytes = defaultMaxFileBytes
	}
	if o.Allocator == nil {
		o.Allocator = memory.DefaultAllocator
	}
	return o
}

// WriteParquet writes records (all of schema, from one RecordBuilder) as
// one Parquet file to w and returns its footer statistics. It stops taking
// records once the file reaches opts.MaxFileBytes; FileStats.Records says
// how many it wrote (at least one when any is given) and the caller writes
// the rest to a new file. All rows must share one (__partition,
// __publish_date) pair (ErrMixedPartitions). An empty records slice writes
// a valid file with no rows.
func WriteParquet(w io.Writer, schema *arrow.Schema, records []arrow.RecordBatch, opts WriteOptions) (FileStats, error) {
	opts = opts.withDefaults()
	cw := &countingWriter{w: w}
	arrProps := pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema(), pqarrow.WithAllocator(opts.Allocator))
	fw, err := pqarrow.NewFileWriter(schema, cw, opts.WriterProperties(), arrProps)
	if err != nil {
		return FileStats{}, fmt.Errorf("lakehouse: parquet writer: %w", err)
	}
	var part partitionCheck
	written := 0
	var rgBytes int64
	cut := false // start a new row group before the next record
	for _, rec := range records {
		if written > 0 && fw.TotalCompressedBytes()+rgBytes >= opts.MaxFileBytes {
			break
		}
		if err := part.check(rec); err != nil {
			fw.Close()
			return FileStats{}, err
		}
		if cut {
			fw.NewBufferedRowGroup()
			cut, rgBytes = false, 0
		}
		if err := fw.WriteBuffered(rec); err != nil {
			fw.Close()
			return FileStats{}, fmt.Errorf("lakehouse: writing parquet: %w", err)
		}
		written++
		rgBytes += recordBytes(rec)
		cut = rgBytes >= opts.RowGroupBytes
	}
	if err := fw.Close(); err != nil {
		return FileStats{}, fmt.Errorf("lakehouse: closing parquet: %w", err)
	}
	md, err := fw.FileMetadata()
	if err != nil {
		return FileStats{}, fmt.Errorf("lakehouse: parquet footer: %w", err)
	}
	st, err := FooterStats(md)
	if err != nil {
		return FileStats{}, err
	}
	st.Records = written
	st.SizeBytes = cw.n
	st.PartitionValues = part.values()
	return st, nil
}

// partitionCheck enforces one (__partition, __publish_date) pair per file.
type partitionCheck struct {
	set       bool
	partition int32
	date      string
}

func (p *partitionCheck) check(rec arrow.RecordBatch) error {
	pc, dc := columnByName(rec, ColPartition), columnByName(rec, ColPublishDate)
	parts, ok1 := pc.(*array.Int32)
	dates, ok2 := dc.(*array.String)
	if !ok1 || !ok2 {
		return fmt.Errorf("%w: record has no %s/%s columns", ErrNotMessageTable, ColPartition, ColPublishDate)
	}
	for i := 0; i < int(rec.NumRows()); i++ {
		if !p.set {
			p.set, p.partition, p.date = true, parts.Value(i), dates.Value(i)
			continue
		}
		if parts.Value(i) != p.partition || dates.Value(i) != p.date {
			return fmt.Errorf("%w: (%d, %s) and (%d, %s)", ErrMixedPartitions, p.partition, p.date, parts.Value(i), dates.Value(i))
		}
	}
	return nil
}

func (p *partitionCheck) values() map[string]string {
	if !p.set {
		return nil
	}
	return map[string]string{ColPartition: strconv.Itoa(int(p.partition)), ColPublishDate: p.date}
}

func columnByName(rec arrow.RecordBatch, name string) arrow.Array {
	idx := rec.Schema().FieldIndices(name)
	if len(idx) != 1 {
		return nil
	}
	return rec.Column(idx[0])
}

// FooterStats merges a Parquet footer's column chunk statistics over its
// row groups (rows, row groups and per-leaf-column stats; not Records,
// SizeBytes or PartitionValues).
func FooterStats(md *metadata.FileMetaData) (FileStats, error) {
	st := FileStats{Rows: md.NumRows, RowGroups: md.NumRowGroups()}
	for c := 0; c < md.NumColumns(); c++ {
		col := md.Schema.Column(c)
		cs := ColumnStats{Path: col.Path(), FieldID: col.SchemaNode().FieldID(), HasMinMax: md.NumRowGroups() > 0}
		for g := 0; g < md.NumRowGroups(); g++ {
			ch, err := md.RowGroup(g).ColumnChunk(c)
			if err != nil {
				return FileStats{}, fmt.Errorf("lakehouse: parquet footer: %w", err)
			}
			cs.ValueCount += ch.NumValues()
			cs.CompressedBytes += ch.TotalCompressedSize()
			cs.UncompressedBytes += ch.TotalUncompressedSize()
			set, _ := ch.StatsSet()
			if !set {
				cs.HasMinMax = false
				continue
			}
			ts, err := ch.Statistics()
			if err != nil || ts == nil {
				cs.HasMinMax = false
				continue
			}
			cs.NullCount += ts.NullCount()
			if !ts.HasMinMax() {
				if ts.NullCount() < ch.NumValues() {
					cs.HasMinMax = false
				}
				continue
			}
			lo, hi := statMinMax(ts)
			if lo == nil {
				cs.HasMinMax = false
				continue
			}
			if cs.Min == nil || lessStat(lo, cs.Min) {
				cs.Min = lo
			}
			if cs.Max == nil || lessStat(cs.Max, hi) {
				cs.Max = hi
			}
		}
		if cs.Min == nil {
			cs.HasMinMax = false
		}
		if !cs.HasMinMax {
			cs.Min, cs.Max = nil, nil
		}
		st.Columns = append(st.Columns, cs)
	}
	return st, nil
}

func statMinMax(ts metadata.TypedStatistics) (lo, hi any) {
	switch s := ts.(type) {
	case *metadata.BooleanStatistics:
		return s.Min(), s.Max()
	case *metadata.Int32Statistics:
		return s.Min(), s.Max()
	case *metadata.Int64Statistics:
		return s.Min(), s.Max()
	case *metadata.Float32Statistics:
		return s.Min(), s.Max()
	case *metadata.Float64Statistics:
		return s.Min(), s.Max()
	case *metadata.ByteArrayStatistics:
		return bytes.Clone(s.Min()), bytes.Clone(s.Max())
	}
	return nil, nil
}

func lessStat(a, b any) bool {
	switch a := a.(type) {
	case bool:
		return !a && b.(bool)
	case int32:
		return a < b.(int32)
	case int64:
		return a < b.(int64)
	case float32:
		return a < b.(float32)
	case float64:
		return a < b.(float64)
	case []byte:
		return bytes.Compare(a, b.([]byte)) < 0
	}
	return false
}

// ReadParquet reads a message-table file back into rows, in file order,
// ignoring typed columns. The returned Messages own their bytes.
func ReadParquet(ctx context.Context, r parquet.ReaderAtSeeker, mem memory.Allocator) ([]Message, error) {
	return ReadParquetRowGroups(ctx, r, mem, nil, nil)
}

// ReadParquetRowGroups is ReadParquet of the row groups rowGroups only (nil:
// all), with the file's footer md when the caller has parsed it already
// (nil: read from r). r need only serve the byte ranges of those row groups
// (and of the footer when md is nil).
func ReadParquetRowGroups(ctx context.Context, r parquet.ReaderAtSeeker, mem memory.Allocator, md *metadata.FileMetaData, rowGroups []int) ([]Message, error) {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	opts := []file.ReadOption{file.WithReadProps(parquet.NewReaderProperties(mem))}
	if md != nil {
		opts = append(opts, file.WithMetadata(md))
	}
	pf, err := file.NewParquetReader(r, opts...)
	if err != nil {
		return nil, fmt.Errorf("lakehouse: opening parquet: %w", err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 64 << 10}, mem)
	if err != nil {
		return nil, fmt.Errorf("lakehouse: opening parquet: %w", err)
	}
	rr, err := fr.GetRecordReader(ctx, nil, rowGroups)
	if err != nil {
		return nil, fmt.Errorf("lakehouse: reading parquet: %w", err)
	}
	defer rr.Release()
	var out []Message
	for rr.Next() {
		msgs, err := MessagesFromRecord(rr.RecordBatch(), true)
		if err != nil {
			return nil, err
		}
		out = append(out, msgs...)
	}
	if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("lakehouse: reading parquet: %w", err)
	}
	return out, nil
}

// MessagesFromRecord converts the system columns of a message-table record
// back into Messages. With copyBytes false the byte slices alias the
// record's buffers (valid while the record is). Typed columns are ignored.
func MessagesFromRecord(rec arrow.RecordBatch, copyBytes bool) ([]Message, error) {
	cols := make([]arrow.Array, len(systemFields))
	for i, f := range systemFields {
		c := columnByName(rec, f.Name)
		if c == nil || !arrow.TypeEqual(c.DataType(), f.Type) {
			return nil, fmt.Errorf("%w: column %s missing or not %s", ErrNotMessageTable, f.Name, f.Type)
		}
		cols[i] = c
	}
	var (
		offset     = cols[0].(*array.Int64)
		partition  = cols[1].(*array.Int32)
		ledger     = cols[3].(*array.Int64)
		entry      = cols[4].(*array.Int64)
		batchIndex = cols[5].(*array.Int32)
		batchSize  = cols[6].(*array.Int32)
		key        = cols[7].(*array.String)
		keyB64     = cols[8].(*array.Boolean)
		ordering   = cols[9].(*array.Binary)
		payload    = cols[10].(*array.Binary)
		nullValue  = cols[11].(*array.Boolean)
		props      = cols[12].(*array.Map)
		propKeys   = props.Keys().(*array.String)
		propVals   = props.Items().(*array.String)
		publish    = cols[13].(*array.Timestamp)
		event      = cols[14].(*array.Timestamp)
		producer   = cols[15].(*array.String)
		seq        = cols[16].(*array.Int64)
		schemaVer  = cols[17].(*array.Binary)
		replFrom   = cols[18].(*array.String)
		nullKey    = cols[19].(*array.Boolean)
		codec      = cols[20].(*array.String)
		uncompSize = cols[21].(*array.Int64)
		opaque     = cols[22].(*array.Boolean)
		chunkUUID  = cols[23].(*array.String)
		chunkID    = cols[24].(*array.Int32)
		numChunks  = cols[25].(*array.Int32)
		chunkSize  = cols[26].(*array.Int32)
		entryMeta  = cols[27].(*array.Binary)
		msgMeta    = cols[28].(*array.Binary)
		entryPay   = cols[29].(*array.Binary)
	)
	blob := func(a *array.Binary, i int) []byte {
		if a.IsNull(i) {
			return nil
		}
		v := a.Value(i)
		if copyBytes || v == nil {
			return append([]byte{}, v...)
		}
		return v
	}
	str := func(a *array.String, i int) *string {
		if a.IsNull(i) {
			return nil
		}
		s := a.Value(i)
		if copyBytes {
			s = string([]byte(s))
		}
		return &s
	}
	n := int(rec.NumRows())
	out := make([]Message, n)
	for i := range n {
		ct, err := compressionValue(codec.Value(i))
		if err != nil {
			return nil, fmt.Errorf("%w: row %d: %v", ErrNotMessageTable, i, err)
		}
		m := Message{
			Offset:           offset.Value(i),
			Partition:        partition.Value(i),
			LedgerID:         ledger.Value(i),
			EntryID:          entry.Value(i),
			BatchIndex:       batchIndex.Value(i),
			BatchSize:        batchSize.Value(i),
			Key:              str(key, i),
			KeyIsBase64:      keyB64.Value(i),
			NullKey:          nullKey.Value(i),
			OrderingKey:      blob(ordering, i),
			Payload:          blob(payload, i),
			NullValue:        nullValue.Value(i),
			PublishTimeMs:    int64(publish.Value(i)) / 1000,
			ProducerName:     *str(producer, i),
			SequenceID:       seq.Value(i),
			SchemaVersion:    blob(schemaVer, i),
			ReplicatedFrom:   str(replFrom, i),
			Compression:      ct,
			UncompressedSize: uncompSize.Value(i),
			Opaque:           opaque.Value(i),
			EntryMetadata:    blob(entryMeta, i),
			MessageMetadata:  blob(msgMeta, i),
			EntryPayload:     blob(entryPay, i),
		}
		if event.IsValid(i) {
			m.EventTimeMs = int64(event.Value(i)) / 1000
		}
		if chunkUUID.IsValid(i) || chunkID.IsValid(i) || numChunks.IsValid(i) || chunkSize.IsValid(i) {
			m.Chunk = &Chunk{UUID: *orEmpty(str(chunkUUID, i)), ChunkID: chunkID.Value(i), NumChunks: numChunks.Value(i), TotalSize: chunkSize.Value(i)}
		}
		if props.IsValid(i) {
			lo, hi := props.ValueOffsets(i)
			if hi > lo {
				m.Properties = make([]Property, 0, hi-lo)
				for j := int(lo); j < int(hi); j++ {
					p := Property{Key: propKeys.Value(j), Value: propVals.Value(j)}
					if copyBytes {
						p.Key, p.Value = string([]byte(p.Key)), string([]byte(p.Value))
					}
					m.Properties = append(m.Properties, p)
				}
			}
		}
		out[i] = m
	}
	return out, nil
}

func orEmpty(s *string) *string {
	if s == nil {
		return new(string)
	}
	return s
}

// recordBytes is the size of a record's Arrow buffers.
func recordBytes(rec arrow.RecordBatch) int64 {
	var n int64
	for _, c := range rec.Columns() {
		n += dataBytes(c.Data())
	}
	return n
}

func dataBytes(d arrow.ArrayData) int64 {
	var n int64
	for _, b := range d.Buffers() {
		if b != nil {
			n += int64(b.Len())
		}
	}
	for _, c := range d.Children() {
		n += dataBytes(c)
	}
	return n
}
