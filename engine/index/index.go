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
	// Rev is the metadata revision up to which commit records are folded
	// into this head (0: none; format-1 heads have no records).
	Rev int64 `json:"rev,omitempty"`
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
	if h.Next < 0 || h.First < 0 || h.First > h.Next || h.Bytes < 0 || h.Rev < 0 {
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
	// Segments, when it holds two or more chunks, makes this a version-2
	// entry: a run of consecutive WAL chunks in different objects (the
	// fold writes them). Object, Offset, Length and CRC are then the first
	// segment's (informational only: read Segs()).
	Segments []Segment
	// Joint, when set, marks WAL chunks that one kind-3 commit record (a
	// committed staging set) applied to more than one log: a version-3
	// entry (one chunk) or version-4 (a run: every chunk of it is of that
	// record; the fold never mixes them).
	Joint *Joint
}

// Joint marks the chunks of one kind-3 commit record that applied to two
// or more logs (docs/index-format.md, "Index entry"): every such chunk of
// every such log carries the same Joint.
type Joint struct {
	// Rev is the record's metadata revision: one transaction writes one
	// kind-3 record, so it names the record, in every log alike.
	Rev int64
	// Logs are the logs the record holds chunks of, ascending, two or more
	// (the entry's own log among them). A log's chunk may be void there (a
	// fenced or deleted log) or trimmed before it was folded.
	Logs []int64
}

// Segment is one WAL chunk of a version-2 index entry.
type Segment struct {
	Object       string
	Offset       int64
	Length       int64
	CRC          uint32
	Records      int64
	Entries      int64
	PayloadBytes int64
	WriteMs      int64
	MinPublishMs int64
	MaxPublishMs int64
}

// MaxSegments bounds the chunks of one version-2 entry.
const MaxSegments = 64

// Segs returns the chunks of the entry in offset order: its Segments, or
// the one chunk of a version-1 entry.
func (e Entry) Segs() []Segment {
	if len(e.Segments) >= 2 {
		return e.Segments
	}
	return []Segment{{Object: e.Object, Offset: e.Offset, Length: e.Length, CRC: e.CRC, Records: e.Records, Entries: e.Entries,
		PayloadBytes: e.PayloadBytes, WriteMs: e.WriteMs, MinPublishMs: e.MinPublishMs, MaxPublishMs: e.MaxPublishMs}}
}

// Last is the offset of the chunk's last record (the index key).
func (e Entry) Last() int64 { return e.First + e.Records - 1 }

// End is the offset just past the chunk.
func (e Entry) End() int64 { return e.First + e.Records }

const (
	indexVersion         = 1
	indexVersionSegments = 2
	indexVersionJoint    = 3 // version 1 and a Joint
	indexVersionRunJoint = 4 // version 2 and a Joint
)

// Encode returns the binary value: version 2 when the entry has two or
// more Segments, version 1 otherwise; 4 and 3 for those with a Joint.
func (e Entry) Encode() []byte {
	b := make([]byte, 0, 64+len(e.Object)+len(e.Segments)*(len(e.Object)+24))
	v := byte(indexVersion)
	switch {
	case len(e.Segments) >= 2 && e.Joint != nil:
		v = indexVersionRunJoint
	case len(e.Segments) >= 2:
		v = indexVersionSegments
	case e.Joint != nil:
		v = indexVersionJoint
	}
	b = append(b, v, byte(e.Kind))
	for _, v := range []int64{e.First, e.Records, e.Entries, e.BytesEnd, e.PayloadBytes} {
		b = binary.AppendUvarint(b, uint64(v))
	}
	for _, v := range []int64{e.MinPublishMs, e.MaxPublishMs, e.WriteMs} {
		b = binary.AppendVarint(b, v)
	}
	if v == indexVersionSegments || v == indexVersionRunJoint {
		b = binary.AppendUvarint(b, uint64(len(e.Segments)))
		for _, sg := range e.Segments {
			b = binary.AppendUvarint(b, uint64(len(sg.Object)))
			b = append(b, sg.Object...)
			b = binary.AppendUvarint(b, uint64(sg.Offset))
			b = binary.AppendUvarint(b, uint64(sg.Length))
			b = binary.LittleEndian.AppendUint32(b, sg.CRC)
			for _, n := range []int64{sg.Records, sg.Entries, sg.PayloadBytes} {
				b = binary.AppendUvarint(b, uint64(n))
			}
			for _, t := range []int64{sg.WriteMs, sg.MinPublishMs, sg.MaxPublishMs} {
				b = binary.AppendVarint(b, t-e.WriteMs)
			}
		}
		return e.Joint.append(b)
	}
	b = binary.AppendUvarint(b, uint64(len(e.Object)))
	b = append(b, e.Object...)
	b = binary.AppendUvarint(b, uint64(e.Offset))
	b = binary.AppendUvarint(b, uint64(e.Length))
	b = binary.LittleEndian.AppendUint32(b, e.CRC)
	return e.Joint.append(b)
}

