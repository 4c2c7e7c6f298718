package cursor

// Benchmarks of the state machine and the encoding.
//
//	go test -run '^$' -bench . -benchmem ./engine/cursor/
//
// Workloads (ack sequences shared with roaring_compare_test.go):
//   - sequential: every record acked in order, one Ack per record;
//   - holes-1%: records acked in order except 1% (failed / nacked messages)
//     acked 5 000 records later, as after a redelivery (~50 ranges);
//   - window-20k: the records of each 20 000-record window acked in random
//     order (a Shared subscription with many consumers; up to ~5 000 ranges,
//     inserts in the middle of the range list).

import (
	"math/rand/v2"
	"testing"
)

// ackSource yields the offsets of a workload, one record per ack.
type ackSource interface{ next() int64 }

type sequentialAcks struct{ o int64 }

func (s *sequentialAcks) next() int64 { s.o++; return s.o - 1 }

// holeAcks acks records in order, deferring a share of them by delay records.
type holeAcks struct {
	rng      *rand.Rand
	o        int64
	holePerM int     // deferred records per million
	delay    int64   // records
	pending  []int64 // deferred offsets, ascending by due time
	due      []int64
}

func (h *holeAcks) next() int64 {
	if len(h.due) > 0 && h.due[0] <= h.o {
		o := h.pending[0]
		h.pending, h.due = h.pending[1:], h.due[1:]
		return o
	}
	for {
		o := h.o
		h.o++
		if h.rng.IntN(1_000_000) < h.holePerM {
			h.pending, h.due = append(h.pending, o), append(h.due, o+h.delay)
			continue
		}
		return o
	}
}

// windowAcks acks each window of size records in one fixed random order.
type windowAcks struct {
	perm []int64
	i    int64
}

func newWindowAcks(size int) *windowAcks {
	rng := rand.New(rand.NewPCG(1, 2))
	w := &windowAcks{perm: make([]int64, size)}
	for i, p := range rng.Perm(size) {
		w.perm[i] = int64(p)
	}
	return w
}

func (w *windowAcks) next() int64 {
	n := int64(len(w.perm))
	o := (w.i/n)*n + w.perm[w.i%n]
	w.i++
	return o
}

var workloads = []struct {
	name string
	src  func() ackSource
}{
	{"holes-1%", func() ackSource {
		return &holeAcks{rng: rand.New(rand.NewPCG(3, 4)), holePerM: 10_000, delay: 5_000}
	}},
	{"holes-10%", func() ackSource {
		return &holeAcks{rng: rand.New(rand.NewPCG(3, 4)), holePerM: 100_000, delay: 5_000}
	}},
	{"window-20k", func() ackSource { return newWindowAcks(20_000) }},
}

func BenchmarkAckSequential(b *testing.B) {
	b.Run("absorbed", func(b *testing.B) {
		s := New(-1)
		for i := 0; b.Loop(); i++ {
			if err := s.Ack(int64(i), 1); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("behind-one-hole", func(b *testing.B) { // record 0 never acked: the last range grows
		s := New(-1)
		for i := 0; b.Loop(); i++ {
			if err := s.Ack(int64(i)+1, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkAckRandomHoles(b *testing.B) {
	for _, w := range workloads {
		b.Run(w.name, func(b *testing.B) {
			s, src := New(-1), w.src()
			maxRanges := 0
			for b.Loop() {
				if err := s.Ack(src.next(), 1); err != nil {
					b.Fatal(err)
				}
				maxRanges = max(maxRanges, s.RangeCount())
			}
			b.ReportMetric(float64(maxRanges), "max-ranges")
		})
	}
}

// tenKRanges returns a state at the bound: 10 000 ranges, dense (one-record
// holes) or spread over the offset space.
func tenKRanges(spread bool) *State {
	s := New(-1)
	step := int64(1)
	if spread {
		step = MaxOffset / (2 * MaxAckedRanges)
	}
	for i := range int64(MaxAckedRanges) {
		if err := s.Ack(1+(2*i+1)*step, step); err != nil {
			panic(err)
		}
	}
	return s
}

func BenchmarkEncode10kRanges(b *testing.B) {
	for _, spread := range []bool{false, true} {
		name := map[bool]string{false: "dense", true: "spread"}[spread]
		s := tenKRanges(spread)
		b.Run(name, func(b *testing.B) {
			buf := make([]byte, 0, MaxEncodedSize)
			for b.Loop() {
				buf = AppendEncode(buf[:0], s)
			}
			b.ReportMetric(float64(len(buf)), "bytes")
			b.ReportMetric(float64(16*s.RangeCount()), "mem-bytes")
			b.SetBytes(int64(len(buf)))
		})
	}
}

func BenchmarkDecode10kRanges(b *testing.B) {
	for _, spread := range []bool{false, true} {
		name := map[bool]string{false: "dense", true: "spread"}[spread]
		enc := Encode(tenKRanges(spread))
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(enc)))
			for b.Loop() {
				if _, err := Decode(enc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkQueries10kRanges: the read-path queries on a state at the bound.
func BenchmarkQueries10kRanges(b *testing.B) {
	s := tenKRanges(false)
	b.Run("IsAcked", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			s.IsAcked(int64(i % 20_000))
		}
	})
	b.Run("NextUnackedFrom", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			s.NextUnackedFrom(int64(i % 20_000))
		}
	})
	b.Run("UnackedIn-entry-of-100", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			o := int64(i % 20_000)
			s.UnackedIn(o, o+100)
		}
	})
}
