package actors

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/lakegate/lakegate/murmur3"
	"github.com/lakegate/lakegate/protocol"
)

// This file holds the Key_Shared pieces of the subscription machine: the
// sticky-key hash of an entry and the selector that maps hashes to
// consumers. Both are pure.
//
// Hashes are Pulsar's: Murmur3_32 of the entry's ordering key (else its
// partition key, else the literal "NONE_KEY") mod KeyHashRange.

// KeyHashRange is the size of the Key_Shared hash space: hashes are in
// [0, KeyHashRange).
const KeyHashRange = 65536

// ErrConsumerAssign: a Key_Shared consumer cannot be given the hash ranges
// it asked for (sticky ranges overlapping another consumer's, or a mode
// different from the subscription's). The gateway answers ConsumerAssignError.
var ErrConsumerAssign = errors.New("actors: key_shared consumer assignment")

// HashRange is an inclusive range of key hashes, Start <= End < KeyHashRange.
type HashRange struct{ Start, End int32 }

// KeySharedPolicy is how a Key_Shared consumer gets its hashes.
type KeySharedPolicy struct {
	// Sticky: the consumer owns exactly Ranges (Pulsar's STICKY mode). Else
	// AUTO_SPLIT: the hash space is shared among the consumers by consistent
	// hashing (ringPointsPerConsumer points each), so a consumer joining
	// or leaving moves only the hashes it takes or gives up. A consumer's
	// points are derived from its name, as in Pulsar, so a consumer that
	// reconnects (after a restart of the node, or to another node) gets
	// the same hashes back.
	Sticky bool
	Ranges []HashRange
}

// ringPointsPerConsumer is the number of points an AUTO_SPLIT consumer
// places on the hash ring (Pulsar's default is 100).
const ringPointsPerConsumer = 100

// murmur3Sum32 is the hash Pulsar uses for sticky keys.
func murmur3Sum32(data []byte) uint32 { return murmur3.Sum32(data) }

// KeyHash is the Key_Shared hash of a sticky key.
func KeyHash(key []byte) int32 { return int32(murmur3Sum32(key) % KeyHashRange) }

var noneKey = []byte("NONE_KEY")

// EntryKeyHash is the Key_Shared hash of a stored entry (metadata and
// payload as the producer sent them): its ordering key, else its partition
// key, else "NONE_KEY" (as Pulsar, an unreadable entry counts as keyless).
func EntryKeyHash(payload []byte) int32 {
	meta, _, err := protocol.SplitEntry(payload)
	if err != nil {
		return KeyHash(noneKey)
	}
	md, err := protocol.ParseMetadata(meta)
	switch {
	case err != nil:
		return KeyHash(noneKey)
	case len(md.GetOrderingKey()) > 0:
		return KeyHash(md.GetOrderingKey())
	case md.PartitionKey != nil:
		return KeyHash([]byte(md.GetPartitionKey()))
	}
	return KeyHash(noneKey)
}

type ringPoint struct {
	hash     int32
	consumer uint64
}

type stickyRange struct {
	HashRange
	consumer uint64
}

// keySelector maps hashes to consumers. Its mode is fixed by the first
// consumer and reset when the last one leaves.
type keySelector struct {
	sticky  bool
	ring    []ringPoint   // AUTO_SPLIT: sorted by (hash, consumer)
	ranges  []stickyRange // STICKY: sorted by Start, disjoint
	members int
	// identities: the name each AUTO_SPLIT consumer's ring points are
	// derived from: its consumer name, made unique among the members
	// ("name#1", "name#2" … for namesakes; "consumer-<id>" when unnamed).
	identities map[uint64]string
}

// identity returns a ring identity for a consumer named name, unique
// among the current members.
func (k *keySelector) identity(id uint64, name string) string {
	if name == "" {
		name = "consumer-" + strconv.FormatUint(id, 10)
	}
	taken := map[string]bool{}
	for _, n := range k.identities {
		taken[n] = true
	}
	ident := name
	for i := 1; taken[ident]; i++ {
		ident = name + "#" + strconv.Itoa(i)
	}
	return ident
}

