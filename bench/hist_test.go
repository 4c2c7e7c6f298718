package bench

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestHistBucketsTile(t *testing.T) {
	// Every bucket starts right after the previous one ends, and a value
	// maps to the bucket whose range holds it.
	for i := 1; i < histBuckets; i++ {
		lo := histUpper(i-1) + 1
		if histIndex(lo) != i || histIndex(histUpper(i)) != i {
			t.Fatalf("bucket %d: [%d, %d] maps to %d..%d", i, lo, histUpper(i), histIndex(lo), histIndex(histUpper(i)))
		}
	}
	if got := histIndex(1<<63 - 1); got != histBuckets-1 {
		t.Fatalf("max int64 in bucket %d, want %d", got, histBuckets-1)
	}
}

func TestHistQuantilesWithinPrecision(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h, a, b latencyHist
	var vals []int64
	for i := 0; i < 100000; i++ {
		// Log-uniform from 1 µs to ~1 s, like append latencies.
		v := int64(1000*(1<<r.IntN(20))) * int64(100+r.IntN(100)) / 100
		vals = append(vals, v)
		h.Record(time.Duration(v))
		if i%2 == 0 {
			a.Record(time.Duration(v))
		} else {
			b.Record(time.Duration(v))
		}
	}
	a.Merge(&b)
	slices.Sort(vals)
	for _, q := range []float64{0, 0.5, 0.9, 0.99, 0.999, 1} {
		rank := max(int(q*float64(len(vals))+0.999999), 1)
		want := vals[rank-1]
		got := int64(h.Quantile(q))
		if got < want || float64(got-want) > float64(want)/histHalf {
			t.Errorf("q%v = %d, want %d within %.2f%%", q, got, want, 100.0/histHalf)
		}
		if m := a.Quantile(q); int64(m) != got {
			t.Errorf("merged q%v = %d, want %d", q, m, got)
		}
	}
	if h.Max() != time.Duration(vals[len(vals)-1]) || h.Count() != uint64(len(vals)) {
		t.Fatalf("max %v count %d", h.Max(), h.Count())
	}
	var empty latencyHist
	if empty.Quantile(0.99) != 0 || empty.Mean() != 0 {
		t.Fatal("empty histogram not zero")
	}
}