// append appends the trailer of a version-3 or -4 entry to b (nothing for
// a nil Joint).
func (j *Joint) append(b []byte) []byte {
	if j == nil {
		return b
	}
	b = binary.AppendUvarint(b, uint64(j.Rev))
	b = binary.AppendUvarint(b, uint64(len(j.Logs)))
	for _, id := range j.Logs {
		b = binary.AppendUvarint(b, uint64(id))
	}
	return b
}

// DecodeEntry parses and validates an index value (ErrCorrupt).
func DecodeEntry(b []byte) (Entry, error) {
	bad := func(what string) (Entry, error) {
		return Entry{}, fmt.Errorf("%w: index entry: %s", ErrCorrupt, what)
	}
	if len(b) < 2 || b[0] < indexVersion || b[0] > indexVersionRunJoint {
		return bad("version")
	}
	if b[0] == indexVersionSegments || b[0] == indexVersionRunJoint {
		return decodeSegments(b)
	}
	joint := b[0] == indexVersionJoint
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
	if b == nil || len(b) < 4 || (!joint && len(b) != 4) || e.First < 0 || e.Records < 1 || e.Entries < 1 || e.Entries > e.Records || e.Offset < 0 || e.Length < 0 {
		return bad("fields")
	}
	e.CRC = binary.LittleEndian.Uint32(b)
	if joint {
		if e.Kind != KindWAL {
			return bad("joint kind")
		}
		j, err := decodeJoint(b[4:])
		if err != nil {
			return bad(err.Error())
		}
		e.Joint = j
	}
	return e, nil
}

// decodeJoint parses the trailer of a version-3 entry: the whole of b.
func decodeJoint(b []byte) (*Joint, error) {
	d := decoder{b: b}
	j := &Joint{Rev: d.uv()}
	n := d.uv()
	if d.b == nil || j.Rev < 1 || n < 2 || n > int64(len(d.b)) {
		return nil, fmt.Errorf("joint: revision %d, %d logs", j.Rev, n)
	}
	j.Logs = make([]int64, n)
	for i := range j.Logs {
		j.Logs[i] = d.uv()
		if d.b == nil || (i > 0 && j.Logs[i] <= j.Logs[i-1]) {
			return nil, fmt.Errorf("joint: logs not ascending")
		}
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("joint: trailing bytes")
	}
	return j, nil
}

// decodeSegments parses a version-2 entry.
func decodeSegments(b []byte) (Entry, error) {
	bad := func(what string) (Entry, error) {
		return Entry{}, fmt.Errorf("%w: index entry v2: %s", ErrCorrupt, what)
	}
	e := Entry{Kind: Kind(b[1])}
	if e.Kind != KindWAL {
		return bad("kind")
	}
	d := decoder{b: b[2:]}
	e.First, e.Records, e.Entries, e.BytesEnd, e.PayloadBytes = d.uv(), d.uv(), d.uv(), d.uv(), d.uv()
	e.MinPublishMs, e.MaxPublishMs, e.WriteMs = d.sv(), d.sv(), d.sv()
	n := d.uv()
	if d.b == nil || n < 2 || n > MaxSegments {
		return bad("segment count")
	}
	var recs, ents, pay int64
	for range n {
		l := d.uv()
		if d.b == nil || l < 0 || int64(len(d.b)) < l {
			return bad("object name")
		}
		sg := Segment{Object: string(d.b[:l])}
		d.b = d.b[l:]
		sg.Offset, sg.Length = d.uv(), d.uv()
		sg.CRC = d.u32()
		sg.Records, sg.Entries, sg.PayloadBytes = d.uv(), d.uv(), d.uv()
		sg.WriteMs, sg.MinPublishMs, sg.MaxPublishMs = d.sv()+e.WriteMs, d.sv()+e.WriteMs, d.sv()+e.WriteMs
		if d.b == nil || sg.Offset < 0 || sg.Length < 0 || sg.Records < 1 || sg.Entries < 1 || sg.Entries > sg.Records || sg.PayloadBytes < 0 {
			return bad("segment")
		}
		recs, ents, pay = recs+sg.Records, ents+sg.Entries, pay+sg.PayloadBytes
		e.Segments = append(e.Segments, sg)
	}
	if d.b == nil || (b[0] == indexVersionSegments && len(d.b) != 0) || e.First < 0 || recs != e.Records || ents != e.Entries || pay != e.PayloadBytes {
		return bad("fields")
	}
	if b[0] == indexVersionRunJoint {
		j, err := decodeJoint(d.b)
		if err != nil {
			return bad(err.Error())
		}
		e.Joint = j
	}
	e.Object, e.Offset, e.Length, e.CRC = e.Segments[0].Object, e.Segments[0].Offset, e.Segments[0].Length, e.Segments[0].CRC
	return e, nil
}
