package lakehouse

import (
	"fmt"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lakegate/lakegate/protocol/pb"
)

// FieldIDKey is the Arrow field metadata key that pqarrow writes as the
// Parquet field id.
const FieldIDKey = "PARQUET:field_id"

// System column names (docs/table-schema.md).
const (
	ColOffset           = "__offset"
	ColPartition        = "__partition"
	ColPublishDate      = "__publish_date"
	ColLedgerID         = "__ledger_id"
	ColEntryID          = "__entry_id"
	ColBatchIndex       = "__batch_idx" // not __batch_index: pyarrow's dataset scanner reserves that name
	ColBatchSize        = "__batch_size"
	ColKey              = "__key"
	ColKeyIsBase64      = "__key_is_base64"
	ColOrderingKey      = "__ordering_key"
	ColPayload          = "__payload"
	ColNullValue        = "__null_value"
	ColProperties       = "__properties"
	ColPublishTime      = "__publish_time"
	ColEventTime        = "__event_time"
	ColProducerName     = "__producer_name"
	ColSequenceID       = "__sequence_id"
	ColSchemaVersion    = "__schema_version"
	ColReplicatedFrom   = "__replicated_from"
	ColNullKey          = "__null_key"
	ColCompression      = "__compression"
	ColUncompressedSize = "__uncompressed_size"
	ColOpaque           = "__opaque"
	ColChunkUUID        = "__chunk_uuid"
	ColChunkID          = "__chunk_id"
	ColNumChunks        = "__num_chunks"
	ColTotalChunkSize   = "__total_chunk_size"
	ColEntryMetadata    = "__entry_metadata"
	ColMessageMetadata  = "__message_metadata"
	ColEntryPayload     = "__entry_payload"
)

// Field ids of the properties map's key and value.
const (
	PropertiesKeyFieldID   = 101
	PropertiesValueFieldID = 102
)

// PartitionColumns are the Delta partition columns, in order.
var PartitionColumns = []string{ColPartition, ColPublishDate}

// BlobColumns are the columns written without Parquet statistics.
var BlobColumns = []string{ColPayload, ColEntryMetadata, ColMessageMetadata, ColEntryPayload}

// TimestampUTC is the type of every timestamp column.
var TimestampUTC = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}

func fieldID(id int32) arrow.Metadata {
	return arrow.NewMetadata([]string{FieldIDKey}, []string{strconv.Itoa(int(id))})
}

func sysField(name string, id int32, t arrow.DataType, nullable bool) arrow.Field {
	return arrow.Field{Name: name, Type: t, Nullable: nullable, Metadata: fieldID(id)}
}

// systemFields is the system part of the schema, in column order. The
// column order is also the order RecordBuilder fills builders in.
var systemFields = []arrow.Field{
	sysField(ColOffset, 1, arrow.PrimitiveTypes.Int64, false),
	sysField(ColPartition, 2, arrow.PrimitiveTypes.Int32, false),
	sysField(ColPublishDate, 3, arrow.BinaryTypes.String, false),
	sysField(ColLedgerID, 4, arrow.PrimitiveTypes.Int64, false),
	sysField(ColEntryID, 5, arrow.PrimitiveTypes.Int64, false),
	sysField(ColBatchIndex, 6, arrow.PrimitiveTypes.Int32, false),
	sysField(ColBatchSize, 7, arrow.PrimitiveTypes.Int32, false),
	sysField(ColKey, 8, arrow.BinaryTypes.String, true),
	sysField(ColKeyIsBase64, 9, arrow.FixedWidthTypes.Boolean, false),
	sysField(ColOrderingKey, 10, arrow.BinaryTypes.Binary, true),
	sysField(ColPayload, 11, arrow.BinaryTypes.Binary, false),
	sysField(ColNullValue, 12, arrow.FixedWidthTypes.Boolean, false),
	sysField(ColProperties, 13, arrow.MapOfFields(
		arrow.Field{Name: "key", Type: arrow.BinaryTypes.String, Metadata: fieldID(PropertiesKeyFieldID)},
		arrow.Field{Name: "value", Type: arrow.BinaryTypes.String, Metadata: fieldID(PropertiesValueFieldID)},
	), false),
	sysField(ColPublishTime, 14, TimestampUTC, false),
	sysField(ColEventTime, 15, TimestampUTC, true),
	sysField(ColProducerName, 16, arrow.BinaryTypes.String, false),
	sysField(ColSequenceID, 17, arrow.PrimitiveTypes.Int64, false),
	sysField(ColSchemaVersion, 18, arrow.BinaryTypes.Binary, true),
	sysField(ColReplicatedFrom, 19, arrow.BinaryTypes.String, true),
	sysField(ColNullKey, 20, arrow.FixedWidthTypes.Boolean, false),
	sysField(ColCompression, 21, arrow.BinaryTypes.String, false),
	sysField(ColUncompressedSize, 22, arrow.PrimitiveTypes.Int64, false),
	sysField(ColOpaque, 23, arrow.FixedWidthTypes.Boolean, false),
	sysField(ColChunkUUID, 24, arrow.BinaryTypes.String, true),
	sysField(ColChunkID, 25, arrow.PrimitiveTypes.Int32, true),
	sysField(ColNumChunks, 26, arrow.PrimitiveTypes.Int32, true),
	sysField(ColTotalChunkSize, 27, arrow.PrimitiveTypes.Int32, true),
	sysField(ColEntryMetadata, 30, arrow.BinaryTypes.Binary, true),
	sysField(ColMessageMetadata, 31, arrow.BinaryTypes.Binary, true),
	sysField(ColEntryPayload, 32, arrow.BinaryTypes.Binary, true),
}

