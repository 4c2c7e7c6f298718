package wal

import (
	"errors"
	"fmt"
	"slices"
)

// Builder accumulates the entries of any number of logs and encodes them as
// one WAL object. Entries of one log keep their append order; chunks are laid
// out by ascending log id.
//
// Ownership: Add keeps a reference to the entry's Payload, without copying
// it, until Reset; the caller must not modify a payload before its Build has
// returned. Build copies every payload exactly once, into a new object buffer
// that it hands to the caller for good (it may be cached and served to
// readers); the builder never writes to a returned object again.
//
// Reset keeps the builder's bookkeeping slices for the next object, so a
// writer that reuses one Builder allocates, in steady state, only the object
// buffer and the returned ChunkRefs.
//
// The zero Builder is not usable; call NewBuilder. A Builder is not safe for
// concurrent use.
type Builder struct {
	// chunks[:used] are the chunks of the current object, in first-append
	// order; chunks[used:] are spares kept for reuse.
	chunks []*chunkBuilder
	used   int
	byLog  map[int64]*chunkBuilder
	size   int64 // encoded object size so far
	sorted []*chunkBuilder
}

// Bounds on what Reset keeps for reuse, so that one unusual object does not
// pin its bookkeeping forever.
const (
	retainEntriesMax = 4096 // entry slots kept per spare chunk
	retainChunksMax  = 4096 // spare chunks kept
)

type chunkBuilder struct {
	log          int64
	entries      []Entry
	records      int64
	payloadBytes int64
	minPublishMs int64
	maxPublishMs int64
}

// NewBuilder returns an empty Builder.
func NewBuilder() *Builder {
	return &Builder{
		byLog: make(map[int64]*chunkBuilder),
		size:  objectHeaderLen + dirCRCLen,
	}
}

// ValidateEntry reports whether e may be added to a Builder at all:
// ErrInvalidEntry if e.Records < 1, ErrTooLarge if its payload exceeds
// MaxEntryBytes. The WAL writer checks it when it accepts a SEND.
func ValidateEntry(e Entry) error {
	if e.Records < 1 {
		return fmt.Errorf("%w: %d records, need at least 1", ErrInvalidEntry, e.Records)
	}
	if len(e.Payload) > MaxEntryBytes {
		return fmt.Errorf("%w: entry of %d bytes exceeds MaxEntryBytes (%d)", ErrTooLarge, len(e.Payload), MaxEntryBytes)
	}
	return nil
}

// Fits reports whether adding a valid entry e for log keeps the object within
// the limits (MaxObjectBytes, MaxChunksPerObject, MaxEntriesPerChunk,
// MaxRecordsPerChunk). When it returns false the writer flushes first; an
// empty Builder fits every entry that passes ValidateEntry.
func (b *Builder) Fits(log int64, e Entry) bool {
	c, ok := b.byLog[log]
	var entries int
	var records int64
	if ok {
		entries, records = len(c.entries), c.records
	}
	return fits(b.size, b.used, !ok, entries, records, e)
}

// fits is the one statement of the limits, shared by Builder and Budget: an
// object of objectSize encoded bytes and chunks chunks takes e into a chunk
// that holds entries entries of records records (newChunk: a chunk not yet
// in the object).
func fits(objectSize int64, chunks int, newChunk bool, entries int, records int64, e Entry) bool {
	grow := int64(entryRecordLen) + int64(len(e.Payload))
	if newChunk {
		if chunks >= MaxChunksPerObject {
			return false
		}
		grow += dirRecordLen + chunkOverhead
	} else if entries >= MaxEntriesPerChunk || records+int64(e.Records) > MaxRecordsPerChunk {
		return false
	}
	return objectSize+grow <= MaxObjectBytes
}

// ErrFull is returned by Builder.Add and Budget.Add for a valid entry that
// does not fit the object (Fits is false): the caller flushes first.
var ErrFull = errors.New("wal: object full")

// Add appends e to log's chunk and returns e's index in that chunk (0 for the
// first entry of the log in this object). It keeps a reference to e.Payload
// (see Builder). It returns an error, and adds nothing, when
// ValidateEntry(e) fails (ErrInvalidEntry, ErrTooLarge) or the entry does
// not fit (ErrFull): both are the caller's to check first, and a writer
// that checked Fits never sees them.
func (b *Builder) Add(log int64, e Entry) (entryIndexInChunk int, err error) {
	if err := ValidateEntry(e); err != nil {
		return 0, err
	}
	if !b.Fits(log, e) {
		return 0, fmt.Errorf("%w: entry of %d bytes and %d records for log %d (flush first)", ErrFull, len(e.Payload), e.Records, log)
	}
	c, ok := b.byLog[log]
	if !ok {
		if b.used < len(b.chunks) {
			c = b.chunks[b.used]
		} else {
			c = new(chunkBuilder)
			b.chunks = append(b.chunks, c)
		}
		b.used++
		c.log = log
		c.minPublishMs, c.maxPublishMs = e.PublishTimeMs, e.PublishTimeMs
		b.byLog[log] = c
		b.size += dirRecordLen + chunkOverhead
	}
	c.entries = append(c.entries, e)
	c.records += int64(e.Records)
	c.payloadBytes += int64(len(e.Payload))
	c.minPublishMs = min(c.minPublishMs, e.PublishTimeMs)
	c.maxPublishMs = max(c.maxPublishMs, e.PublishTimeMs)
	b.size += entryRecordLen + int64(len(e.Payload))
	return len(c.entries) - 1, nil
}

