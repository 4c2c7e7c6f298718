package actors

// Topic compaction (docs/compacted-topics.md): the pure parts — the
// latest-record-per-key computation (KeyCompactor) and the format of a
// compacted log's entries — and the view a readCompacted subscription
// reads through (CompactedView).
//
// A compacted log is a log of its own (an internal stream the gateway
// creates per compaction) whose entries are, in the original offset order,
// the original entries whose every record survives, and — for a batch of
// which only some messages survive — each surviving message as an entry of
// its own (protocol.SingleFromBatch) at its record's offset. Each is
// prefixed with a header naming that offset:
//
//	"LGC1"                 magic (4 bytes)
//	u64 offset             the entry's (or message's) offset in the topic's log
//	u32 records            its record count (1 for a message out of a batch)
//	…                      the entry, byte-exact (or the message's entry)
//
// (integers big-endian). Each compacted entry is appended with publish
// time offset+1, so that a reader finds the compacted entry of an original
// offset with Log.SearchOffset.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
)

// ErrCompactionTooManyKeys: a compaction met more distinct keys than
// KeyCompactor's bound; it is abandoned (the previous compacted view stays).
var ErrCompactionTooManyKeys = errors.New("actors: too many keys to compact")

// errCompactedEntry: a compacted log entry that does not decode.
var errCompactedEntry = errors.New("actors: malformed compacted entry")

var compactedMagic = []byte("LGC1")

// CompactedEntry is one entry of a compacted log.
type CompactedEntry struct {
	// Offset and Records are the entry's place in the topic's log.
	Offset  int64
	Records int32
	// Entry is the stored entry (aliases the decoded payload).
	Entry []byte
}

// compactedHeaderBytes is the size of a compacted entry's header.
const compactedHeaderBytes = 4 + 8 + 4

// EncodeCompactedEntry appends the compacted-log form of e to dst.
func EncodeCompactedEntry(dst []byte, e CompactedEntry) []byte {
	dst = append(dst, compactedMagic...)
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.Offset))
	dst = binary.BigEndian.AppendUint32(dst, uint32(e.Records))
	return append(dst, e.Entry...)
}

// DecodeCompactedEntry decodes a compacted log entry's payload.
func DecodeCompactedEntry(b []byte) (CompactedEntry, error) {
	if len(b) < compactedHeaderBytes || string(b[:4]) != string(compactedMagic) {
		return CompactedEntry{}, fmt.Errorf("%w: no header", errCompactedEntry)
	}
	e := CompactedEntry{Offset: int64(binary.BigEndian.Uint64(b[4:])), Records: int32(binary.BigEndian.Uint32(b[12:])),
		Entry: b[compactedHeaderBytes:]}
	if e.Offset < 0 || e.Records < 1 {
		return CompactedEntry{}, fmt.Errorf("%w: offset %d, %d records", errCompactedEntry, e.Offset, e.Records)
	}
	return e, nil
}

// CompactedView is a topic-partition's current compacted log, as a
// readCompacted subscription reads it. Implementations are safe for
// concurrent use.
type CompactedView interface {
	// Current returns the compacted log and its horizon (the offset just
	// past what it covers); ok is false when the topic was never
	// compacted.
	Current(ctx context.Context) (log lakestream.Log, horizon int64, ok bool, err error)
}

// recordRef names one record: its entry's offset and its index in it.
type recordRef struct {
	entry int64
	index int32
}

// KeyCompactor computes a topic compaction: fed every entry up to the
// horizon in offset order, it keeps the latest record of each key, drops a
// key whose latest record is a tombstone (empty or null value), and drops
// records without a key (as Pulsar does since 3.2). An entry whose records
// cannot be read (malformed, encrypted batch) is kept whole. Memory: one
// map entry per live key, bounded by maxKeys.
type KeyCompactor struct {
	maxKeys int
	latest  map[string]recordRef
	whole   map[int64]int32 // unreadable entries, kept whole: offset → records
	records int64           // records fed
}

// NewKeyCompactor returns a compactor holding at most maxKeys keys.
func NewKeyCompactor(maxKeys int) *KeyCompactor {
	return &KeyCompactor{maxKeys: maxKeys, latest: map[string]recordRef{}, whole: map[int64]int32{}}
}

// Add feeds the entry at offset off with its record keys (keys nil: the
// entry could not be read; records is its record count).
func (k *KeyCompactor) Add(off int64, records int32, keys []protocol.RecordKey) error {
	k.records += int64(records)
	if keys == nil {
		k.whole[off] = records
		return nil
	}
	for i, rk := range keys {
		switch {
		case !rk.HasKey:
		case rk.Tombstone:
			delete(k.latest, rk.Key)
		default:
			if _, ok := k.latest[rk.Key]; !ok && len(k.latest) >= k.maxKeys {
				return fmt.Errorf("%w: more than %d", ErrCompactionTooManyKeys, k.maxKeys)
			}
			k.latest[rk.Key] = recordRef{entry: off, index: int32(i)}
		}
	}
	return nil
}

// Survivors returns, for every entry that keeps at least one record, the
// indexes of the records it keeps (nil: all of them), and how many records
// fed were removed.
func (k *KeyCompactor) Survivors() (map[int64][]int32, int64) {
	out := map[int64][]int32{}
	kept := int64(0)
	for _, r := range k.latest {
		out[r.entry] = append(out[r.entry], r.index)
		kept++
	}
	for off, n := range k.whole {
		out[off] = nil
		kept += int64(n)
	}
	return out, k.records - kept
}

// Records is the number of records fed.
func (k *KeyCompactor) Records() int64 { return k.records }

// Keys is the number of keys held.
func (k *KeyCompactor) Keys() int { return len(k.latest) }