// Schema returns the table's Arrow schema: the system columns, then one
// nullable column per typed field (none when typed is nil). Every field
// carries its Parquet field id in its metadata (FieldIDKey).
func Schema(typed *TypedSchema) *arrow.Schema {
	fields := append([]arrow.Field(nil), systemFields...)
	if typed != nil {
		for _, f := range typed.Fields {
			fields = append(fields, typedArrowField(f))
		}
	}
	return arrow.NewSchema(fields, nil)
}

// typedArrowField is the Arrow field of a typed column or nested field:
// nullable (a map key excepted), with its field id, and for nested types
// the fields of its children.
func typedArrowField(f TypedField) arrow.Field {
	af := arrow.Field{Name: f.Name, Nullable: true, Metadata: fieldID(f.ID)}
	switch f.Type {
	case TypeStruct:
		cs := make([]arrow.Field, len(f.Children))
		for i, c := range f.Children {
			cs[i] = typedArrowField(c)
		}
		af.Type = arrow.StructOf(cs...)
	case TypeList:
		af.Type = arrow.ListOfField(typedArrowField(f.Children[0]))
	case TypeMap:
		k := typedArrowField(f.Children[0])
		k.Nullable = false
		af.Type = arrow.MapOfFields(k, typedArrowField(f.Children[1]))
	default:
		af.Type = arrowType(f.Type)
	}
	return af
}

func arrowType(t ValueType) arrow.DataType {
	switch t {
	case TypeString, TypeJSON:
		return arrow.BinaryTypes.String
	case TypeInt8:
		return arrow.PrimitiveTypes.Int8
	case TypeInt16:
		return arrow.PrimitiveTypes.Int16
	case TypeInt32:
		return arrow.PrimitiveTypes.Int32
	case TypeInt64:
		return arrow.PrimitiveTypes.Int64
	case TypeFloat32:
		return arrow.PrimitiveTypes.Float32
	case TypeFloat64:
		return arrow.PrimitiveTypes.Float64
	case TypeBool:
		return arrow.FixedWidthTypes.Boolean
	case TypeTimestamp:
		return TimestampUTC
	case TypeDate:
		return arrow.FixedWidthTypes.Date32
	}
	return arrow.BinaryTypes.Binary
}

// PublishDate is the __publish_date value of a publish time (Unix ms).
func PublishDate(publishTimeMs int64) string {
	return time.UnixMilli(publishTimeMs).UTC().Format(time.DateOnly)
}

// RecordLimits bound the records a RecordBuilder emits.
type RecordLimits struct {
	// MaxRows per record; default 65 536.
	MaxRows int
	// MaxBytes per record, estimated from the appended values; default
	// 64 MiB. A single message larger than this still makes one record.
	MaxBytes int64
}

const (
	defaultRecordRows  = 64 << 10
	defaultRecordBytes = 64 << 20
	// rowOverheadBytes approximates the fixed-width columns of one row.
	rowOverheadBytes = 96
)

// RecordBuilder appends Messages and emits Arrow records bounded by
// RecordLimits. Not safe for concurrent use. Release it when done.
type RecordBuilder struct {
	typed  *TypedSchema
	schema *arrow.Schema
	b      *array.RecordBuilder
	limits RecordLimits
	rows   int
	bytes  int64
	values []any
}

