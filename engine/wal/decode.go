package wal

import (
	"encoding/binary"
	"fmt"
	"math"
)

var le = binary.LittleEndian

// DecodeChunk decodes and verifies one chunk: b must be exactly the chunk's
// bytes, as a ranged GET of a ChunkRef returns them. It checks magic, version,
// both CRCs, every bound and every count. The returned entries' payloads alias
// b. Errors wrap ErrCorrupt, ErrUnsupportedVersion or ErrTooLarge.
func DecodeChunk(b []byte) (Chunk, error) { return decodeChunk(b, true) }

// DecodeChunkHeaders decodes and verifies a chunk's prefix (header, entry
// directory and prefix CRC) without reading payloads: b needs to hold only
// the first ChunkPrefixLen(entries) bytes of the chunk, and bytes after the
// prefix are ignored (not verified). The entries have nil Payload and their
// PayloadSize set; Chunk.CRC is 0 (the trailer is not read). Errors as
// DecodeChunk.
func DecodeChunkHeaders(b []byte) (Chunk, error) { return decodeChunk(b, false) }

func decodeChunk(b []byte, whole bool) (Chunk, error) {
	if len(b) < chunkHeaderLen {
		return Chunk{}, fmt.Errorf("%w: chunk of %d bytes is shorter than its header (%d)", ErrCorrupt, len(b), chunkHeaderLen)
	}
	if string(b[:4]) != chunkMagic {
		return Chunk{}, fmt.Errorf("%w: bad chunk magic %q", ErrCorrupt, b[:4])
	}
	if v, f := le.Uint16(b[4:]), le.Uint16(b[6:]); v != Version || f != 0 {
		return Chunk{}, fmt.Errorf("%w: chunk version %d flags %#04x (this reader knows version %d, no flags)", ErrUnsupportedVersion, v, f, Version)
	}
	var c Chunk
	if whole {
		if len(b) < minChunkLen {
			return Chunk{}, fmt.Errorf("%w: chunk of %d bytes is shorter than the minimum (%d)", ErrCorrupt, len(b), minChunkLen)
		}
		end := len(b) - trailerLen
		c.CRC = le.Uint32(b[end:])
		if got := checksum(b[:end]); got != c.CRC {
			return Chunk{}, fmt.Errorf("%w: chunk crc %08x, computed %08x", ErrCorrupt, c.CRC, got)
		}
	}
	m := uint64(le.Uint32(b[16:]))
	dirEnd := chunkHeaderLen + m*entryRecordLen
	need := dirEnd + prefixCRCLen
	if whole {
		need += trailerLen
	}
	if need > uint64(len(b)) {
		return Chunk{}, fmt.Errorf("%w: chunk of %d bytes cannot hold %d entries (needs %d)", ErrCorrupt, len(b), m, need)
	}
	if stored, got := le.Uint32(b[dirEnd:]), checksum(b[:dirEnd]); stored != got {
		return Chunk{}, fmt.Errorf("%w: chunk prefix crc %08x, computed %08x", ErrCorrupt, stored, got)
	}
	if m == 0 {
		return Chunk{}, fmt.Errorf("%w: chunk with no entries", ErrCorrupt)
	}
	if m > MaxEntriesPerChunk {
		return Chunk{}, fmt.Errorf("%w: chunk of %d entries exceeds MaxEntriesPerChunk (%d)", ErrTooLarge, m, MaxEntriesPerChunk)
	}
	if whole && len(b) > MaxObjectBytes {
		return Chunk{}, fmt.Errorf("%w: chunk of %d bytes exceeds MaxObjectBytes (%d)", ErrTooLarge, len(b), MaxObjectBytes)
	}
	records := uint64(le.Uint32(b[20:]))
	if records > MaxRecordsPerChunk {
		return Chunk{}, fmt.Errorf("%w: chunk of %d records exceeds MaxRecordsPerChunk (%d)", ErrTooLarge, records, MaxRecordsPerChunk)
	}
	c.Log = int64(le.Uint64(b[8:]))
	c.WriteTimeMs = int64(le.Uint64(b[24:]))
	c.Records = int32(records)

	// m ≤ (len(b)-36)/16 was checked above: the allocation is bounded by
	// the input's size.
	c.Entries = make([]DecodedEntry, m)
	payloads := b[dirEnd+prefixCRCLen:]
	if whole {
		payloads = payloads[:len(payloads)-trailerLen]
	}
	var sumRecords, pos uint64
	for i := range c.Entries {
		r := b[chunkHeaderLen+uint64(i)*entryRecordLen:]
		n, size := uint64(le.Uint32(r)), uint64(le.Uint32(r[4:]))
		if n == 0 {
			return Chunk{}, fmt.Errorf("%w: entry %d has no records", ErrCorrupt, i)
		}
		if size > MaxEntryBytes {
			return Chunk{}, fmt.Errorf("%w: entry %d of %d bytes exceeds MaxEntryBytes (%d)", ErrTooLarge, i, size, MaxEntryBytes)
		}
		sumRecords += n
		e := &c.Entries[i]
		e.Records = int32(min(n, math.MaxInt32)) // n ≤ records ≤ MaxInt32 is checked after the loop
		e.PublishTimeMs = int64(le.Uint64(r[8:]))
		e.PayloadSize = int(size)
		if whole {
			if size > uint64(len(payloads))-pos {
				return Chunk{}, fmt.Errorf("%w: entry %d payload [%d, %d) overruns the chunk's %d payload bytes", ErrCorrupt, i, pos, pos+size, len(payloads))
			}
			e.Payload = payloads[pos : pos+size : pos+size]
		}
		pos += size
	}
	if sumRecords != records {
		return Chunk{}, fmt.Errorf("%w: entries hold %d records, chunk header says %d", ErrCorrupt, sumRecords, records)
	}
	if whole && pos != uint64(len(payloads)) {
		return Chunk{}, fmt.Errorf("%w: entries hold %d payload bytes, chunk has %d", ErrCorrupt, pos, len(payloads))
	}
	if !whole && pos > MaxObjectBytes {
		return Chunk{}, fmt.Errorf("%w: chunk of %d payload bytes exceeds MaxObjectBytes (%d)", ErrTooLarge, pos, MaxObjectBytes)
	}
	return c, nil
}

