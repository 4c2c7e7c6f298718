package index

import (
	"encoding/binary"
	"fmt"
)

// A commit record (docs/index-format.md, "The commit log"): the chunks of
// one WAL object, or control operations, ordered among all records by the
// metadata revision that created it.

// RecordKind says what a commit record holds.
type RecordKind uint8

const (
	// RecordChunks: the chunks of one WAL object, one per log.
	RecordChunks RecordKind = 1
	// RecordControl: fences and trims.
	RecordControl RecordKind = 2
	// RecordStaged: the staged chunks of a staging set, committed
	// (docs/transactions.md): chunks of any number of objects, several per
	// log, each with its own object and write time.
	RecordStaged RecordKind = 3
)

// ControlOp is one operation of a control record.
type ControlOp uint8

const (
	// OpFence fences the log: later chunks of it are void.
	OpFence ControlOp = 1
	// OpTrim raises the log's first offset to First (never lowers it).
	OpTrim ControlOp = 2
	// OpDelete deletes the log: fenced, first = next, tombstoned.
	OpDelete ControlOp = 3
)

// RecordChunk is one log's chunk of the object of a RecordChunks record,
// or one staged chunk of a RecordStaged record (with its own Object and
// WriteMs; empty and 0 in the other kinds, where the record's apply).
type RecordChunk struct {
	Object       string // RecordStaged only
	WriteMs      int64  // RecordStaged only
	Log          int64
	Records      int64
	Entries      int64
	PayloadBytes int64
	Offset       int64
	Length       int64
	CRC          uint32
	MinPublishMs int64
	MaxPublishMs int64
}

// Control is one operation of a RecordControl record.
type Control struct {
	Op    ControlOp
	Log   int64
	First int64 // OpTrim only
}

// Record is a decoded commit record.
type Record struct {
	Kind     RecordKind
	WriteMs  int64
	Object   string
	Chunks   []RecordChunk
	Controls []Control
}

const recordVersion = 1

// VoidRecord is the value of a voided commit-record key.
var VoidRecord = []byte{0}

// IsVoid reports whether a commit-record value is the void marker.
func IsVoid(b []byte) bool { return len(b) == 1 && b[0] == 0 }

// ChunkObject returns the object and write time of chunk c of r: the
// record's, or in a RecordStaged record the chunk's own.
func (r Record) ChunkObject(c RecordChunk) (object string, writeMs int64) {
	if r.Kind == RecordStaged {
		return c.Object, c.WriteMs
	}
	return r.Object, r.WriteMs
}

// Encode returns the binary value.
func (r Record) Encode() []byte {
	b := make([]byte, 0, 16+len(r.Object)+len(r.Chunks)*24+len(r.Controls)*12)
	b = append(b, recordVersion, byte(r.Kind))
	switch r.Kind {
	case RecordChunks:
		b = binary.AppendVarint(b, r.WriteMs)
		b = binary.AppendUvarint(b, uint64(len(r.Object)))
		b = append(b, r.Object...)
		b = binary.AppendUvarint(b, uint64(len(r.Chunks)))
		for _, c := range r.Chunks {
			for _, v := range []int64{c.Log, c.Records, c.Entries, c.PayloadBytes, c.Offset, c.Length} {
				b = binary.AppendUvarint(b, uint64(v))
			}
			b = binary.LittleEndian.AppendUint32(b, c.CRC)
			b = binary.AppendVarint(b, c.MinPublishMs-r.WriteMs)
			b = binary.AppendVarint(b, c.MaxPublishMs-r.WriteMs)
		}
	case RecordStaged:
		b = binary.AppendUvarint(b, uint64(len(r.Chunks)))
		for _, c := range r.Chunks {
			b = binary.AppendVarint(b, c.WriteMs)
			b = binary.AppendUvarint(b, uint64(len(c.Object)))
			b = append(b, c.Object...)
			for _, v := range []int64{c.Log, c.Records, c.Entries, c.PayloadBytes, c.Offset, c.Length} {
				b = binary.AppendUvarint(b, uint64(v))
			}
			b = binary.LittleEndian.AppendUint32(b, c.CRC)
			b = binary.AppendVarint(b, c.MinPublishMs-c.WriteMs)
			b = binary.AppendVarint(b, c.MaxPublishMs-c.WriteMs)
		}
	case RecordControl:
		b = binary.AppendUvarint(b, uint64(len(r.Controls)))
		for _, c := range r.Controls {
			b = append(b, byte(c.Op))
			b = binary.AppendUvarint(b, uint64(c.Log))
			if c.Op == OpTrim {
				b = binary.AppendUvarint(b, uint64(c.First))
			}
		}
	}
	return b
}