// Len returns the size in bytes of the object Build would return now.
func (b *Builder) Len() int { return int(b.size) }

// Logs returns the number of logs (chunks) in the object so far.
func (b *Builder) Logs() int { return b.used }

// Build encodes the object with the given write time (Unix ms) and returns it
// with one ChunkRef per log, in object order (ascending log id). Both are new
// allocations owned by the caller. Build does not reset the Builder; calling
// it twice returns equal objects.
func (b *Builder) Build(writeTimeMs int64) (object []byte, chunks []ChunkRef) {
	b.sorted = append(b.sorted[:0], b.chunks[:b.used]...)
	slices.SortFunc(b.sorted, func(x, y *chunkBuilder) int {
		switch {
		case x.log < y.log:
			return -1
		case x.log > y.log:
			return 1
		}
		return 0
	})

	obj := make([]byte, b.size)
	chunks = make([]ChunkRef, len(b.sorted))

	copy(obj, objectMagic)
	le.PutUint16(obj[8:], Version)
	le.PutUint16(obj[10:], 0) // flags
	le.PutUint32(obj[12:], uint32(len(b.sorted)))
	le.PutUint64(obj[16:], uint64(writeTimeMs))

	dirEnd := objectHeaderLen + len(b.sorted)*dirRecordLen
	off := dirEnd + dirCRCLen
	for i, c := range b.sorted {
		n := writeChunk(obj[off:], c, writeTimeMs)
		ch := obj[off : off+n]
		ref := ChunkRef{
			Log:              c.log,
			Offset:           int64(off),
			Length:           int64(n),
			Entries:          int32(len(c.entries)),
			Records:          int32(c.records),
			PayloadBytes:     c.payloadBytes,
			MinPublishTimeMs: c.minPublishMs,
			MaxPublishTimeMs: c.maxPublishMs,
			CRC:              le.Uint32(ch[n-trailerLen:]),
		}
		chunks[i] = ref

		d := obj[objectHeaderLen+i*dirRecordLen:]
		le.PutUint64(d[0:], uint64(ref.Log))
		le.PutUint64(d[8:], uint64(ref.Offset))
		le.PutUint64(d[16:], uint64(ref.Length))
		le.PutUint32(d[24:], uint32(ref.Entries))
		le.PutUint32(d[28:], uint32(ref.Records))
		le.PutUint64(d[32:], uint64(ref.PayloadBytes))
		le.PutUint64(d[40:], uint64(ref.MinPublishTimeMs))
		le.PutUint64(d[48:], uint64(ref.MaxPublishTimeMs))
		le.PutUint32(d[56:], ref.CRC)
		le.PutUint32(d[60:], 0) // reserved
		off += n
	}
	le.PutUint32(obj[dirEnd:], checksum(obj[:dirEnd]))
	if int64(off) != b.size {
		panic(fmt.Sprintf("wal: Builder.Build: wrote %d bytes, accounted %d", off, b.size))
	}
	clear(b.sorted) // drop references held only for sorting
	return obj, chunks
}

// writeChunk encodes c at the start of dst and returns its length.
func writeChunk(dst []byte, c *chunkBuilder, writeTimeMs int64) int {
	copy(dst, chunkMagic)
	le.PutUint16(dst[4:], Version)
	le.PutUint16(dst[6:], 0) // flags
	le.PutUint64(dst[8:], uint64(c.log))
	le.PutUint32(dst[16:], uint32(len(c.entries)))
	le.PutUint32(dst[20:], uint32(c.records))
	le.PutUint64(dst[24:], uint64(writeTimeMs))

	p := chunkHeaderLen
	for _, e := range c.entries {
		le.PutUint32(dst[p:], uint32(e.Records))
		le.PutUint32(dst[p+4:], uint32(len(e.Payload)))
		le.PutUint64(dst[p+8:], uint64(e.PublishTimeMs))
		p += entryRecordLen
	}
	le.PutUint32(dst[p:], checksum(dst[:p]))
	p += prefixCRCLen
	for _, e := range c.entries {
		p += copy(dst[p:], e.Payload)
	}
	le.PutUint32(dst[p:], checksum(dst[:p]))
	return p + trailerLen
}

// Reset empties the Builder for the next object, dropping its references to
// payloads and keeping its bookkeeping buffers. Objects already returned by
// Build are unaffected.
func (b *Builder) Reset() {
	for _, c := range b.chunks[:b.used] {
		clear(c.entries)
		c.entries = c.entries[:0]
		if cap(c.entries) > retainEntriesMax {
			c.entries = nil
		}
		c.records, c.payloadBytes = 0, 0
	}
	if len(b.chunks) > retainChunksMax {
		clear(b.chunks[retainChunksMax:])
		b.chunks = b.chunks[:retainChunksMax]
		b.sorted = nil
	}
	b.used = 0
	clear(b.byLog)
	b.size = objectHeaderLen + dirCRCLen
}