// NewRecordBuilder returns a builder for Schema(typed). mem may be nil
// (memory.DefaultAllocator).
func NewRecordBuilder(mem memory.Allocator, typed *TypedSchema, limits RecordLimits) *RecordBuilder {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	if limits.MaxRows <= 0 {
		limits.MaxRows = defaultRecordRows
	}
	if limits.MaxBytes <= 0 {
		limits.MaxBytes = defaultRecordBytes
	}
	s := Schema(typed)
	rb := &RecordBuilder{typed: typed, schema: s, b: array.NewRecordBuilder(mem, s), limits: limits}
	if typed != nil {
		rb.values = make([]any, len(typed.Fields))
	}
	return rb
}

// Schema returns the schema of the emitted records.
func (rb *RecordBuilder) Schema() *arrow.Schema { return rb.schema }

// Rows is the number of rows appended since the last NewRecord.
func (rb *RecordBuilder) Rows() int { return rb.rows }

// Bytes is the estimated size of the rows appended since the last NewRecord.
func (rb *RecordBuilder) Bytes() int64 { return rb.bytes }

// Full reports whether a limit is reached: call NewRecord before appending more.
func (rb *RecordBuilder) Full() bool {
	return rb.rows >= rb.limits.MaxRows || rb.bytes >= rb.limits.MaxBytes
}

// Release frees the builder's buffers.
func (rb *RecordBuilder) Release() { rb.b.Release() }

// NewRecord returns the rows appended so far as one record (nil when there
// are none) and resets the builder. The caller releases the record.
func (rb *RecordBuilder) NewRecord() arrow.RecordBatch {
	if rb.rows == 0 {
		return nil
	}
	rb.rows, rb.bytes = 0, 0
	return rb.b.NewRecordBatch()
}

// Append adds one message as a row. It does not check the limits; callers
// check Full (or use AppendAll).
func (rb *RecordBuilder) Append(m *Message) {
	f := rb.b.Fields()
	f[0].(*array.Int64Builder).Append(m.Offset)
	f[1].(*array.Int32Builder).Append(m.Partition)
	f[2].(*array.StringBuilder).Append(PublishDate(m.PublishTimeMs))
	f[3].(*array.Int64Builder).Append(m.LedgerID)
	f[4].(*array.Int64Builder).Append(m.EntryID)
	f[5].(*array.Int32Builder).Append(m.BatchIndex)
	f[6].(*array.Int32Builder).Append(m.BatchSize)
	appendOptString(f[7].(*array.StringBuilder), m.Key)
	f[8].(*array.BooleanBuilder).Append(m.KeyIsBase64)
	appendOptBytes(f[9].(*array.BinaryBuilder), m.OrderingKey)
	f[10].(*array.BinaryBuilder).Append(nonNil(m.Payload))
	f[11].(*array.BooleanBuilder).Append(m.NullValue)
	mb := f[12].(*array.MapBuilder)
	mb.Append(true)
	kb, vb := mb.KeyBuilder().(*array.StringBuilder), mb.ItemBuilder().(*array.StringBuilder)
	size := int64(rowOverheadBytes + len(m.Payload) + len(m.OrderingKey) + len(m.ProducerName) +
		len(m.SchemaVersion) + len(m.EntryMetadata) + len(m.MessageMetadata) + len(m.EntryPayload))
	for _, p := range m.Properties {
		kb.Append(p.Key)
		vb.Append(p.Value)
		size += int64(len(p.Key) + len(p.Value) + 8)
	}
	f[13].(*array.TimestampBuilder).Append(arrow.Timestamp(m.PublishTimeMs * 1000))
	if m.EventTimeMs != 0 {
		f[14].(*array.TimestampBuilder).Append(arrow.Timestamp(m.EventTimeMs * 1000))
	} else {
		f[14].AppendNull()
	}
	f[15].(*array.StringBuilder).Append(m.ProducerName)
	f[16].(*array.Int64Builder).Append(m.SequenceID)
	appendOptBytes(f[17].(*array.BinaryBuilder), m.SchemaVersion)
	appendOptString(f[18].(*array.StringBuilder), m.ReplicatedFrom)
	f[19].(*array.BooleanBuilder).Append(m.NullKey)
	f[20].(*array.StringBuilder).Append(compressionName(m.Compression))
	f[21].(*array.Int64Builder).Append(m.UncompressedSize)
	f[22].(*array.BooleanBuilder).Append(m.Opaque)
	if c := m.Chunk; c != nil {
		f[23].(*array.StringBuilder).Append(c.UUID)
		f[24].(*array.Int32Builder).Append(c.ChunkID)
		f[25].(*array.Int32Builder).Append(c.NumChunks)
		f[26].(*array.Int32Builder).Append(c.TotalSize)
	} else {
		for _, b := range f[23:27] {
			b.AppendNull()
		}
	}
	appendOptBytes(f[27].(*array.BinaryBuilder), m.EntryMetadata)
	appendOptBytes(f[28].(*array.BinaryBuilder), m.MessageMetadata)
	appendOptBytes(f[29].(*array.BinaryBuilder), m.EntryPayload)
	if m.Key != nil {
		size += int64(len(*m.Key))
	}

	if rb.typed != nil {
		typedCols := f[len(systemFields):]
		if m.Opaque || m.NullValue {
			clear(rb.values)
		} else {
			rb.typed.decodeValues(m.Payload, m.SchemaVersion, rb.values)
		}
		for i, v := range rb.values {
			size += appendTyped(typedCols[i], v)
		}
	}
	rb.rows++
	rb.bytes += size
}

