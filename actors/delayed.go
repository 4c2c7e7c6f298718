package actors

import (
	"container/heap"
)

// delayIndex holds the entries a Shared or Key_Shared subscription read
// before their deliver_at_time (Pulsar's delayed delivery), ordered by
// that time. It is bounded: at maxEntries, adding an entry evicts the one
// due last (possibly the new one), and the index remembers the lowest
// offset it evicted so that the subscription reads the log again from
// there once the index has room (see Subscription.Tick). Nothing of it is
// persisted: after a restart or an ownership move the subscription reads
// every unacknowledged entry again and the index is rebuilt as it goes.
type delayIndex struct {
	maxEntries int
	h          delayHeap
	at         map[int64]int // entry offset → index in h
	// evictedFrom is the lowest offset evicted since the last rescan;
	// valid when evicted.
	evictedFrom int64
	evicted     bool
}

type delayedEntry struct {
	offset    int64
	deliverAt int64 // Unix ms
	records   int32
	hash      int32 // Key_Shared key hash
}

// delayHeap is a min-heap by (deliverAt, offset) that keeps delayIndex.at
// up to date.
type delayHeap struct {
	items []delayedEntry
	at    map[int64]int
}

func (h *delayHeap) Len() int { return len(h.items) }
func (h *delayHeap) Less(i, j int) bool {
	a, b := h.items[i], h.items[j]
	if a.deliverAt != b.deliverAt {
		return a.deliverAt < b.deliverAt
	}
	return a.offset < b.offset
}
func (h *delayHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.at[h.items[i].offset] = i
	h.at[h.items[j].offset] = j
}
func (h *delayHeap) Push(x any) {
	e := x.(delayedEntry)
	h.at[e.offset] = len(h.items)
	h.items = append(h.items, e)
}
func (h *delayHeap) Pop() any {
	e := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	delete(h.at, e.offset)
	return e
}

func newDelayIndex(maxEntries int) delayIndex {
	at := map[int64]int{}
	return delayIndex{maxEntries: maxEntries, at: at, h: delayHeap{at: at}}
}

// len is the number of entries held.
func (d *delayIndex) len() int { return d.h.Len() }

// has reports whether the entry at offset is held.
func (d *delayIndex) has(offset int64) bool {
	_, ok := d.at[offset]
	return ok
}

// add holds e (an entry not held yet), evicting the entry due last when
// the index is full.
func (d *delayIndex) add(e delayedEntry) {
	if d.h.Len() < d.maxEntries {
		heap.Push(&d.h, e)
		return
	}
	// Full: the entry due last goes (a leaf of the min-heap).
	last := -1
	for i := d.h.Len() / 2; i < d.h.Len(); i++ {
		if last < 0 || d.h.Less(last, i) {
			last = i
		}
	}
	victim := e
	if last >= 0 && delayLess(e, d.h.items[last]) {
		victim = d.h.items[last]
		heap.Remove(&d.h, last)
		heap.Push(&d.h, e)
	}
	if !d.evicted || victim.offset < d.evictedFrom {
		d.evictedFrom = victim.offset
	}
	d.evicted = true
}

func delayLess(a, b delayedEntry) bool {
	if a.deliverAt != b.deliverAt {
		return a.deliverAt < b.deliverAt
	}
	return a.offset < b.offset
}

// next returns the earliest deliver_at_time held (ok false when empty).
func (d *delayIndex) next() (int64, bool) {
	if d.h.Len() == 0 {
		return 0, false
	}
	return d.h.items[0].deliverAt, true
}

// popDue removes and returns the entries due at now (deliverAt ≤ now).
func (d *delayIndex) popDue(now int64) []delayedEntry {
	var out []delayedEntry
	for d.h.Len() > 0 && d.h.items[0].deliverAt <= now {
		out = append(out, heap.Pop(&d.h).(delayedEntry))
	}
	return out
}

// takeRescan returns the offset to read the log again from when entries
// were evicted and the index is at most half full now (ok false
// otherwise); the eviction is then forgotten.
func (d *delayIndex) takeRescan() (int64, bool) {
	if !d.evicted || d.h.Len() > d.maxEntries/2 {
		return 0, false
	}
	d.evicted = false
	return d.evictedFrom, true
}

// removeBelow forgets every entry below offset before (acknowledged by an
// expiry).
func (d *delayIndex) removeBelow(before int64) {
	var offs []int64
	for off := range d.at {
		if off < before {
			offs = append(offs, off)
		}
	}
	for _, off := range offs {
		heap.Remove(&d.h, d.at[off])
	}
}

// reset forgets everything (the subscription reads the log again).
func (d *delayIndex) reset() { *d = newDelayIndex(d.maxEntries) }
