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

// tokenBucket enforces a RateLimit (publish and dispatch rates): tokens
// accrue at the rate and are capped at one period's worth (the burst); a
// take may leave them below zero (what was read is not refused: the next
// read waits). Times are passed in, so tests drive it with their own
// clock. Safe for concurrent use.
type tokenBucket struct {
	limited     atomic.Bool // !limit.Off(): without it, no lock is taken
	mu          sync.Mutex
	limit       RateLimit
	msgs, bytes float64   // tokens
	at          time.Time // last refill; zero: full at the next one
}

// set changes the limit; a changed one starts full.
func (b *tokenBucket) set(l RateLimit) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if l != b.limit {
		b.limit, b.at = l, time.Time{}
		b.limited.Store(!l.Off())
	}
}

func (b *tokenBucket) refillLocked(now time.Time) {
	l := b.limit
	if b.at.IsZero() {
		b.msgs, b.bytes, b.at = float64(l.Msgs), float64(l.Bytes), now
		return
	}
	periods := now.Sub(b.at).Seconds() / l.period().Seconds()
	if periods <= 0 {
		return
	}
	b.at = now
	if l.Msgs > 0 {
		b.msgs = min(b.msgs+periods*float64(l.Msgs), float64(l.Msgs))
	}
	if l.Bytes > 0 {
		b.bytes = min(b.bytes+periods*float64(l.Bytes), float64(l.Bytes))
	}
}

// take counts msgs messages and n bytes; it returns how long the next one
// must wait (0: none).
func (b *tokenBucket) take(now time.Time, msgs, n int) time.Duration {
	if !b.limited.Load() {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.limit.Off() {
		return 0
	}
	b.refillLocked(now)
	b.msgs -= float64(msgs)
	b.bytes -= float64(n)
	return b.delayLocked()
}

// delay is how long until a message may go: until at least one message
// token and a positive byte balance are back.
func (b *tokenBucket) delay(now time.Time) time.Duration {
	if !b.limited.Load() {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.limit.Off() {
		return 0
	}
	b.refillLocked(now)
	return b.delayLocked()
}

func (b *tokenBucket) delayLocked() time.Duration {
	l := b.limit
	var wait float64 // in periods
	if l.Msgs > 0 && b.msgs < 1 {
		wait = max(wait, (1-b.msgs)/float64(l.Msgs))
	}
	if l.Bytes > 0 && b.bytes <= 0 {
		wait = max(wait, (1-b.bytes)/float64(l.Bytes))
	}
	return time.Duration(wait * float64(l.period()))
}

// budget is the number of messages that may go now (0: not limited in
// messages; at least 1 otherwise).
func (b *tokenBucket) budget(now time.Time) int {
	if !b.limited.Load() {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.limit.Msgs <= 0 {
		return 0
	}
	b.refillLocked(now)
	return max(1, int(b.msgs))
}
