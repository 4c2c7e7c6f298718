package broker

import (
	"sync/atomic"
	"time"
)

// WriteLatencyBoundsMs are the upper bounds, in milliseconds, of the
// buckets of WriteLatency: Pulsar's storage write latency buckets
// (pulsar_storage_write_latency_le_0_5 … _le_1000; a last bucket,
// overflow, takes what is slower).
var WriteLatencyBoundsMs = [...]float64{0.5, 1, 5, 10, 20, 50, 100, 200, 1000}

// WriteLatency counts a topic's appends by their latency, in Pulsar's
// buckets (WriteLatencyBoundsMs, then overflow). Safe for concurrent use;
// it holds a fixed number of counters.
type WriteLatency struct {
	buckets [len(WriteLatencyBoundsMs) + 1]atomic.Int64
	count   atomic.Int64
	sumUs   atomic.Int64 // total latency, in microseconds
}

// WriteLatencySnapshot is a WriteLatency's counters at one moment.
type WriteLatencySnapshot struct {
	// Buckets holds the appends whose latency was at most the matching
	// WriteLatencyBoundsMs bound and above the previous one (not
	// cumulative, as Pulsar's); the last one those above 1 s.
	Buckets [len(WriteLatencyBoundsMs) + 1]int64
	Count   int64
	SumMs   float64
}

// Observe counts one append of latency d.
func (w *WriteLatency) Observe(d time.Duration) {
	ms := float64(d) / float64(time.Millisecond)
	i := 0
	for i < len(WriteLatencyBoundsMs) && ms > WriteLatencyBoundsMs[i] {
		i++
	}
	w.buckets[i].Add(1)
	w.count.Add(1)
	w.sumUs.Add(d.Microseconds())
}

// Snapshot reads the counters (each one atomically; not all together).
func (w *WriteLatency) Snapshot() WriteLatencySnapshot {
	var s WriteLatencySnapshot
	for i := range w.buckets {
		s.Buckets[i] = w.buckets[i].Load()
	}
	s.Count = w.count.Load()
	s.SumMs = float64(w.sumUs.Load()) / 1000
	return s
}
