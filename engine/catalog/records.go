package catalog

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/lakegate/lakegate/lakestream"
)

// recordVersion is the "v" of every record this package writes
// (docs/catalog.md).
const recordVersion = 1

// policyRecord is the JSON form of lakestream.TableMaterializationPolicy.
// It has exactly the fields of the lakestream type, in order, so the two
// convert into each other; a field added there fails to compile here until
// the format in docs/catalog.md says how it is stored. List fields have no
// omitempty: null inherits, [] means "explicitly none".
type policyRecord struct {
	Enabled             *bool                 `json:"enabled,omitempty"`
	Catalogs            []string              `json:"catalogs"`
	TableNameTemplate   *string               `json:"tableNameTemplate,omitempty"`
	WriteMode           *lakestream.WriteMode `json:"writeMode,omitempty"`
	StartPosition       *string               `json:"startPosition,omitempty"`
	DeadLetterStream    *string               `json:"deadLetterStream,omitempty"`
	CommitIntervalMs    *int64                `json:"commitIntervalMs,omitempty"`
	PartitionSpec       []string              `json:"partitionSpec"`
	SortOrder           []string              `json:"sortOrder"`
	RetentionMs         *int64                `json:"retentionMs,omitempty"`
	RetentionBytes      *int64                `json:"retentionBytes,omitempty"`
	TargetFileSizeBytes *int64                `json:"targetFileSizeBytes,omitempty"`
	Compression         *string               `json:"compression,omitempty"`
	AllowAddColumns     *bool                 `json:"allowAddColumns,omitempty"`
	AllowWidenTypes     *bool                 `json:"allowWidenTypes,omitempty"`
}

type defaultPolicyRecord struct {
	V      int           `json:"v"`
	Policy *policyRecord `json:"policy"`
}

type namespaceRecord struct {
	V               int               `json:"v"`
	Name            string            `json:"name"`
	Properties      map[string]string `json:"properties"`
	Materialization *policyRecord     `json:"materialization"`
	CreatedAtMs     int64             `json:"createdAtMs"`
	Version         int64             `json:"version"`
}

type partitioningRecord struct {
	Strategy   string `json:"strategy"`
	Partitions int    `json:"partitions"`
}

type schemaRecord struct {
	Type       lakestream.SchemaType `json:"type"`
	Definition []byte                `json:"definition"`
	Properties map[string]string     `json:"properties"`
}

type streamRecord struct {
	V               int                    `json:"v"`
	Namespace       string                 `json:"namespace"`
	Name            string                 `json:"name"`
	Config          map[string]string      `json:"config"`
	Partitioning    partitioningRecord     `json:"partitioning"`
	Schema          schemaRecord           `json:"schema"`
	Properties      map[string]string      `json:"properties"`
	Materialization *policyRecord          `json:"materialization"`
	State           lakestream.StreamState `json:"state"`
	LogIDs          []lakestream.LogID     `json:"logIds"`
	Version         int64                  `json:"version"`
	CreatedAtMs     int64                  `json:"createdAtMs"`
}

type tombstoneRecord struct {
	V           int                `json:"v"`
	Namespace   string             `json:"namespace"`
	Name        string             `json:"name"`
	LogIDs      []lakestream.LogID `json:"logIds"`
	DroppedAtMs int64              `json:"droppedAtMs"`
	Purge       bool               `json:"purge"`
	Version     int64              `json:"version"`
}

type tableCatalogRecord struct {
	V          int                    `json:"v"`
	Name       string                 `json:"name"`
	Type       lakestream.TableFormat `json:"type"`
	Connection string                 `json:"connection"`
	Properties map[string]string      `json:"properties"`
}

// decode unmarshals a record and checks its version.
func decode(key string, b []byte, v any, version func() int) error {
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("catalog: corrupt record at %s: %w", key, err)
	}
	if got := version(); got < 1 || got > recordVersion {
		return fmt.Errorf("catalog: record at %s has unsupported version %d", key, got)
	}
	return nil
}

func encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// Only maps of strings, slices and scalars: cannot fail.
		panic(fmt.Sprintf("catalog: encode record: %v", err))
	}
	return b
}

func strategyString(s lakestream.PartitionStrategy) string {
	if s == lakestream.PartitionRange {
		return "RANGE"
	}
	return "INDEXED"
}

func parseStrategy(s string) lakestream.PartitionStrategy {
	if s == "RANGE" {
		return lakestream.PartitionRange
	}
	return lakestream.PartitionIndexed
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return maps.Clone(m)
}

func ptr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// clonePolicy deep-copies p (nil stays nil).
func clonePolicy(p *lakestream.TableMaterializationPolicy) *lakestream.TableMaterializationPolicy {
	if p == nil {
		return nil
	}
	return &lakestream.TableMaterializationPolicy{
		Enabled:             ptr(p.Enabled),
		Catalogs:            slices.Clone(p.Catalogs),
		TableNameTemplate:   ptr(p.TableNameTemplate),
		WriteMode:           ptr(p.WriteMode),
		StartPosition:       ptr(p.StartPosition),
		DeadLetterStream:    ptr(p.DeadLetterStream),
		CommitIntervalMs:    ptr(p.CommitIntervalMs),
		PartitionSpec:       slices.Clone(p.PartitionSpec),
		SortOrder:           slices.Clone(p.SortOrder),
		RetentionMs:         ptr(p.RetentionMs),
		RetentionBytes:      ptr(p.RetentionBytes),
		TargetFileSizeBytes: ptr(p.TargetFileSizeBytes),
		Compression:         ptr(p.Compression),
		AllowAddColumns:     ptr(p.AllowAddColumns),
		AllowWidenTypes:     ptr(p.AllowWidenTypes),
	}
}