// Decode decodes the chunk bytes b fetched for r (a ranged GET of
// [r.Offset, r.Offset+r.Length)) like DecodeChunk, and also checks that they
// are the chunk r describes: length, log, counts, payload bytes, publish-time
// bounds and CRC. This catches an index that points at the wrong bytes.
func (r ChunkRef) Decode(b []byte) (Chunk, error) {
	if int64(len(b)) != r.Length {
		return Chunk{}, fmt.Errorf("%w: got %d bytes for a chunk of %d", ErrCorrupt, len(b), r.Length)
	}
	c, err := DecodeChunk(b)
	if err != nil {
		return Chunk{}, err
	}
	if err := r.check(c); err != nil {
		return Chunk{}, err
	}
	return c, nil
}

// check cross-checks a decoded chunk against r.
func (r ChunkRef) check(c Chunk) error {
	var payload int64
	minPub, maxPub := int64(math.MaxInt64), int64(math.MinInt64)
	for _, e := range c.Entries {
		payload += int64(e.PayloadSize)
		minPub, maxPub = min(minPub, e.PublishTimeMs), max(maxPub, e.PublishTimeMs)
	}
	switch {
	case c.Log != r.Log:
		return fmt.Errorf("%w: chunk is of log %d, expected log %d", ErrCorrupt, c.Log, r.Log)
	case int64(len(c.Entries)) != int64(r.Entries) || c.Records != r.Records:
		return fmt.Errorf("%w: log %d chunk has %d entries / %d records, expected %d / %d", ErrCorrupt, r.Log, len(c.Entries), c.Records, r.Entries, r.Records)
	case payload != r.PayloadBytes:
		return fmt.Errorf("%w: log %d chunk has %d payload bytes, expected %d", ErrCorrupt, r.Log, payload, r.PayloadBytes)
	case minPub != r.MinPublishTimeMs || maxPub != r.MaxPublishTimeMs:
		return fmt.Errorf("%w: log %d chunk publish times [%d, %d], expected [%d, %d]", ErrCorrupt, r.Log, minPub, maxPub, r.MinPublishTimeMs, r.MaxPublishTimeMs)
	case c.CRC != r.CRC:
		return fmt.Errorf("%w: log %d chunk crc %08x, expected %08x", ErrCorrupt, r.Log, c.CRC, r.CRC)
	}
	return nil
}

