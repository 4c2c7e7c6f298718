package lakestream

import (
	"context"
	"fmt"
	"strings"
)

// StreamIdentifier names a stream: Namespace may itself contain a slash
// (Pulsar's "tenant/namespace"); Name does not.
type StreamIdentifier struct {
	Namespace string
	Name      string
}

// String returns "namespace/name".
func (id StreamIdentifier) String() string { return id.Namespace + "/" + id.Name }

// ParseStreamID splits "a/b/c" into namespace "a/b" and name "c".
func ParseStreamID(s string) (StreamIdentifier, error) {
	i := strings.LastIndexByte(s, '/')
	if i <= 0 || i == len(s)-1 {
		return StreamIdentifier{}, fmt.Errorf("%w: stream id %q is not namespace/name", ErrInvalidArgument, s)
	}
	return StreamIdentifier{Namespace: s[:i], Name: s[i+1:]}, nil
}

// MustParseStreamID is ParseStreamID that panics; for literals in tests and
// examples.
func MustParseStreamID(s string) StreamIdentifier {
	id, err := ParseStreamID(s)
	if err != nil {
		panic(err)
	}
	return id
}

// PartitionStrategy says how routing keys map to partitions.
type PartitionStrategy int

const (
	// PartitionIndexed: the writer names the partition index (or round-robin).
	PartitionIndexed PartitionStrategy = iota
	// PartitionRange: keys hash into contiguous ranges, one per partition.
	PartitionRange
)

// Partitioning is the partition layout of a stream. NumPartitions 0 means a
// non-partitioned stream (one log, Pulsar's partition -1).
type Partitioning struct {
	Strategy      PartitionStrategy
	NumPartitions int
}

// LogCount is the number of logs the partitioning needs (≥ 1).
func (p Partitioning) LogCount() int {
	if p.NumPartitions < 1 {
		return 1
	}
	return p.NumPartitions
}

// SchemaType is the type of a stream's values.
type SchemaType string

// Schema types: the Lakestream ones plus Pulsar's primitives.
const (
	SchemaNone      SchemaType = "NONE"
	SchemaAvro      SchemaType = "AVRO"
	SchemaJSON      SchemaType = "JSON"
	SchemaProtobuf  SchemaType = "PROTOBUF"
	SchemaString    SchemaType = "STRING"
	SchemaBytes     SchemaType = "BYTES"
	SchemaBoolean   SchemaType = "BOOLEAN"
	SchemaInt8      SchemaType = "INT8"
	SchemaInt16     SchemaType = "INT16"
	SchemaInt32     SchemaType = "INT32"
	SchemaInt64     SchemaType = "INT64"
	SchemaFloat     SchemaType = "FLOAT"
	SchemaDouble    SchemaType = "DOUBLE"
	SchemaKeyValue  SchemaType = "KEY_VALUE"
	SchemaTimestamp SchemaType = "TIMESTAMP"
)

// SchemaConfig is a stream's value schema. Definition is the schema text
// (Avro/JSON schema JSON); Properties are free-form.
type SchemaConfig struct {
	Type       SchemaType
	Definition []byte
	Properties map[string]string
}

// StreamConfig holds stream settings as properties (retention etc.).
type StreamConfig struct {
	Properties map[string]string
}

// StreamState is the lifecycle state of a stream.
type StreamState string

// Stream states.
const (
	StreamCreating   StreamState = "CREATING"
	StreamActive     StreamState = "ACTIVE"
	StreamSealed     StreamState = "SEALED"
	StreamTruncating StreamState = "TRUNCATING"
	StreamDeleting   StreamState = "DELETING"
)

// StreamMetadata is a stream's catalog record.
type StreamMetadata struct {
	ID              StreamIdentifier
	Config          StreamConfig
	Partitioning    Partitioning
	Schema          SchemaConfig
	Properties      map[string]string
	Materialization *TableMaterializationPolicy
	State           StreamState
	// LogIDs are the partitions' logs in partition order.
	LogIDs []LogID
	// MetadataVersion increases with every change (optimistic concurrency).
	MetadataVersion int64
	CreatedAtMs     int64
}

