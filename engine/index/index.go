// Package index encodes the engine's per-log metadata values: the log head
// and the sparse index entries (docs/index-format.md). Pure code, no I/O;
// the key layout lives in the engine.
package index

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
)

// ErrCorrupt marks metadata that does not decode; it surfaces wrapped in
// read errors and is never expected in a healthy cluster.
var ErrCorrupt = errors.New("index: corrupt metadata")

// Head is the JSON value of a log's head key.
type Head struct {
	Next    int64 `json:"next"`
	First   int64 `json:"first"`
	Bytes   int64 `json:"bytes"`
	Fenced  bool  `json:"fenced,omitempty"`
	Deleted bool  `json:"deleted,omitempty"`
}

// Encode returns the JSON value.
func (h Head) Encode() []byte {
	b, _ := json.Marshal(h) // cannot fail for this struct
	return b
}

// DecodeHead parses and validates a head value (ErrCorrupt).
func DecodeHead(b []byte) (Head, error) {
	var h Head
	if err := json.Unmarshal(b, &h); err != nil {
		return Head{}, fmt.Errorf("%w: head: %v", ErrCorrupt, err)
	}
	if h.Next < 0 || h.First < 0 || h.First > h.Next || h.Bytes < 0 {
		return Head{}, fmt.Errorf("%w: head out of range: %+v", ErrCorrupt, h)
	}
	return h, nil
}

// Kind says where an index entry's records are stored.
type Kind uint8

const (
	// KindWAL: a chunk of a WAL object.
	KindWAL Kind = 1
	// KindParquet: a Parquet file.
	KindParquet Kind = 2
)

// Entry is the value of one index key (docs/index-format.md).
type Entry struct {
	Kind         Kind
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
func (e Entry) Last() int64 { return e.First + e.Records - 1 }

// End is the offset just past the chunk.
func (e Entry) End() int64 { return e.First + e.Records }

const indexVersion = 1

// Encode returns the binary value.
func (e Entry) Encode() []byte {
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

// DecodeEntry parses and validates an index value (ErrCorrupt).
func DecodeEntry(b []byte) (Entry, error) {
	bad := func(what string) (Entry, error) {
		return Entry{}, fmt.Errorf("%w: index entry: %s", ErrCorrupt, what)
	}
	if len(b) < 2 || b[0] != indexVersion {
		return bad("version")
	}
	e := Entry{Kind: Kind(b[1])}
	if e.Kind != KindWAL && e.Kind != KindParquet {
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