// DecodeRecord parses and validates a commit record (ErrCorrupt). The void
// marker is not a record: check IsVoid first.
func DecodeRecord(b []byte) (Record, error) {
	bad := func(what string) (Record, error) {
		return Record{}, fmt.Errorf("%w: commit record: %s", ErrCorrupt, what)
	}
	if len(b) < 2 || b[0] != recordVersion {
		return bad("version")
	}
	r := Record{Kind: RecordKind(b[1])}
	b = b[2:]
	d := decoder{b: b}
	switch r.Kind {
	case RecordChunks:
		r.WriteMs = d.sv()
		n := d.uv()
		if d.b == nil || n < 0 || int64(len(d.b)) < n {
			return bad("object name")
		}
		r.Object = string(d.b[:n])
		d.b = d.b[n:]
		cnt := d.uv()
		if d.b == nil || cnt < 1 || cnt > int64(len(d.b)) {
			return bad("chunk count")
		}
		r.Chunks = make([]RecordChunk, 0, cnt)
		seen := make(map[int64]bool, cnt)
		for range cnt {
			c := RecordChunk{Log: d.uv(), Records: d.uv(), Entries: d.uv(), PayloadBytes: d.uv(), Offset: d.uv(), Length: d.uv()}
			c.CRC = d.u32()
			c.MinPublishMs = d.sv() + r.WriteMs
			c.MaxPublishMs = d.sv() + r.WriteMs
			if d.b == nil || c.Log < 0 || c.Records < 1 || c.Entries < 1 || c.Entries > c.Records || c.PayloadBytes < 0 || c.Offset < 0 || c.Length < 0 || seen[c.Log] {
				return bad("chunk")
			}
			seen[c.Log] = true
			r.Chunks = append(r.Chunks, c)
		}
	case RecordStaged:
		cnt := d.uv()
		if d.b == nil || cnt < 1 || cnt > int64(len(d.b)) {
			return bad("chunk count")
		}
		r.Chunks = make([]RecordChunk, 0, cnt)
		for range cnt {
			var c RecordChunk
			c.WriteMs = d.sv()
			n := d.uv()
			if d.b == nil || n < 1 || int64(len(d.b)) < n {
				return bad("object name")
			}
			c.Object = string(d.b[:n])
			d.b = d.b[n:]
			c.Log, c.Records, c.Entries, c.PayloadBytes, c.Offset, c.Length = d.uv(), d.uv(), d.uv(), d.uv(), d.uv(), d.uv()
			c.CRC = d.u32()
			c.MinPublishMs = d.sv() + c.WriteMs
			c.MaxPublishMs = d.sv() + c.WriteMs
			if d.b == nil || c.Log < 0 || c.Records < 1 || c.Entries < 1 || c.Entries > c.Records || c.PayloadBytes < 0 || c.Offset < 0 || c.Length < 0 {
				return bad("chunk")
			}
			r.Chunks = append(r.Chunks, c)
		}
	case RecordControl:
		cnt := d.uv()
		if d.b == nil || cnt < 1 || cnt > int64(len(d.b)) {
			return bad("operation count")
		}
		for range cnt {
			if len(d.b) < 1 {
				return bad("operation")
			}
			c := Control{Op: ControlOp(d.b[0])}
			d.b = d.b[1:]
			c.Log = d.uv()
			switch c.Op {
			case OpFence, OpDelete:
			case OpTrim:
				c.First = d.uv()
			default:
				return bad("operation kind")
			}
			if d.b == nil || c.Log < 0 || c.First < 0 {
				return bad("operation")
			}
			r.Controls = append(r.Controls, c)
		}
	default:
		return bad("kind")
	}
	if d.b == nil || len(d.b) != 0 {
		return bad("trailing bytes")
	}
	return r, nil
}

// decoder reads varints; b becomes nil at the first malformed field.
type decoder struct{ b []byte }

func (d *decoder) uv() int64 {
	if d.b == nil {
		return -1
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 || v > 1<<62 {
		d.b = nil
		return -1
	}
	d.b = d.b[n:]
	return int64(v)
}

func (d *decoder) sv() int64 {
	if d.b == nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.b = nil
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) u32() uint32 {
	if d.b == nil || len(d.b) < 4 {
		d.b = nil
		return 0
	}
	v := binary.LittleEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}