// Namespace is a namespace's catalog record.
type Namespace struct {
	Name            string
	Properties      map[string]string
	Materialization *TableMaterializationPolicy
}

// TableFormat is the format of a table catalog.
type TableFormat string

// Table formats.
const (
	TableIceberg TableFormat = "ICEBERG"
	TableDelta   TableFormat = "DELTA"
)

// TableCatalog is a registered table catalog: where tables of a format go.
type TableCatalog struct {
	Name string
	Type TableFormat
	// Connection is the catalog URI (e.g. an Iceberg REST endpoint or
	// "sql+sqlite:///path"; for Delta the table root URI).
	Connection string
	Properties map[string]string
}

// WriteMode is how records become table rows.
type WriteMode string

// Write modes.
const (
	WriteAppend WriteMode = "APPEND"
	WriteUpsert WriteMode = "UPSERT"
	WriteCDC    WriteMode = "CDC"
)

// TableMaterializationPolicy is the optional-field policy that says whether
// and how a stream becomes tables. Nil fields inherit (stream → namespace →
// cluster default) in ResolveMaterialization.
type TableMaterializationPolicy struct {
	Enabled *bool
	// Catalogs names the table catalogs to commit to (e.g. both a Delta and
	// an Iceberg one: same Parquet files).
	Catalogs []string
	// TableNameTemplate, e.g. "${stream.namespace}/${stream.name}".
	TableNameTemplate *string
	WriteMode         *WriteMode
	// StartPosition: "earliest" or "latest".
	StartPosition *string
	// DeadLetterStream receives records that cannot be materialized.
	DeadLetterStream *string
	// CommitIntervalMs bounds table freshness (commit batching).
	CommitIntervalMs *int64
	// PartitionSpec lists partition columns; "__partition" is the magic
	// column of the stream partition.
	PartitionSpec []string
	SortOrder     []string
	// RetentionMs: table data files whose newest row was published more
	// than this long ago are removed from the tables, and the stream is
	// trimmed behind them (docs/compaction.md, "Table retention"). 0 or
	// nil: no time limit (0 overrides an inherited limit).
	RetentionMs *int64
	// RetentionBytes: while the tables' live data files add up to more
	// than this, the oldest are removed (never the newest one), and the
	// stream trimmed behind them. 0 or nil: no size limit.
	RetentionBytes *int64
	// TargetFileSizeBytes bounds Parquet files.
	TargetFileSizeBytes *int64
	Compression         *string
	AllowAddColumns     *bool
	AllowWidenTypes     *bool
}

// RoutingKey picks the partition of a write: when Explicit, Partition names
// it; else a non-empty Key hashes; else round-robin. The zero value is
// round-robin.
type RoutingKey struct {
	Key       string
	Partition int
	Explicit  bool
}

// ToPartition routes a write to partition i.
func ToPartition(i int) RoutingKey { return RoutingKey{Partition: i, Explicit: true} }

// ByKey routes a write by the hash of key.
func ByKey(key string) RoutingKey { return RoutingKey{Key: key} }

// WriteResult is where a write landed.
type WriteResult struct {
	LogID     LogID
	Partition int
	Header    EntryHeader
}

// ReadResult is the answer of StreamReader.Read.
type ReadResult struct {
	Entries    []Entry
	NextOffset int64
}

// StreamLayout maps routing keys to logs.
type StreamLayout interface {
	Partitioning() Partitioning
	LogIDs() []LogID
	LogCount() int
	// ResolveForWrite returns the partition index for a key.
	ResolveForWrite(k RoutingKey) int
}