// DecodeObject decodes and fully verifies a whole object: header, directory
// and its CRC, and every chunk (DecodeChunk) against its directory record.
// The returned Object shares no memory with b. It is meant for GC tools,
// inspection and tests; readers of one log use a ChunkRef instead. Errors
// wrap ErrCorrupt, ErrUnsupportedVersion or ErrTooLarge.
func DecodeObject(b []byte) (Object, error) {
	o, err := decodeDirectory(b, true)
	if err != nil {
		return Object{}, err
	}
	for i := range o.Chunks {
		if _, err := o.chunk(b, i); err != nil {
			return Object{}, err
		}
	}
	return o, nil
}

// DecodeObjectDirectory decodes and verifies an object's header and chunk
// directory from a prefix of the object: b needs only the first
// ObjectPrefixLen(chunkCount) bytes (chunkCount is the u32 at byte 12), and
// later bytes are ignored. The chunks themselves are not verified. Object.Size
// is the size the directory implies. Errors as DecodeObject.
func DecodeObjectDirectory(b []byte) (Object, error) { return decodeDirectory(b, false) }

// ObjectChunk decodes and verifies chunk i (in directory order) of the whole
// object b: the header and directory, then that chunk against its directory
// record. Other chunks are not verified. Payloads alias b. An i outside
// [0, chunk count) is an error that wraps none of the sentinels.
func ObjectChunk(b []byte, i int) (Chunk, error) {
	o, err := decodeDirectory(b, true)
	if err != nil {
		return Chunk{}, err
	}
	if i < 0 || i >= len(o.Chunks) {
		return Chunk{}, fmt.Errorf("wal: chunk index %d out of range [0, %d)", i, len(o.Chunks))
	}
	return o.chunk(b, i)
}

// chunk decodes chunk i of b, whose directory o is, and cross-checks it.
func (o Object) chunk(b []byte, i int) (Chunk, error) {
	r := o.Chunks[i]
	c, err := DecodeChunk(b[r.Offset : r.Offset+r.Length])
	if err != nil {
		return Chunk{}, fmt.Errorf("chunk %d (log %d): %w", i, r.Log, err)
	}
	if err := r.check(c); err != nil {
		return Chunk{}, fmt.Errorf("chunk %d: %w", i, err)
	}
	if c.WriteTimeMs != o.WriteTimeMs {
		return Chunk{}, fmt.Errorf("%w: chunk %d (log %d) write time %d, object's %d", ErrCorrupt, i, r.Log, c.WriteTimeMs, o.WriteTimeMs)
	}
	return c, nil
}

