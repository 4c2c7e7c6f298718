package broker

import (
	"sync"
	"sync/atomic"
	"time"
)

// rateWindow is the shortest interval a rate is measured over.
const rateWindow = time.Second

// RateMeter counts events (messages and bytes) and reports their rate per
// second over the interval between two samples at least rateWindow apart:
// each read (a stats request) takes a sample when the newest one is older
// than rateWindow, and the rate is measured from the sample before it. So
// a tool that polls stats every N seconds sees the rate of the last N
// seconds, as with Pulsar's stats interval. Adds are lock-free.
type RateMeter struct {
	msgs, bytes atomic.Int64
	mu          sync.Mutex
	samples     [2]rateSample // [0] older, [1] newer; zero time: none yet
}

type rateSample struct {
	at          time.Time
	msgs, bytes int64
}

// Add counts msgs messages of bytes bytes.
func (r *RateMeter) Add(msgs, bytes int) {
	r.msgs.Add(int64(msgs))
	r.bytes.Add(int64(bytes))
}

// Rates returns messages and bytes per second, and the counters.
func (r *RateMeter) Rates(now time.Time) (msgRate, byteRate float64, msgs, bytes int64) {
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

// TokenBucket enforces a RateLimit (publish and dispatch rates): tokens
// accrue at the rate and are capped at one period's worth (the burst); a
// take may leave them below zero (what was read is not refused: the next
// read waits). Times are passed in, so tests drive it with their own
// clock. Safe for concurrent use.
type TokenBucket struct {
	limited     atomic.Bool // !limit.Off(): without it, no lock is taken
	mu          sync.Mutex
	limit       RateLimit
	msgs, bytes float64   // tokens
	at          time.Time // last refill; zero: full at the next one
}

// Set changes the limit; a changed one starts full.
func (b *TokenBucket) Set(l RateLimit) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if l != b.limit {
		b.limit, b.at = l, time.Time{}
		b.limited.Store(!l.Off())
	}
}

func (b *TokenBucket) refillLocked(now time.Time) {
	l := b.limit
	if b.at.IsZero() {
		b.msgs, b.bytes, b.at = float64(l.Msgs), float64(l.Bytes), now
		return
	}
	periods := now.Sub(b.at).Seconds() / l.Per().Seconds()
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

// Take counts msgs messages and n bytes; it returns how long the next one
// must wait (0: none).
func (b *TokenBucket) Take(now time.Time, msgs, n int) time.Duration {
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

// Delay is how long until a message may go: until at least one message
// token and a positive byte balance are back.
func (b *TokenBucket) Delay(now time.Time) time.Duration {
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

func (b *TokenBucket) delayLocked() time.Duration {
	l := b.limit
	var wait float64 // in periods
	if l.Msgs > 0 && b.msgs < 1 {
		wait = max(wait, (1-b.msgs)/float64(l.Msgs))
	}
	if l.Bytes > 0 && b.bytes <= 0 {
		wait = max(wait, (1-b.bytes)/float64(l.Bytes))
	}
	return time.Duration(wait * float64(l.Per()))
}

// Budget is the number of messages that may go now (0: not limited in
// messages; at least 1 otherwise).
func (b *TokenBucket) Budget(now time.Time) int {
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

// RateLimit is a rate in messages and payload bytes per Period (Pulsar's
// PublishRate and DispatchRate). A dimension ≤ 0 is not limited; Period
// defaults to 1 s.
type RateLimit struct {
	Msgs   int64
	Bytes  int64
	Period time.Duration
}

// Off reports whether the rate limits nothing.
func (r RateLimit) Off() bool { return r.Msgs <= 0 && r.Bytes <= 0 }

// Per is the rate's period: Period, or 1 s.
func (r RateLimit) Per() time.Duration {
	if r.Period <= 0 {
		return time.Second
	}
	return r.Period
}

// TopicLimits are the limits of one topic partition: the node's defaults
// (gateway.Config.TopicLimits), overridden by namespace and topic policies. A
// count of 0 is no limit (as Pulsar's 0); the zero rates are off.
type TopicLimits struct {
	// MaxProducers refuses more producers with ProducerBusy (Pulsar's
	// maxProducersPerTopic). Default 0: no limit.
	MaxProducers int
	// MaxConsumers refuses more consumers with ConsumerBusy
	// (maxConsumersPerTopic). Default 0: no limit.
	MaxConsumers int
	// MaxConsumersPerSubscription refuses more consumers on one
	// subscription with ConsumerBusy (maxConsumersPerSubscription).
	// Default 0: no limit.
	MaxConsumersPerSubscription int
	// MaxSubscriptions refuses a new subscription with NotAllowedError
	// (maxSubscriptionsPerTopic). Default 0: no limit.
	MaxSubscriptions int
	// MaxUnackedPerConsumer blocks dispatch to a Shared or Key_Shared
	// consumer holding this many unacknowledged messages until it is down
	// to half (maxUnackedMessagesPerConsumer). In Config: default (0)
	// 50 000, negative: no limit.
	MaxUnackedPerConsumer int64
	// MaxUnackedPerSubscription blocks a Shared or Key_Shared
	// subscription's dispatch the same way (maxUnackedMessagesPerSubscription).
	// In Config: default (0) 200 000, negative: no limit.
	MaxUnackedPerSubscription int64
	// PublishRate pauses the reads of the connections producing to the
	// topic partition while it is over (maxPublishRatePerTopicInMessages,
	// maxPublishRatePerTopicInBytes). Default off.
	PublishRate RateLimit
	// DispatchRate paces the dispatch of every subscription of the topic
	// partition together (dispatchThrottlingRatePerTopicInMsg, …InByte).
	// Default off.
	DispatchRate RateLimit
	// SubscriptionDispatchRate paces each subscription's dispatch
	// (dispatchThrottlingRatePerSubscriptionInMsg, …InByte). Default off.
	SubscriptionDispatchRate RateLimit
	// MaxMessageSize refuses a SEND whose metadata and payload exceed it
	// (a topic's maxMessageSize policy; policycode.go). Default 0: the
	// node's MaxMessageSize only.
	MaxMessageSize int
}
