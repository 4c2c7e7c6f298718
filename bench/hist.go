package bench

import (
	"math"
	"math/bits"
	"time"
)

// histSubBits sets the histogram's precision: every power-of-two range of
// values is split into 2^(histSubBits-1) equal buckets, so a recorded value
// is reported within 1/2^(histSubBits-1) (0.8 %) of itself.
const histSubBits = 8

const (
	histSub     = 1 << histSubBits
	histHalf    = histSub / 2
	histBuckets = (63-histSubBits)*histHalf + histSub // covers every int64 ≥ 0
)

// latencyHist is an HDR-style histogram of durations: log-linear buckets
// (a power-of-two magnitude, then histHalf linear steps inside it) with
// bounded relative error and a fixed size (57 KiB), independent of the
// range recorded. Not safe for concurrent use: give each goroutine its own
// and merge them.
type latencyHist struct {
	counts   [histBuckets]uint64
	n        uint64
	sum      float64 // nanoseconds, for the mean
	min, max int64   // nanoseconds; valid when n > 0
}

// histIndex is the bucket of v (≥ 0). Values below histSub have a bucket
// each; above, v is shifted right until it has histSubBits bits, and that
// top part (in [histHalf, histSub)) picks the step inside its magnitude.
func histIndex(v int64) int {
	if v < 0 {
		v = 0
	}
	shift := max(0, bits.Len64(uint64(v))-histSubBits)
	return shift*histHalf + int(v>>shift)
}

// histUpper is the largest value that falls in bucket i.
func histUpper(i int) int64 {
	if i < histSub {
		return int64(i)
	}
	shift := (i-histSub)/histHalf + 1
	top := int64(i - shift*histHalf)
	return (top+1)<<shift - 1
}

// Record adds one duration (negative durations count as 0).
func (h *latencyHist) Record(d time.Duration) {
	v := max(int64(d), 0)
	h.counts[histIndex(v)]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if h.n == 0 || v > h.max {
		h.max = v
	}
	h.n++
	h.sum += float64(v)
}

// Merge adds every value recorded in o.
func (h *latencyHist) Merge(o *latencyHist) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	if h.n == 0 || o.max > h.max {
		h.max = o.max
	}
	h.n += o.n
	h.sum += o.sum
}

// Count is the number of recorded values.
func (h *latencyHist) Count() uint64 { return h.n }

// Max is the largest recorded value (0 when empty).
func (h *latencyHist) Max() time.Duration { return time.Duration(h.max) }

// Mean is the mean of the recorded values (0 when empty).
func (h *latencyHist) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum / float64(h.n))
}

// Quantile returns the value at quantile q in [0, 1]: the upper bound of
// the bucket holding the ceil(q·n)-th smallest value, clamped to the
// recorded minimum and maximum (so Quantile(1) is Max exactly). 0 when
// empty.
func (h *latencyHist) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	q = min(max(q, 0), 1)
	rank := max(uint64(math.Ceil(q*float64(h.n))), 1)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(min(max(histUpper(i), h.min), h.max))
		}
	}
	return time.Duration(h.max)
}