// AppendAll appends msgs, emitting a record each time a limit is reached,
// and returns the records (the last one holds the remainder). The caller
// releases them.
func (rb *RecordBuilder) AppendAll(msgs []Message) []arrow.RecordBatch {
	var out []arrow.RecordBatch
	for i := range msgs {
		rb.Append(&msgs[i])
		if rb.Full() {
			out = append(out, rb.NewRecord())
		}
	}
	if r := rb.NewRecord(); r != nil {
		out = append(out, r)
	}
	return out
}

func appendOptString(b *array.StringBuilder, s *string) {
	if s == nil {
		b.AppendNull()
		return
	}
	b.Append(*s)
}

func appendOptBytes(b *array.BinaryBuilder, v []byte) {
	if v == nil {
		b.AppendNull()
		return
	}
	b.Append(v)
}

// nonNil makes an empty payload a valid (non-null) empty value.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// appendTyped appends one decoded value (nil = null) and returns its size.
func appendTyped(b array.Builder, v any) int64 {
	if v == nil {
		b.AppendNull()
		return 1
	}
	switch b := b.(type) {
	case *array.StringBuilder:
		s := v.(string)
		b.Append(s)
		return int64(len(s))
	case *array.BinaryBuilder:
		p := v.([]byte)
		b.Append(p)
		return int64(len(p))
	case *array.Int8Builder:
		b.Append(v.(int8))
	case *array.Int16Builder:
		b.Append(v.(int16))
	case *array.Int32Builder:
		b.Append(v.(int32))
	case *array.Int64Builder:
		b.Append(v.(int64))
	case *array.Float32Builder:
		b.Append(v.(float32))
	case *array.Float64Builder:
		b.Append(v.(float64))
	case *array.BooleanBuilder:
		b.Append(v.(bool))
	case *array.TimestampBuilder:
		b.Append(arrow.Timestamp(v.(int64)))
	case *array.Date32Builder:
		b.Append(arrow.Date32(v.(int32)))
	case *array.StructBuilder:
		sv := v.(structValue)
		b.Append(true)
		n := int64(1)
		for i := range b.NumField() {
			n += appendTyped(b.FieldBuilder(i), sv[i])
		}
		return n
	case *array.MapBuilder:
		mv := v.(mapValue)
		b.Append(true)
		kb, ib := b.KeyBuilder().(*array.StringBuilder), b.ItemBuilder()
		n := int64(4)
		for _, e := range mv {
			kb.Append(e.key)
			n += int64(len(e.key)) + appendTyped(ib, e.value)
		}
		return n
	case *array.ListBuilder:
		lv := v.(listValue)
		b.Append(true)
		n := int64(4)
		for _, e := range lv {
			n += appendTyped(b.ValueBuilder(), e)
		}
		return n
	default:
		panic(fmt.Sprintf("lakehouse: no typed append for %T", b)) // schema and decoder disagree: a bug
	}
	return 8
}

func compressionName(c pb.CompressionType) string {
	if s, ok := pb.CompressionType_name[int32(c)]; ok {
		return s
	}
	return strconv.Itoa(int(c))
}

func compressionValue(s string) (pb.CompressionType, error) {
	if v, ok := pb.CompressionType_value[s]; ok {
		return pb.CompressionType(v), nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("unknown compression %q", s)
	}
	return pb.CompressionType(n), nil
}