func (k *keySelector) add(id uint64, name string, p KeySharedPolicy) error {
	if k.members > 0 && p.Sticky != k.sticky {
		return fmt.Errorf("%w: subscription and consumer differ in key_shared mode (sticky=%v)", ErrConsumerAssign, k.sticky)
	}
	if p.Sticky {
		if len(p.Ranges) == 0 {
			return fmt.Errorf("%w: sticky consumer without hash ranges", ErrConsumerAssign)
		}
		next := slices.Clone(k.ranges)
		for _, r := range p.Ranges {
			if r.Start < 0 || r.End >= KeyHashRange || r.Start > r.End {
				return fmt.Errorf("%w: bad hash range [%d, %d]", ErrConsumerAssign, r.Start, r.End)
			}
			for _, o := range next {
				if r.Start <= o.End && o.Start <= r.End {
					return fmt.Errorf("%w: hash range [%d, %d] overlaps [%d, %d] of another consumer", ErrConsumerAssign, r.Start, r.End, o.Start, o.End)
				}
			}
			next = append(next, stickyRange{HashRange: r, consumer: id})
		}
		slices.SortFunc(next, func(a, b stickyRange) int { return cmp.Compare(a.Start, b.Start) })
		k.ranges = next
	} else {
		ident := k.identity(id, name)
		if k.identities == nil {
			k.identities = map[uint64]string{}
		}
		k.identities[id] = ident
		for i := range ringPointsPerConsumer {
			h := KeyHash([]byte(ident + "-" + strconv.Itoa(i)))
			k.ring = append(k.ring, ringPoint{hash: h, consumer: id})
		}
		slices.SortFunc(k.ring, func(a, b ringPoint) int {
			return cmp.Or(cmp.Compare(a.hash, b.hash), cmp.Compare(a.consumer, b.consumer))
		})
	}
	k.sticky = p.Sticky
	k.members++
	return nil
}

func (k *keySelector) remove(id uint64) {
	n := len(k.ring) + len(k.ranges)
	k.ring = slices.DeleteFunc(k.ring, func(p ringPoint) bool { return p.consumer == id })
	k.ranges = slices.DeleteFunc(k.ranges, func(r stickyRange) bool { return r.consumer == id })
	delete(k.identities, id)
	if len(k.ring)+len(k.ranges) < n {
		k.members--
	}
}

// owner returns the consumer of hash h; false when nobody owns it (a
// sticky gap, or no consumers).
func (k *keySelector) owner(h int32) (uint64, bool) {
	if k.sticky {
		i, _ := slices.BinarySearchFunc(k.ranges, h, func(r stickyRange, h int32) int {
			switch {
			case r.End < h:
				return -1
			case r.Start > h:
				return 1
			}
			return 0
		})
		if i < len(k.ranges) && k.ranges[i].Start <= h && h <= k.ranges[i].End {
			return k.ranges[i].consumer, true
		}
		return 0, false
	}
	if len(k.ring) == 0 {
		return 0, false
	}
	// The first point at or after h, wrapping around.
	i, _ := slices.BinarySearchFunc(k.ring, h, func(p ringPoint, h int32) int { return cmp.Compare(p.hash, h) })
	if i == len(k.ring) {
		i = 0
	}
	return k.ring[i].consumer, true
}

// rangesByConsumer returns the hashes each consumer owns, as inclusive
// ascending ranges with adjacent ones merged (what owner answers, range by
// range). Its cost is one pass over the ring or the sticky ranges.
func (k *keySelector) rangesByConsumer() map[uint64][]HashRange {
	out := map[uint64][]HashRange{}
	add := func(id uint64, r HashRange) {
		rs := out[id]
		if n := len(rs); n > 0 && rs[n-1].End+1 == r.Start {
			rs[n-1].End = r.End
		} else {
			rs = append(rs, r)
		}
		out[id] = rs
	}
	if k.sticky {
		for _, r := range k.ranges {
			add(r.consumer, r.HashRange)
		}
		return out
	}
	if len(k.ring) == 0 {
		return out
	}
	// A point owns the hashes after the previous point up to its own (the
	// first of equal points wins); the first point also owns the hashes
	// after the last one, wrapping around.
	first := k.ring[0]
	start := int32(0)
	for _, p := range k.ring {
		if p.hash < start {
			continue // an equal point: the first one took the hash
		}
		add(p.consumer, HashRange{Start: start, End: p.hash})
		start = p.hash + 1
	}
	if start < KeyHashRange {
		add(first.consumer, HashRange{Start: start, End: KeyHashRange - 1}) // last, so still ascending
	}
	return out
}
