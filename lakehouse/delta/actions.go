package delta

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
)

// Protocol is the protocol action.
type Protocol struct {
	MinReaderVersion int32    `json:"minReaderVersion"`
	MinWriterVersion int32    `json:"minWriterVersion"`
	ReaderFeatures   []string `json:"readerFeatures,omitempty"`
	WriterFeatures   []string `json:"writerFeatures,omitempty"`
}

// Supported protocol versions: what we write, and the most we accept.
const (
	readerVersion int32 = 1
	writerVersion int32 = 2
)

func (p Protocol) readable() bool { return p.MinReaderVersion <= readerVersion }
func (p Protocol) writable() bool {
	return p.MinReaderVersion <= readerVersion && p.MinWriterVersion <= writerVersion
}

// Format is metaData.format.
type Format struct {
	Provider string            `json:"provider"`
	Options  map[string]string `json:"options"`
}

// Metadata is the metaData action, with the schema parsed.
type Metadata struct {
	ID               string            `json:"id"`
	Name             string            `json:"name,omitempty"`
	Description      string            `json:"description,omitempty"`
	Format           Format            `json:"format"`
	SchemaString     string            `json:"schemaString"`
	PartitionColumns []string          `json:"partitionColumns"`
	Configuration    map[string]string `json:"configuration"`
	CreatedTime      *int64            `json:"createdTime,omitempty"`
}

// Schema parses SchemaString.
func (m Metadata) Schema() (Schema, error) { return ParseSchema(m.SchemaString) }

// Txn is the txn (SetTransaction) action.
type Txn struct {
	AppID       string `json:"appId"`
	Version     int64  `json:"version"`
	LastUpdated *int64 `json:"lastUpdated,omitempty"`
}

// Stats are per-file statistics (add.stats). MinValues/MaxValues/NullCount
// are keyed by top-level column; nested structs are nested maps. Values are
// JSON values: numbers, strings, booleans; timestamps as ISO-8601 strings at
// ms precision (FormatStatsTimestamp).
type Stats struct {
	NumRecords int64          `json:"numRecords"`
	MinValues  map[string]any `json:"minValues,omitempty"`
	MaxValues  map[string]any `json:"maxValues,omitempty"`
	NullCount  map[string]any `json:"nullCount,omitempty"`
}

// AddFile describes a data file to add (and a live file in a Snapshot).
type AddFile struct {
	// Path relative to the table root, not encoded ("part=a/f.parquet");
	// it is URI-encoded in the log.
	Path             string
	PartitionValues  map[string]string
	Size             int64 // bytes, exact
	ModificationTime int64 // Unix ms
	DataChange       bool  // Commit writes true for every add
	Stats            *Stats
	// StatsJSON is the raw stats string read from the log ("" if none).
	// When writing, Stats wins when set.
	StatsJSON string
	Tags      map[string]string
}

// RemoveFile is the remove action. Path is relative to the table root: as
// an action it is URI-encoded, in a Snapshot's Tombstones decoded.
type RemoveFile struct {
	Path                 string            `json:"path"`
	DeletionTimestamp    *int64            `json:"deletionTimestamp,omitempty"`
	DataChange           bool              `json:"dataChange"`
	ExtendedFileMetadata *bool             `json:"extendedFileMetadata,omitempty"`
	PartitionValues      map[string]string `json:"partitionValues,omitempty"`
	Size                 *int64            `json:"size,omitempty"`
	Tags                 map[string]string `json:"tags,omitempty"`
}

// CommitInfo is written first in every commit; never read back for state.
type CommitInfo struct {
	Timestamp           int64             `json:"timestamp"`
	Operation           string            `json:"operation"`
	OperationParameters map[string]string `json:"operationParameters"`
	IsBlindAppend       bool              `json:"isBlindAppend"`
	EngineInfo          string            `json:"engineInfo"`
	ReadVersion         *int64            `json:"readVersion,omitempty"`
}

// addJSON is the wire form of add.
type addJSON struct {
	Path             string            `json:"path"`
	PartitionValues  map[string]string `json:"partitionValues"`
	Size             int64             `json:"size"`
	ModificationTime int64             `json:"modificationTime"`
	DataChange       bool              `json:"dataChange"`
	Stats            *string           `json:"stats,omitempty"`
	Tags             map[string]string `json:"tags,omitempty"`
	// Fields of newer protocols that change a file's meaning. We refuse to
	// interpret a log using them (it would need reader features anyway).
	DeletionVector json.RawMessage `json:"deletionVector,omitempty"`
}

// action is one line of a commit.
type action struct {
	CommitInfo *CommitInfo `json:"commitInfo,omitempty"`
	Protocol   *Protocol   `json:"protocol,omitempty"`
	MetaData   *Metadata   `json:"metaData,omitempty"`
	Txn        *Txn        `json:"txn,omitempty"`
	Add        *addJSON    `json:"add,omitempty"`
	Remove     *RemoveFile `json:"remove,omitempty"`
}

// encodePath URI-encodes each segment of a relative path.
func encodePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// decodePath undoes encodePath (and any RFC 2396 encoding by another writer).
func decodePath(p string) (string, error) {
	return url.PathUnescape(p)
}

func (a AddFile) toJSON() (*addJSON, error) {
	j := &addJSON{
		Path:             encodePath(a.Path),
		PartitionValues:  a.PartitionValues,
		Size:             a.Size,
		ModificationTime: a.ModificationTime,
		DataChange:       a.DataChange,
		Tags:             a.Tags,
	}
	if j.PartitionValues == nil {
		j.PartitionValues = map[string]string{}
	}
	switch {
	case a.Stats != nil:
		b, err := json.Marshal(a.Stats)
		if err != nil {
			return nil, fmt.Errorf("%w: stats of %s: %v", ErrInvalid, a.Path, err)
		}
		s := string(b)
		j.Stats = &s
	case a.StatsJSON != "":
		s := a.StatsJSON
		j.Stats = &s
	}
	return j, nil
}

func (j *addJSON) toAddFile() (AddFile, error) {
	p, err := decodePath(j.Path)
	if err != nil {
		return AddFile{}, fmt.Errorf("add path %q: %v", j.Path, err)
	}
	a := AddFile{
		Path:             p,
		PartitionValues:  j.PartitionValues,
		Size:             j.Size,
		ModificationTime: j.ModificationTime,
		DataChange:       j.DataChange,
		Tags:             j.Tags,
	}
	if j.Stats != nil {
		a.StatsJSON = *j.Stats
	}
	return a, nil
}

// ParseStats decodes a stats JSON string.
func ParseStats(s string) (*Stats, error) {
	var st Stats
	if err := json.Unmarshal([]byte(s), &st); err != nil {
		return nil, fmt.Errorf("%w: stats: %v", ErrInvalid, err)
	}
	return &st, nil
}