// StreamWriter appends to a stream. Safe for concurrent use.
type StreamWriter interface {
	Write(ctx context.Context, k RoutingKey, records int, payload []byte, opts ...AppendOption) (WriteResult, error)
	// Append is Write under the seed example's name.
	Append(ctx context.Context, k RoutingKey, records int, payload []byte, opts ...AppendOption) (WriteResult, error)
}

// StreamReader reads a stream's logs. Safe for concurrent use.
type StreamReader interface {
	Read(ctx context.Context, log LogID, start int64, maxRecords int, maxBytes int64) (ReadResult, error)
}

// Table is the table view of a stream: the same records, as rows.
type Table interface {
	// Scan returns every committed row as Arrow-encoded record batches
	// (Arrow IPC stream bytes, one element per batch), oldest first.
	// ErrNotMaterialized until the lakehouse layer has committed rows.
	Scan(ctx context.Context) ([][]byte, error)
	// Info describes the stream's tables: where they are, their versions,
	// row counts and how far behind the logs they are. ErrNotMaterialized
	// when no table has been committed yet.
	Info(ctx context.Context) (TableInfo, error)
}

// TableInfo describes the tables of one stream.
type TableInfo struct {
	// Location is the table root URI, shared by every format (the Parquet
	// files under it are the same for all).
	Location string
	Formats  []TableFormatInfo
	// Partitions are the stream's logs with their compacted position.
	Partitions []TablePartitionInfo
	// LastRetention is the last table retention run of the stream's
	// tables, as its compaction owner recorded it; nil when none ran
	// (no retention policy yet, or no maintenance since it was set).
	LastRetention *TableRetentionRun
}

// TableRetentionRun is the outcome of one table retention run
// (docs/compaction.md, "Table retention").
type TableRetentionRun struct {
	// AtMs is when the run finished (Unix ms, the compaction owner's
	// clock).
	AtMs int64
	// RetentionMs and RetentionBytes are the policy the run applied
	// (0: no limit).
	RetentionMs, RetentionBytes int64
	// FilesRemoved and BytesRemoved are the data files the run removed
	// from the tables and their bytes.
	FilesRemoved int
	BytesRemoved int64
	// FilesHeld are the files the run would have removed but kept (a
	// durable subscription, an unfinished claim, an older file kept).
	FilesHeld int
	// LiveBytes is the live data files' total after the run.
	LiveBytes int64
}

// TableFormatInfo is one format's view of a stream's table.
type TableFormatInfo struct {
	Format TableFormat
	// URI locates this format's metadata (the Delta table root; the
	// Iceberg metadata file).
	URI string
	// Identifier is the catalog identifier ("" when the format has none).
	Identifier string
	// Version is the Delta version or the Iceberg snapshot id.
	Version int64
	// FormatVersion is the table-format protocol version (Delta
	// "reader/writer", Iceberg "2").
	FormatVersion string
	Rows          int64
	Files         int
	// LastCommitMs is the commit time of Version (Unix ms; 0 unknown).
	LastCommitMs int64
}

// TablePartitionInfo is how far one log of a stream is in its table.
type TablePartitionInfo struct {
	Partition int // -1: not partitioned
	Log       LogID
	// CompactedEnd is the offset just past the last record in the table.
	CompactedEnd int64
	// LogEnd is the offset just past the log's last record.
	LogEnd int64
}

// Stream is a handle on one stream.
type Stream interface {
	Metadata() StreamMetadata
	Layout() StreamLayout
	// Log returns partition i's log.
	Log(ctx context.Context, partition int) (Log, error)
	NewWriter() StreamWriter
	NewReader() StreamReader
	Table() Table
}

// StreamCatalog is level 2. Safe for concurrent use; every change is a
// linearizable metadata transaction. A caller that needs only a part takes
// one of its facets (TableCatalogs, Namespaces, StreamMetadataStore,
// StreamData).
type StreamCatalog interface {
	TableCatalogs
	Namespaces
	StreamMetadataStore
	StreamData

	Close() error
}