// decodeDirectory decodes the header and directory. With whole, b must be the
// entire object and every chunk range must lie in it, ending exactly at its
// end; otherwise b may be any prefix holding the directory.
func decodeDirectory(b []byte, whole bool) (Object, error) {
	if len(b) < objectHeaderLen+dirCRCLen {
		return Object{}, fmt.Errorf("%w: object of %d bytes is shorter than its header (%d)", ErrCorrupt, len(b), objectHeaderLen+dirCRCLen)
	}
	if string(b[:8]) != objectMagic {
		return Object{}, fmt.Errorf("%w: bad object magic %q", ErrCorrupt, b[:8])
	}
	o := Object{Version: le.Uint16(b[8:]), Flags: le.Uint16(b[10:])}
	if o.Version != Version || o.Flags != 0 {
		return Object{}, fmt.Errorf("%w: object version %d flags %#04x (this reader knows version %d, no flags)", ErrUnsupportedVersion, o.Version, o.Flags, Version)
	}
	n := uint64(le.Uint32(b[12:]))
	dirEnd := objectHeaderLen + n*dirRecordLen
	if dirEnd+dirCRCLen > uint64(len(b)) {
		return Object{}, fmt.Errorf("%w: object of %d bytes cannot hold a directory of %d chunks (needs %d)", ErrCorrupt, len(b), n, dirEnd+dirCRCLen)
	}
	if stored, got := le.Uint32(b[dirEnd:]), checksum(b[:dirEnd]); stored != got {
		return Object{}, fmt.Errorf("%w: directory crc %08x, computed %08x", ErrCorrupt, stored, got)
	}
	if n > MaxChunksPerObject {
		return Object{}, fmt.Errorf("%w: object of %d chunks exceeds MaxChunksPerObject (%d)", ErrTooLarge, n, MaxChunksPerObject)
	}
	if whole && len(b) > MaxObjectBytes {
		return Object{}, fmt.Errorf("%w: object of %d bytes exceeds MaxObjectBytes (%d)", ErrTooLarge, len(b), MaxObjectBytes)
	}
	o.WriteTimeMs = int64(le.Uint64(b[16:]))

	// n ≤ (len(b)-28)/64 was checked above: the allocation is bounded by
	// the input's size.
	o.Chunks = make([]ChunkRef, n)
	next := dirEnd + dirCRCLen // where the next chunk must start
	for i := range o.Chunks {
		d := b[objectHeaderLen+uint64(i)*dirRecordLen:]
		log := int64(le.Uint64(d))
		off, length := le.Uint64(d[8:]), le.Uint64(d[16:])
		entries, records := uint64(le.Uint32(d[24:])), uint64(le.Uint32(d[28:]))
		payload := le.Uint64(d[32:])
		minPub, maxPub := int64(le.Uint64(d[40:])), int64(le.Uint64(d[48:]))
		crc, reserved := le.Uint32(d[56:]), le.Uint32(d[60:])
		switch {
		case i > 0 && log <= o.Chunks[i-1].Log:
			return Object{}, fmt.Errorf("%w: directory record %d: log %d does not ascend from %d", ErrCorrupt, i, log, o.Chunks[i-1].Log)
		case off != next:
			return Object{}, fmt.Errorf("%w: directory record %d: chunk offset %d, expected %d", ErrCorrupt, i, off, next)
		case length > MaxObjectBytes || entries > MaxEntriesPerChunk || records > MaxRecordsPerChunk || payload > MaxObjectBytes:
			return Object{}, fmt.Errorf("%w: directory record %d: chunk of %d bytes, %d entries, %d records, %d payload bytes", ErrTooLarge, i, length, entries, records, payload)
		case entries == 0 || records < entries:
			return Object{}, fmt.Errorf("%w: directory record %d: %d entries, %d records", ErrCorrupt, i, entries, records)
		case length != chunkOverhead+entries*entryRecordLen+payload:
			return Object{}, fmt.Errorf("%w: directory record %d: chunk of %d bytes cannot hold %d entries of %d payload bytes", ErrCorrupt, i, length, entries, payload)
		case minPub > maxPub:
			return Object{}, fmt.Errorf("%w: directory record %d: publish times [%d, %d]", ErrCorrupt, i, minPub, maxPub)
		case reserved != 0:
			return Object{}, fmt.Errorf("%w: directory record %d: reserved field %#x", ErrCorrupt, i, reserved)
		}
		next += length // ≤ (MaxChunksPerObject+1)·MaxObjectBytes: no overflow
		if next > MaxObjectBytes {
			return Object{}, fmt.Errorf("%w: chunks end at byte %d, beyond MaxObjectBytes (%d)", ErrTooLarge, next, MaxObjectBytes)
		}
		if whole && next > uint64(len(b)) {
			return Object{}, fmt.Errorf("%w: directory record %d: chunk [%d, %d) overruns the object's %d bytes", ErrCorrupt, i, off, next, len(b))
		}
		o.Chunks[i] = ChunkRef{
			Log: log, Offset: int64(off), Length: int64(length),
			Entries: int32(entries), Records: int32(records), PayloadBytes: int64(payload),
			MinPublishTimeMs: minPub, MaxPublishTimeMs: maxPub, CRC: crc,
		}
	}
	if whole && next != uint64(len(b)) {
		return Object{}, fmt.Errorf("%w: chunks end at byte %d, object has %d", ErrCorrupt, next, len(b))
	}
	o.Size = int64(next)
	return o, nil
}