func toPolicyRecord(p *lakestream.TableMaterializationPolicy) *policyRecord {
	if p == nil {
		return nil
	}
	r := policyRecord(*clonePolicy(p))
	return &r
}

func fromPolicyRecord(r *policyRecord) *lakestream.TableMaterializationPolicy {
	if r == nil {
		return nil
	}
	p := lakestream.TableMaterializationPolicy(*r)
	return &p
}

// validatePolicy checks the enumerated and numeric fields of p.
func validatePolicy(p *lakestream.TableMaterializationPolicy) error {
	if p == nil {
		return nil
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: materialization policy: "+format, append([]any{lakestream.ErrInvalidArgument}, a...)...)
	}
	if p.WriteMode != nil {
		switch *p.WriteMode {
		case lakestream.WriteAppend, lakestream.WriteUpsert, lakestream.WriteCDC:
		default:
			return bad("write mode %q", *p.WriteMode)
		}
	}
	if p.StartPosition != nil && *p.StartPosition != "earliest" && *p.StartPosition != "latest" {
		return bad("start position %q (want earliest or latest)", *p.StartPosition)
	}
	if p.CommitIntervalMs != nil && *p.CommitIntervalMs <= 0 {
		return bad("commit interval %d ms", *p.CommitIntervalMs)
	}
	if p.TargetFileSizeBytes != nil && *p.TargetFileSizeBytes <= 0 {
		return bad("target file size %d bytes", *p.TargetFileSizeBytes)
	}
	if p.RetentionMs != nil && *p.RetentionMs < 0 {
		return bad("retention %d ms", *p.RetentionMs)
	}
	if p.RetentionBytes != nil && *p.RetentionBytes < 0 {
		return bad("retention %d bytes", *p.RetentionBytes)
	}
	return nil
}

// mergePolicy returns over's set fields on top of base's.
func mergePolicy(base, over *lakestream.TableMaterializationPolicy) *lakestream.TableMaterializationPolicy {
	out := clonePolicy(base)
	if out == nil {
		out = &lakestream.TableMaterializationPolicy{}
	}
	if over == nil {
		return out
	}
	o := clonePolicy(over)
	pick := func(dst **bool, src *bool) {
		if src != nil {
			*dst = src
		}
	}
	pickS := func(dst **string, src *string) {
		if src != nil {
			*dst = src
		}
	}
	pickI := func(dst **int64, src *int64) {
		if src != nil {
			*dst = src
		}
	}
	pickL := func(dst *[]string, src []string) {
		if src != nil {
			*dst = src
		}
	}
	pick(&out.Enabled, o.Enabled)
	pickL(&out.Catalogs, o.Catalogs)
	pickS(&out.TableNameTemplate, o.TableNameTemplate)
	if o.WriteMode != nil {
		out.WriteMode = o.WriteMode
	}
	pickS(&out.StartPosition, o.StartPosition)
	pickS(&out.DeadLetterStream, o.DeadLetterStream)
	pickI(&out.CommitIntervalMs, o.CommitIntervalMs)
	pickL(&out.PartitionSpec, o.PartitionSpec)
	pickL(&out.SortOrder, o.SortOrder)
	pickI(&out.RetentionMs, o.RetentionMs)
	pickI(&out.RetentionBytes, o.RetentionBytes)
	pickI(&out.TargetFileSizeBytes, o.TargetFileSizeBytes)
	pickS(&out.Compression, o.Compression)
	pick(&out.AllowAddColumns, o.AllowAddColumns)
	pick(&out.AllowWidenTypes, o.AllowWidenTypes)
	return out
}

func (r *namespaceRecord) toNamespace() lakestream.Namespace {
	return lakestream.Namespace{
		Name:            r.Name,
		Properties:      cloneMap(r.Properties),
		Materialization: fromPolicyRecord(r.Materialization),
	}
}

func (r *streamRecord) toMetadata() lakestream.StreamMetadata {
	return lakestream.StreamMetadata{
		ID:     lakestream.StreamIdentifier{Namespace: r.Namespace, Name: r.Name},
		Config: lakestream.StreamConfig{Properties: cloneMap(r.Config)},
		Partitioning: lakestream.Partitioning{
			Strategy:      parseStrategy(r.Partitioning.Strategy),
			NumPartitions: r.Partitioning.Partitions,
		},
		Schema: lakestream.SchemaConfig{
			Type:       r.Schema.Type,
			Definition: slices.Clone(r.Schema.Definition),
			Properties: cloneMap(r.Schema.Properties),
		},
		Properties:      cloneMap(r.Properties),
		Materialization: fromPolicyRecord(r.Materialization),
		State:           r.State,
		LogIDs:          slices.Clone(r.LogIDs),
		MetadataVersion: r.Version,
		CreatedAtMs:     r.CreatedAtMs,
	}
}

func (r *tableCatalogRecord) toTableCatalog() lakestream.TableCatalog {
	return lakestream.TableCatalog{
		Name:       r.Name,
		Type:       r.Type,
		Connection: r.Connection,
		Properties: cloneMap(r.Properties),
	}
}

func parseNextLogID(key string, b []byte) (lakestream.LogID, error) {
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("catalog: corrupt log id allocator at %s: %q", key, b)
	}
	return lakestream.LogID(n), nil
}
