package cursor

// Evidence for choosing a sorted range list over a roaring64 bitmap (see
// doc.go): the same workloads and 10 000-range states on roaring64.
//
//	go test -run '^$' -bench 'Roaring64|AckRandomHoles|EncodeShapes' -benchmem ./engine/cursor/
//
// The roaring64 variant is given an advantage: it does not keep the number
// of ranges (which the bound needs) and advances mark-delete with Rank-based
// searches instead of a range walk.

import (
	"bytes"
	"testing"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
)

// roaringState is the minimal roaring64 counterpart of State.Ack.
type roaringState struct {
	md int64
	bm *roaring64.Bitmap
}

func (r *roaringState) ack(lo, hi int64) {
	lo = max(lo, r.md+1)
	if hi <= lo {
		return
	}
	r.bm.AddRange(uint64(lo), uint64(hi))
	if lo != r.md+1 {
		return
	}
	end := r.nextAbsent(uint64(hi))
	r.bm.RemoveRange(0, end)
	r.md = int64(end) - 1
}

// nextAbsent returns the first value ≥ x not in the bitmap (exponential then
// binary search on Rank).
func (r *roaringState) nextAbsent(x uint64) uint64 {
	if !r.bm.Contains(x) {
		return x
	}
	base := r.bm.Rank(x - 1) // values < x
	full := func(n uint64) bool { return r.bm.Rank(x+n-1)-base == n }
	lo, hi := uint64(1), uint64(2)
	for full(hi) {
		lo, hi = hi, hi*2
	}
	for lo+1 < hi { // full(lo), !full(hi)
		if m := (lo + hi) / 2; full(m) {
			lo = m
		} else {
			hi = m
		}
	}
	return x + lo
}

func BenchmarkRoaring64AckRandomHoles(b *testing.B) {
	for _, w := range workloads {
		b.Run(w.name, func(b *testing.B) {
			r, src := &roaringState{md: -1, bm: roaring64.New()}, w.src()
			for b.Loop() {
				o := src.next()
				r.ack(o, o+1)
			}
		})
	}
}

// shapes are acknowledgement states of typical and extreme forms, by their
// ranges above mark-delete -1 (record 0 unacked).
var shapes = []struct {
	name   string
	ranges func() [][2]int64
}{
	// 10 000 one-record ranges with one-record holes: the bitmap's best case.
	{"10k-alternating", func() [][2]int64 { return tenKRanges(false).Ranges() }},
	// 10 000 runs of 1 000 records with 10-record holes (10 M records).
	{"10k-runs-of-1000", func() [][2]int64 { return runs(10_000, 1_000, 10) }},
	// 100 runs of 1 M records with single holes (100 M records): long runs.
	{"100-runs-of-1M", func() [][2]int64 { return runs(100, 1_000_000, 1) }},
	// The holes-1% workload after 1 M acks (~80 holes, runs of ~100).
	{"holes-1%-snapshot", func() [][2]int64 {
		s, src := New(-1), workloads[0].src()
		for range 1_000_000 {
			_ = s.Ack(src.next(), 1)
		}
		return s.Ranges()
	}},
}

func runs(n int, length, hole int64) [][2]int64 {
	rs := make([][2]int64, n)
	for i := range rs {
		start := 1 + int64(i)*(length+hole)
		rs[i] = [2]int64{start, start + length}
	}
	return rs
}

// BenchmarkEncodeShapes compares encoded sizes ("bytes") and memory
// ("mem-bytes") of the range list and of a run-optimized roaring64 bitmap
// (portable serialization) on the same states.
func BenchmarkEncodeShapes(b *testing.B) {
	for _, sh := range shapes {
		rs := sh.ranges()
		s := New(-1)
		bm := roaring64.New()
		for _, r := range rs {
			if err := s.Ack(r[0], r[1]-r[0]); err != nil {
				b.Fatal(err)
			}
			bm.AddRange(uint64(r[0]), uint64(r[1]))
		}
		bm.RunOptimize()
		b.Run("ranges/"+sh.name, func(b *testing.B) {
			var buf []byte
			for b.Loop() {
				buf = AppendEncode(buf[:0], s)
			}
			b.ReportMetric(float64(len(buf)), "bytes")
			b.ReportMetric(float64(16*s.RangeCount()), "mem-bytes")
		})
		b.Run("roaring64/"+sh.name, func(b *testing.B) {
			var buf bytes.Buffer
			for b.Loop() {
				buf.Reset()
				if _, err := bm.WriteTo(&buf); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(buf.Len()), "bytes")
			b.ReportMetric(float64(bm.GetSizeInBytes()), "mem-bytes")
		})
	}
}

// TestRoaring64Equivalent keeps the comparison honest: on every workload the
// roaring64 variant acknowledges exactly what State does.
func TestRoaring64Equivalent(t *testing.T) {
	for _, w := range workloads {
		s, r, src := New(-1), &roaringState{md: -1, bm: roaring64.New()}, w.src()
		for range 50_000 {
			o := src.next()
			if err := s.Ack(o, 1); err != nil {
				t.Fatal(err)
			}
			r.ack(o, o+1)
		}
		if r.md != s.MarkDeleteOffset() || int64(r.bm.GetCardinality()) != s.AckedCount() {
			t.Fatalf("%s: roaring md=%d card=%d, state %v", w.name, r.md, r.bm.GetCardinality(), s)
		}
		for _, rg := range s.Ranges() {
			if !r.bm.Contains(uint64(rg[0])) || !r.bm.Contains(uint64(rg[1]-1)) || r.bm.Contains(uint64(rg[1])) {
				t.Fatalf("%s: range %v differs", w.name, rg)
			}
		}
	}
}
