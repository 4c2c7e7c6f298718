package wal

import "hash/crc32"

// Version is the format version this package writes and the only one it
// reads.
const Version = 1

// Layout of version 1; see docs/wal-format.md. All integers little-endian.
const (
	objectMagic = "LGWALOBJ"
	chunkMagic  = "LGCK"

	// Object header: magic[8] version u16 flags u16 chunkCount u32
	// writeTimeMs i64.
	objectHeaderLen = 24
	// Chunk directory record: log i64, offset u64, length u64, entries u32,
	// records u32, payloadBytes u64, minPublish i64, maxPublish i64, crc u32,
	// reserved u32.
	dirRecordLen = 64
	dirCRCLen    = 4

	// Chunk header: magic[4] version u16 flags u16 log i64 entryCount u32
	// recordCount u32 writeTimeMs i64.
	chunkHeaderLen = 32
	// Entry directory record: records u32, payloadLength u32, publishTimeMs i64.
	entryRecordLen = 16
	prefixCRCLen   = 4
	trailerLen     = 4
	// chunkOverhead is a chunk's size apart from entry records and payloads.
	chunkOverhead = chunkHeaderLen + prefixCRCLen + trailerLen

	// minChunkLen is the smallest valid chunk: one entry, empty payload.
	minChunkLen = chunkOverhead + entryRecordLen
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// Entry is one appended entry (one Pulsar SEND): an opaque payload carrying
// Records ≥ 1 records, and the producer's publish time in Unix ms.
type Entry struct {
	Records       int32
	PublishTimeMs int64
	Payload       []byte
}

// ChunkRef locates and summarizes one log's chunk inside an object; it is
// what the engine stores in the index. The chunk occupies the half-open byte
// range [Offset, Offset+Length) of the object. CRC is the chunk's CRC32C
// (over all its bytes but the 4-byte trailer that repeats it).
type ChunkRef struct {
	Log              int64
	Offset, Length   int64
	Entries, Records int32
	PayloadBytes     int64
	MinPublishTimeMs int64
	MaxPublishTimeMs int64
	CRC              uint32
}

// Chunk is a decoded chunk: one log's entries of one object, in append order.
type Chunk struct {
	Log         int64
	WriteTimeMs int64
	// Records is the sum of the entries' Records.
	Records int32
	// CRC is the chunk's CRC32C, as in ChunkRef.CRC.
	CRC     uint32
	Entries []DecodedEntry
}

// DecodedEntry is one entry of a decoded chunk. Payload aliases the decoded
// input (it is nil from DecodeChunkHeaders); PayloadSize is its length.
type DecodedEntry struct {
	Records       int32
	PublishTimeMs int64
	Payload       []byte
	PayloadSize   int
}

// Object is a decoded object header and chunk directory.
type Object struct {
	Version     uint16
	Flags       uint16
	WriteTimeMs int64
	// Size is the object's length in bytes.
	Size int64
	// Chunks are in object order, which is ascending log id.
	Chunks []ChunkRef
}

// Find returns the index in o.Chunks of log's chunk, by binary search.
func (o Object) Find(log int64) (int, bool) {
	lo, hi := 0, len(o.Chunks)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if o.Chunks[m].Log < log {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(o.Chunks) && o.Chunks[lo].Log == log
}

// ChunkPrefixLen is the length of a chunk's verifiable prefix (header, entry
// directory and prefix CRC) for a chunk of the given entry count: the bytes
// DecodeChunkHeaders needs. It returns 0 for a count outside
// [1, MaxEntriesPerChunk].
func ChunkPrefixLen(entries int32) int64 {
	if entries < 1 || entries > MaxEntriesPerChunk {
		return 0
	}
	return chunkHeaderLen + int64(entries)*entryRecordLen + prefixCRCLen
}

// ObjectPrefixLen is the length of an object's header, chunk directory and
// directory CRC for the given chunk count, or 0 for a count outside
// [0, MaxChunksPerObject].
func ObjectPrefixLen(chunks int) int64 {
	if chunks < 0 || chunks > MaxChunksPerObject {
		return 0
	}
	return objectHeaderLen + int64(chunks)*dirRecordLen + dirCRCLen
}
