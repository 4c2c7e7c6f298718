package actors

// Topic compaction (docs/compacted-topics.md): the pure parts — the
// latest-record-per-key computation (KeyCompactor) and the format of a
// compacted log's entries — and the view a readCompacted subscription
// reads through (CompactedView).
//
// A compacted log is a log of its own (an internal stream the gateway
// creates per compaction) whose entries are the original entries that
// hold at least one surviving record, in the original offset order, each
// prefixed with a header naming its original offset and the records of it
// that were superseded:
//
//	"LGC1"                 magic (4 bytes)
//	u64 offset             the entry's offset in the topic's log
//	u32 records            its record count
//	u32 n                  words of the superseded-record mask
//	n × u64 mask           bit i (word i/64, bit i%64) = record i is superseded
//	…                      the original entry, byte-exact
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
	// Superseded marks the records of the entry that compaction removed
	// (bit i = record i); nil when every record survives.
	Superseded []uint64
	// Entry is the original entry, byte-exact (aliases the decoded payload).
	Entry []byte
}

// EncodeCompactedEntry appends the compacted-log form of e to dst.
func EncodeCompactedEntry(dst []byte, e CompactedEntry) []byte {
	dst = append(dst, compactedMagic...)
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.Offset))
	dst = binary.BigEndian.AppendUint32(dst, uint32(e.Records))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(e.Superseded)))
	for _, w := range e.Superseded {
		dst = binary.BigEndian.AppendUint64(dst, w)
	}
	return append(dst, e.Entry...)
}

// DecodeCompactedEntry decodes a compacted log entry's payload.
func DecodeCompactedEntry(b []byte) (CompactedEntry, error) {
	const head = 4 + 8 + 4 + 4
	if len(b) < head || string(b[:4]) != string(compactedMagic) {
		return CompactedEntry{}, fmt.Errorf("%w: no header", errCompactedEntry)
	}
	e := CompactedEntry{Offset: int64(binary.BigEndian.Uint64(b[4:])), Records: int32(binary.BigEndian.Uint32(b[12:]))}
	n := binary.BigEndian.Uint32(b[16:])
	if e.Offset < 0 || e.Records < 1 || uint64(n) > uint64(e.Records+63)/64 || uint64(len(b)-head) < 8*uint64(n) {
		return CompactedEntry{}, fmt.Errorf("%w: offset %d, %d records, %d mask words", errCompactedEntry, e.Offset, e.Records, n)
	}
	b = b[head:]
	if n > 0 {
		e.Superseded = make([]uint64, n)
		for i := range e.Superseded {
			e.Superseded[i] = binary.BigEndian.Uint64(b[8*i:])
		}
	}
	e.Entry = b[8*n:]
	return e, nil
}

// superseded reports whether record i of e was removed.
func (e CompactedEntry) superseded(i int) bool {
	return i/64 < len(e.Superseded) && e.Superseded[i/64]&(1<<(i%64)) != 0
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

// SupersededMask is the mask of the records of an entry of n records that
// are not in keep (nil keep: none superseded).
func SupersededMask(n int32, keep []int32) []uint64 {
	if keep == nil {
		return nil
	}
	mask := make([]uint64, (n+63)/64)
	for i := range n {
		mask[i/64] |= 1 << (i % 64)
	}
	for _, i := range keep {
		mask[i/64] &^= 1 << (i % 64)
	}
	for _, w := range mask {
		if w != 0 {
			return mask
		}
	}
	return nil
}