// TableCatalogs is the facet of a StreamCatalog that registers table
// catalogs.
type TableCatalogs interface {
	RegisterTableCatalog(ctx context.Context, c TableCatalog) error
	UnregisterTableCatalog(ctx context.Context, name string) error
	GetTableCatalog(ctx context.Context, name string) (TableCatalog, error)
	ListTableCatalogs(ctx context.Context) ([]TableCatalog, error)
}

// Namespaces is the facet of a StreamCatalog that keeps namespaces and the
// default materialization policy.
type Namespaces interface {
	CreateNamespace(ctx context.Context, name string, props map[string]string) (Namespace, error)
	ListNamespaces(ctx context.Context) ([]string, error)
	LoadNamespace(ctx context.Context, name string) (Namespace, error)
	// DropNamespace fails with ErrNamespaceNotEmpty while streams remain.
	DropNamespace(ctx context.Context, name string) error
	NamespaceExists(ctx context.Context, name string) (bool, error)
	SetNamespaceProperties(ctx context.Context, name string, set map[string]string) error
	RemoveNamespaceProperties(ctx context.Context, name string, keys []string) error
	SetNamespaceMaterialization(ctx context.Context, name string, p *TableMaterializationPolicy) error
	SetDefaultMaterialization(ctx context.Context, p *TableMaterializationPolicy) error
	DefaultMaterialization(ctx context.Context) (*TableMaterializationPolicy, error)
}

// StreamMetadataStore is the facet of a StreamCatalog that keeps streams'
// metadata: layout, properties, schema, materialization policy.
type StreamMetadataStore interface {
	ListStreams(ctx context.Context, namespace string) ([]StreamIdentifier, error)
	CreateStream(ctx context.Context, id StreamIdentifier, cfg StreamConfig, p Partitioning, schema SchemaConfig, props map[string]string, m *TableMaterializationPolicy) (StreamMetadata, error)
	LoadStream(ctx context.Context, id StreamIdentifier) (StreamMetadata, error)
	// IncreasePartitions grows the stream to target partitions; idempotent,
	// never shrinks (a smaller target is a no-op returning the metadata).
	IncreasePartitions(ctx context.Context, id StreamIdentifier, target int) (StreamMetadata, error)
	// ReplaceStreamProperties replaces the properties when the stream's
	// MetadataVersion equals sourceVersion; a stale version is a no-op that
	// returns the current metadata and false.
	ReplaceStreamProperties(ctx context.Context, id StreamIdentifier, props map[string]string, sourceVersion int64) (StreamMetadata, bool, error)
	SetStreamSchema(ctx context.Context, id StreamIdentifier, schema SchemaConfig) (StreamMetadata, error)
	SetStreamMaterialization(ctx context.Context, id StreamIdentifier, p *TableMaterializationPolicy) error
	// ResolveMaterialization merges stream over namespace over default.
	ResolveMaterialization(ctx context.Context, id StreamIdentifier) (TableMaterializationPolicy, error)
	// DropStream deletes the stream, leaving a tombstone; purge also deletes
	// its logs' data.
	DropStream(ctx context.Context, id StreamIdentifier, purge bool) error
	StreamExists(ctx context.Context, id StreamIdentifier) (bool, error)
}

// StreamData is the facet of a StreamCatalog that opens streams' data
// plane: their logs, writers, readers and tables.
type StreamData interface {
	Stream(ctx context.Context, id StreamIdentifier) (Stream, error)
	OpenLog(ctx context.Context, id StreamIdentifier, partition int) (Log, error)
	OpenWriter(ctx context.Context, id StreamIdentifier) (StreamWriter, error)
	OpenReader(ctx context.Context, id StreamIdentifier) (StreamReader, error)
	// Storage is the level-1 view of the same logs.
	Storage() LogStorage
}
