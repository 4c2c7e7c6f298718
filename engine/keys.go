package engine

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/lakegate/lakegate/lakestream"
)

// keys builds the metadata keys of docs/index-format.md under one root.
type keys struct{ root string }

func (k keys) log(id lakestream.LogID) string {
	return fmt.Sprintf("%slogs/%016x/", k.root, uint64(id))
}
func (k keys) head(id lakestream.LogID) string      { return k.log(id) + "head" }
func (k keys) idxPrefix(id lakestream.LogID) string { return k.log(id) + "idx/" }
func (k keys) idx(id lakestream.LogID, last int64) string {
	return fmt.Sprintf("%s%016x", k.idxPrefix(id), uint64(last))
}
func (k keys) cursorPrefix(id lakestream.LogID) string        { return k.log(id) + "cursor/" }
func (k keys) cursor(id lakestream.LogID, name string) string { return k.cursorPrefix(id) + name }
func (k keys) pendingPrefix() string                          { return k.root + "wal-pending/" }
func (k keys) pending(node, object string) string             { return k.pendingPrefix() + node + "/" + object }
func (k keys) logsPrefix() string                             { return k.root + "logs/" }

// parseIdxLast returns the last offset encoded in an index key's suffix.
func parseIdxLast(key, prefix string) (int64, error) {
	if len(key) != len(prefix)+16 {
		return 0, fmt.Errorf("%w: index key %q", errCorruptMeta, key)
	}
	v, err := strconv.ParseUint(key[len(prefix):], 16, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: index key %q", errCorruptMeta, key)
	}
	return int64(v), nil
}

// errCorruptMeta marks metadata that does not decode; it surfaces wrapped in
// read errors and is never expected in a healthy cluster.
var errCorruptMeta = errors.New("engine: corrupt metadata")

// head is the JSON value of a log's head key.
type head struct {
	Next    int64 `json:"next"`
	First   int64 `json:"first"`
	Bytes   int64 `json:"bytes"`
	Fenced  bool  `json:"fenced,omitempty"`
	Deleted bool  `json:"deleted,omitempty"`
}

func (h head) encode() []byte {
	b, _ := json.Marshal(h) // cannot fail for this struct
	return b
}

func decodeHead(b []byte) (head, error) {
	var h head
	if err := json.Unmarshal(b, &h); err != nil {
		return head{}, fmt.Errorf("%w: head: %v", errCorruptMeta, err)
	}
	if h.Next < 0 || h.First < 0 || h.First > h.Next || h.Bytes < 0 {
		return head{}, fmt.Errorf("%w: head out of range: %+v", errCorruptMeta, h)
	}
	return h, nil
}

// chunkKind says where an index entry's records are stored.
type chunkKind uint8

const (
	kindWAL     chunkKind = 1
	kindParquet chunkKind = 2
)

// indexEntry is the value of one index key (docs/index-format.md).
type indexEntry struct {
	Kind         chunkKind
	First        int64
	Records      int64
	Entries      int64
	BytesEnd     int64
	PayloadBytes int64
	MinPublishMs int64
	MaxPublishMs int64
	WriteMs      int64
	Object       string
	Offset       int64
	Length       int64
	CRC          uint32
}

// Last is the offset of the chunk's last record (the index key).
func (e indexEntry) Last() int64 { return e.First + e.Records - 1 }

// End is the offset just past the chunk.
func (e indexEntry) End() int64 { return e.First + e.Records }

const indexVersion = 1

func (e indexEntry) encode() []byte {
	b := make([]byte, 0, 64+len(e.Object))
	b = append(b, indexVersion, byte(e.Kind))
	for _, v := range []int64{e.First, e.Records, e.Entries, e.BytesEnd, e.PayloadBytes} {
		b = binary.AppendUvarint(b, uint64(v))
	}
	for _, v := range []int64{e.MinPublishMs, e.MaxPublishMs, e.WriteMs} {
		b = binary.AppendVarint(b, v)
	}
	b = binary.AppendUvarint(b, uint64(len(e.Object)))
	b = append(b, e.Object...)
	b = binary.AppendUvarint(b, uint64(e.Offset))
	b = binary.AppendUvarint(b, uint64(e.Length))
	return binary.LittleEndian.AppendUint32(b, e.CRC)
}

func decodeIndexEntry(b []byte) (indexEntry, error) {
	bad := func(what string) (indexEntry, error) {
		return indexEntry{}, fmt.Errorf("%w: index entry: %s", errCorruptMeta, what)
	}
	if len(b) < 2 || b[0] != indexVersion {
		return bad("version")
	}
	e := indexEntry{Kind: chunkKind(b[1])}
	if e.Kind != kindWAL && e.Kind != kindParquet {
		return bad("kind")
	}
	b = b[2:]
	uv := func() int64 {
		v, n := binary.Uvarint(b)
		if n <= 0 || v > 1<<62 {
			b = nil
			return -1
		}
		b = b[n:]
		return int64(v)
	}
	sv := func() int64 {
		v, n := binary.Varint(b)
		if n <= 0 {
			b = nil
			return 0
		}
		b = b[n:]
		return v
	}
	e.First, e.Records, e.Entries, e.BytesEnd, e.PayloadBytes = uv(), uv(), uv(), uv(), uv()
	e.MinPublishMs, e.MaxPublishMs, e.WriteMs = sv(), sv(), sv()
	n := uv()
	if b == nil || n < 0 || int64(len(b)) < n {
		return bad("object name")
	}
	e.Object = string(b[:n])
	b = b[n:]
	e.Offset, e.Length = uv(), uv()
	if b == nil || len(b) != 4 || e.First < 0 || e.Records < 1 || e.Entries < 1 || e.Entries > e.Records || e.Offset < 0 || e.Length < 0 {
		return bad("fields")
	}
	e.CRC = binary.LittleEndian.Uint32(b)
	return e, nil
}
