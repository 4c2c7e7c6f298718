package gateway

import (
	"sync"
	"sync/atomic"
	"time"
)

// rateWindow is the shortest interval a rate is measured over.
const rateWindow = time.Second

// rateMeter counts events (messages and bytes) and reports their rate per
// second over the interval between two samples at least rateWindow apart:
// each read (a stats request) takes a sample when the newest one is older
// than rateWindow, and the rate is measured from the sample before it. So
// a tool that polls stats every N seconds sees the rate of the last N
// seconds, as with Pulsar's stats interval. Adds are lock-free.
type rateMeter struct {
	msgs, bytes atomic.Int64
	mu          sync.Mutex
	samples     [2]rateSample // [0] older, [1] newer; zero time: none yet
}

type rateSample struct {
	at          time.Time
	msgs, bytes int64
}

func (r *rateMeter) add(msgs, bytes int) {
	r.msgs.Add(int64(msgs))
	r.bytes.Add(int64(bytes))
}

// rates returns messages and bytes per second, and the counters.
func (r *rateMeter) rates(now time.Time) (msgRate, byteRate float64, msgs, bytes int64) {
	msgs, bytes = r.msgs.Load(), r.bytes.Load()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.samples[1].at.IsZero() || now.Sub(r.samples[1].at) >= rateWindow {
		r.samples[0], r.samples[1] = r.samples[1], rateSample{at: now, msgs: msgs, bytes: bytes}
	}
	base := r.samples[0]
	if base.at.IsZero() {
		return 0, 0, msgs, bytes
	}
	d := now.Sub(base.at).Seconds()
	if d <= 0 {
		return 0, 0, msgs, bytes
	}
	return float64(msgs-base.msgs) / d, float64(bytes-base.bytes) / d, msgs, bytes
}
