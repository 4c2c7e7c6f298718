package wal

import (
	"errors"
	"math"
)

// Limits of format version 1 (docs/wal-format.md, "Limits"). A Builder never
// produces an object that breaks them; decoders reject one that does with
// ErrTooLarge.
const (
	// MaxEntryBytes is the largest payload of one entry, in bytes (64 MiB).
	MaxEntryBytes = 64 << 20
	// MaxEntriesPerChunk is the most entries one log may have in one object.
	MaxEntriesPerChunk = 1 << 16
	// MaxRecordsPerChunk is the most records one log may have in one object
	// (record counts are int32 in the API).
	MaxRecordsPerChunk = math.MaxInt32
	// MaxChunksPerObject is the most logs (chunks) one object may hold.
	MaxChunksPerObject = 1 << 16
	// MaxObjectBytes is the largest object, in bytes (256 MiB).
	MaxObjectBytes = 256 << 20
)

// A fresh Builder must always fit one valid entry.
const _ = uint(MaxObjectBytes - (objectHeaderLen + dirCRCLen + dirRecordLen + chunkOverhead + entryRecordLen + MaxEntryBytes))

// Sentinel errors. They come back wrapped with detail; compare with errors.Is.
var (
	// ErrCorrupt is returned by the decoders for input that is not a valid
	// object or chunk: bad magic, CRC mismatch, truncation, trailing bytes,
	// a field out of bounds, a directory that disagrees with its chunk, a
	// non-zero reserved field.
	ErrCorrupt = errors.New("wal: corrupt")
	// ErrUnsupportedVersion is returned by the decoders for a format version
	// or a flag bit this code does not know (written by a newer writer).
	ErrUnsupportedVersion = errors.New("wal: unsupported version")
	// ErrTooLarge is returned by the decoders for well-formed input that
	// exceeds a limit above, and by ValidateEntry for an entry whose payload
	// exceeds MaxEntryBytes.
	ErrTooLarge = errors.New("wal: too large")
	// ErrInvalidEntry is returned by ValidateEntry for an entry with fewer
	// than one record.
	ErrInvalidEntry = errors.New("wal: invalid entry")
)
