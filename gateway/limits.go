package gateway

// Limits on what clients can make the node hold (docs/security.md,
// "Limits"), with Apache Pulsar's names, defaults and answers:
//
//   - connections (Config.MaxConnections, MaxConnectionsPerIP; Pulsar's
//     brokerMaxConnections, brokerMaxConnectionsPerIp): a connection over
//     either is sent ERROR (NotAllowedError, "Reached the maximum number
//     of connections…") and closed, before anything of it is read;
//   - producers, consumers and subscriptions per topic partition
//     (maxProducersPerTopic → ProducerBusy, maxConsumersPerTopic and
//     maxConsumersPerSubscription → ConsumerBusy, maxSubscriptionsPerTopic
//     → NotAllowedError for a new subscription);
//   - unacknowledged messages on Shared and Key_Shared subscriptions
//     (maxUnackedMessagesPerConsumer, maxUnackedMessagesPerSubscription):
//     dispatch blocked, acknowledgements never refused (the subscription
//     machine, actors/subscription.go);
//   - reads paused — backpressure, not errors, as Pulsar turns a
//     connection's autoread off (pauseReads): while the connection has
//     maxPendingPublishRequestsPerConnection SENDs unanswered (until half
//     are), while the node holds more than maxMessagePublishBufferSizeInMB
//     of SEND payloads unanswered (connections with producers; until
//     half), and while a topic it published to is over its publish rate;
//   - publish and dispatch rates (publishRate, dispatchRate per topic
//     partition shared by its subscriptions, subscriptionDispatchRate per
//     subscription): token buckets (broker/rate.go) holding one period's worth.
//
// The per-topic limits resolve topic policy → namespace policy → the
// node's default (Config.TopicLimits), as stream and namespace properties
// (docs/policies.md, "Limits"); a topic rereads them when it is loaded, at
// every PRODUCER and SUBSCRIBE, at every policy check and when they are
// changed through this node's admin API.
//
// Lock order: the topic's limits (broker.Topic), then Server.mu, then
// broker.TopicAdmission.mu; gate.mu and broker.TokenBucket.mu are leaves.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

// RateLimit and TopicLimits are the broker's (broker/rate.go); Config
// names them here so that its callers need not import the broker.
type (
	RateLimit   = broker.RateLimit
	TopicLimits = broker.TopicLimits
)

// Pulsar's defaults.
const (
	defaultMaxUnackedPerConsumer     = 50_000
	defaultMaxUnackedPerSubscription = 4 * defaultMaxUnackedPerConsumer
	defaultMaxPendingPublishRequests = 1000
	defaultPublishBufferBytes        = 256 << 20
	minPublishBufferBytes            = 64 << 20
	defaultAdminMaxRequestBytes      = 1 << 20
)

func (c *Config) limitDefaults() {
	if c.MaxPendingPublishRequestsPerConnection == 0 {
		c.MaxPendingPublishRequestsPerConnection = defaultMaxPendingPublishRequests
	}
	if c.MaxPublishBufferBytes == 0 {
		c.MaxPublishBufferBytes = DefaultPublishBufferBytes()
	}
	l := &c.TopicLimits
	if l.MaxUnackedPerConsumer == 0 {
		l.MaxUnackedPerConsumer = defaultMaxUnackedPerConsumer
	}
	if l.MaxUnackedPerSubscription == 0 {
		l.MaxUnackedPerSubscription = defaultMaxUnackedPerSubscription
	}
	l.MaxUnackedPerConsumer = max(l.MaxUnackedPerConsumer, 0) // negative: no limit (0)
	l.MaxUnackedPerSubscription = max(l.MaxUnackedPerSubscription, 0)
	if c.AdminMaxRequestBytes <= 0 {
		c.AdminMaxRequestBytes = defaultAdminMaxRequestBytes
	}
}

// DefaultPublishBufferBytes is Config.MaxPublishBufferBytes's default:
// half the Go memory limit (GOMEMLIMIT) when one is set — as Pulsar's is
// half the JVM's direct memory —, else 256 MiB; at least 64 MiB.
func DefaultPublishBufferBytes() int64 {
	if m := debug.SetMemoryLimit(-1); m > 0 && m < math.MaxInt64 {
		return max(m/2, minPublishBufferBytes)
	}
	return defaultPublishBufferBytes
}

// ErrTooManyConnections: the node or the client's address has its
// maximum of connections (NotAllowedError, then the connection closes).
var ErrTooManyConnections = errors.New("gateway: Reached the maximum number of connections")

// ---- a topic's limits ----

// topicLimitState is what a topic keeps of its limits: its admission
// state (broker/admission.go: the limits, the rate buckets, the consumers
// counted).
type topicLimitState struct {
	// applying serializes applyLimits: the subscriptions end with the
	// limits last stored.
	applying sync.Mutex
	*broker.TopicAdmission
}

// refreshLimitsOf applies changed limit policies at once to the topics of
// stream id (or, with id.Name empty, of namespace id.Namespace) served
// here; other members apply them at their next check.
func (s *Server) refreshLimitsOf(ctx context.Context, id lakestream.StreamIdentifier) {
	for _, t := range s.loadedTopics() {
		if t.Stream().Namespace != id.Namespace || (id.Name != "" && t.Stream().Name != id.Name) || t.Closing() {
			continue
		}
		if err := t.RefreshLimits(ctx); err != nil {
			s.cfg.Logger.Warn("applying changed limits", "topic", t.Name(), "err", err)
		}
	}
}

// releaseCounted gives c's place back, once.
func (c *consumer) releaseCounted() {
	if c.t != nil && c.counted.CompareAndSwap(true, false) {
		c.t.ReleaseConsumer(c.subName)
	}
}

// dispatchLimiter is a subscription's view of a dispatch rate bucket: the
// topic's (shared), or its own following the topic's subscription rate
// (spec).
type dispatchLimiter struct {
	b    *broker.TokenBucket
	spec *atomic.Pointer[RateLimit]
	// seen is the spec last given to b.
	seen      atomic.Pointer[RateLimit]
	throttled prometheus.Counter
}

func (d *dispatchLimiter) sync() {
	if d.spec == nil {
		return
	}
	if r := d.spec.Load(); r != nil && d.seen.Swap(r) != r {
		d.b.Set(*r)
	}
}

func (d *dispatchLimiter) Delay() time.Duration {
	d.sync()
	w := d.b.Delay(time.Now())
	if w > 0 {
		d.throttled.Inc()
	}
	return w
}

func (d *dispatchLimiter) Budget() int { d.sync(); return d.b.Budget(time.Now()) }

func (d *dispatchLimiter) Consume(msgs, bytes int) { d.b.Take(time.Now(), msgs, bytes) }

// ---- the node: connections, publish buffer, metrics ----

// serverLimits is the node-wide state of the limits.
type serverLimits struct {
	// conns counts open connections, per client IP address.
	conns struct {
		sync.Mutex
		total int
		perIP map[string]int
	}
	// refusing bounds the connections being refused at once (each writes
	// its ERROR with a deadline); beyond it they are closed bare.
	refusing chan struct{}
	// publishBuffer holds the SEND payload bytes read and not answered.
	publishBuffer gate
	metrics       limitMetrics
}

// refusingMax bounds the refused connections being answered at once.
const refusingMax = 64

// refuseTimeout bounds the ERROR write (and the drain after it) of a
// refused connection.
const refuseTimeout = 5 * time.Second

func (s *Server) initLimits() {
	l := &s.lim
	l.conns.perIP = map[string]int{}
	l.refusing = make(chan struct{}, refusingMax)
	l.publishBuffer.limit = max(s.cfg.MaxPublishBufferBytes, 0)
	l.metrics = newLimitMetrics()
	l.metrics.publishBufferLimit.Set(float64(l.publishBuffer.limit))
	l.metrics.publishBuffer = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "lakegate_publish_buffer_bytes",
		Help: "SEND payload bytes read and not answered yet, on this node (what maxMessagePublishBufferSizeInMB bounds).",
	}, func() float64 { return float64(l.publishBuffer.count()) })
}

// admitConn counts a new connection, or refuses it (the error says which
// limit) when it is over MaxConnections or MaxConnectionsPerIP.
func (s *Server) admitConn(conn net.Conn) error {
	ip := remoteIP(conn)
	l := &s.lim.conns
	l.Lock()
	defer l.Unlock()
	switch {
	case s.cfg.MaxConnections > 0 && l.total >= s.cfg.MaxConnections:
		s.lim.metrics.refusals.WithLabelValues("max_connections").Inc()
		return fmt.Errorf("%w (%d)", ErrTooManyConnections, s.cfg.MaxConnections)
	case s.cfg.MaxConnectionsPerIP > 0 && l.perIP[ip] >= s.cfg.MaxConnectionsPerIP:
		s.lim.metrics.refusals.WithLabelValues("max_connections_per_ip").Inc()
		return fmt.Errorf("%w on address %s (%d)", ErrTooManyConnections, ip, s.cfg.MaxConnectionsPerIP)
	}
	l.total++
	l.perIP[ip]++
	return nil
}

// releaseConn uncounts a connection admitConn counted.
func (s *Server) releaseConn(conn net.Conn) {
	ip := remoteIP(conn)
	l := &s.lim.conns
	l.Lock()
	defer l.Unlock()
	l.total--
	if l.perIP[ip] <= 1 {
		delete(l.perIP, ip)
	} else {
		l.perIP[ip]--
	}
}

func remoteIP(conn net.Conn) string {
	if a, ok := conn.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	host, _, err := net.SplitHostPort(conn.RemoteAddr().String())
	if err != nil {
		return conn.RemoteAddr().String()
	}
	return host
}

// refuseConn answers a refused connection as Pulsar does — an ERROR
// (NotAllowedError, request id -1) — then closes it. The client's CONNECT
// is read and dropped meanwhile (a close with unread input would reset the
// connection and lose the ERROR). Off the accept loop, bounded in time and
// in number.
func (s *Server) refuseConn(conn net.Conn, reason error) {
	select {
	case s.lim.refusing <- struct{}{}:
	default:
		conn.Close() // too many at once: no answer
		return
	}
	go func() {
		defer func() { <-s.lim.refusing }()
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(refuseTimeout))
		b, err := protocol.AppendCommand(nil, protocol.Error(math.MaxUint64, pb.ServerError_NotAllowedError, reason.Error()))
		if err != nil {
			return
		}
		if _, err := conn.Write(b); err != nil {
			return
		}
		if cw, ok := conn.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		io.Copy(io.Discard, io.LimitReader(conn, 64<<10))
	}()
}

// ---- pausing a connection's reads ----

// gate pauses readers while a count is at its limit, until it is back to
// half of it — as Pulsar turns a connection's autoread off and on. The
// count is atomic; the lock is taken only around the limit and half of it
// (the node's publish buffer is counted by every SEND).
type gate struct {
	limit  int64 // ≤ 0: never closes
	n      atomic.Int64
	isShut atomic.Bool // open != nil
	mu     sync.Mutex
	// open is nil while the gate is open; closed (and set to nil) when it
	// opens again.
	open chan struct{}
}

// add adds d (negative: takes away) to the count, closing the gate at the
// limit and opening it at half.
func (g *gate) add(d int64) {
	n := g.n.Add(d)
	if g.limit <= 0 {
		return
	}
	if shut := g.isShut.Load(); (!shut && n < g.limit) || (shut && n > g.limit/2) {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch n := g.n.Load(); { // what holds now, whatever raced
	case g.open == nil && n >= g.limit:
		g.open = make(chan struct{})
		g.isShut.Store(true)
	case g.open != nil && n <= g.limit/2:
		close(g.open)
		g.open = nil
		g.isShut.Store(false)
	}
}

// closed returns the channel closed when the gate opens (nil: open).
func (g *gate) closed() <-chan struct{} {
	if !g.isShut.Load() {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open
}

func (g *gate) count() int64 { return g.n.Load() }

// sessionLimits is a session's share of the limits.
type sessionLimits struct {
	// pending counts the SENDs read and not answered
	// (MaxPendingPublishRequestsPerConnection).
	pending gate
	// rateUntil: the reader waits until then (a topic's publish rate).
	// Reader goroutine only.
	rateUntil time.Time
}

// publishCount is what a producer holds of its session's pending SENDs
// and of the node's publish buffer: its SENDs read and not answered.
// Released when the producer leaves its partition: the answers of SENDs
// still in flight then may never come (a partition lost or stopped drops
// them), and are not counted when they do.
type publishCount struct {
	sync.Mutex
	sends, bytes int64
	released     bool
}

// sendRead counts a SEND of n payload bytes read for p (answered by
// sendAnswered) and charges its topic's publish rate.
func (s *session) sendRead(p *producer, records, n int) {
	p.pub.Lock()
	if !p.pub.released {
		p.pub.sends++
		p.pub.bytes += int64(n)
		s.lim.pending.add(1)
		s.srv.lim.publishBuffer.add(int64(n))
	}
	p.pub.Unlock()
	if d := p.t.Admission().Publish().Take(time.Now(), records, n); d > 0 {
		s.lim.rateUntil = time.Now().Add(d)
	}
}

// sendAnswered uncounts a SEND of n payload bytes (receipt or error).
func (p *producer) sendAnswered(n int) {
	p.pub.Lock()
	defer p.pub.Unlock()
	if p.pub.released {
		return
	}
	p.pub.sends--
	p.pub.bytes -= int64(n)
	p.sess.lim.pending.add(-1)
	p.sess.srv.lim.publishBuffer.add(-int64(n))
}

// releasePublishes gives back what p still counts (it left its partition
// or its connection); once.
func (p *producer) releasePublishes() {
	p.pub.Lock()
	defer p.pub.Unlock()
	if p.pub.released {
		return
	}
	p.pub.released = true
	p.sess.lim.pending.add(-p.pub.sends)
	p.sess.srv.lim.publishBuffer.add(-p.pub.bytes)
	p.pub.sends, p.pub.bytes = 0, 0
}

// pauseReads holds the reader back before its next read from the socket
// while a limit asks (see the file comment): the connection's pending
// SENDs, the node's publish buffer (for a connection with producers), a
// topic's publish rate. Returns false once the session is closed.
func (s *session) pauseReads() bool {
	m := &s.srv.lim.metrics
	for {
		if ch := s.lim.pending.closed(); ch != nil {
			if !waitPaused(s, ch, "pending_publish", m.throttled) {
				return false
			}
			continue
		}
		if len(s.producers) > 0 {
			if ch := s.srv.lim.publishBuffer.closed(); ch != nil {
				if !waitPaused(s, ch, "publish_buffer", m.throttledGlobal) {
					return false
				}
				continue
			}
		}
		if d := time.Until(s.lim.rateUntil); d > 0 {
			t := time.NewTimer(d)
			ok := waitPaused(s, t.C, "publish_rate", m.throttled)
			t.Stop()
			if !ok {
				return false
			}
			continue
		}
		return true
	}
}

// waitPaused waits for ch (counted as a pause for reason) or the
// session's end.
func waitPaused[T any](s *session, ch <-chan T, reason string, pulsarGauge prometheus.Gauge) bool {
	m := &s.srv.lim.metrics
	m.pauses.WithLabelValues(reason).Inc()
	g := m.paused.WithLabelValues(reason)
	g.Inc()
	pulsarGauge.Inc()
	defer g.Dec()
	defer pulsarGauge.Dec()
	select {
	case <-ch:
		return true
	case <-s.done:
		return false
	}
}

// ---- metrics (docs/metrics.md, "Limits") ----

type limitMetrics struct {
	refusals           *prometheus.CounterVec // by limit
	pauses             *prometheus.CounterVec // by reason
	paused             *prometheus.GaugeVec   // by reason
	throttled          prometheus.Gauge       // Pulsar's, per-connection limits
	throttledGlobal    prometheus.Gauge       // Pulsar's, the publish buffer
	publishBuffer      prometheus.GaugeFunc
	publishBufferLimit prometheus.Gauge
	dispatchThrottled  *prometheus.CounterVec // by scope
}

func newLimitMetrics() limitMetrics {
	return limitMetrics{
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lakegate_limit_refusals_total",
			Help: "Requests refused by a limit (limit: max_connections, max_connections_per_ip, max_producers_per_topic, max_consumers_per_topic, max_consumers_per_subscription, max_subscriptions_per_topic, http_max_request_size).",
		}, []string{"limit"}),
		pauses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lakegate_connection_read_pauses_total",
			Help: "Times a connection's reads were paused (reason: pending_publish, publish_buffer, publish_rate).",
		}, []string{"reason"}),
		paused: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lakegate_connections_read_paused",
			Help: "Connections whose reads are paused now, by reason (pending_publish, publish_buffer, publish_rate).",
		}, []string{"reason"}),
		throttled: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pulsar_broker_throttled_connections",
			Help: "Connections whose reads are paused by a per-connection limit (pending publish requests, a publish rate), as Pulsar's.",
		}),
		throttledGlobal: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pulsar_broker_throttled_connections_global_limit",
			Help: "Connections whose reads are paused by the node's publish buffer limit, as Pulsar's.",
		}),
		publishBufferLimit: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "lakegate_publish_buffer_limit_bytes",
			Help: "The node's publish buffer limit (maxMessagePublishBufferSizeInMB; 0: none).",
		}),
		dispatchThrottled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lakegate_dispatch_throttled_total",
			Help: "Subscription reads delayed by a dispatch rate (scope: topic, subscription).",
		}, []string{"scope"}),
	}
}

func (s *Server) limitCollectors() []prometheus.Collector {
	m := &s.lim.metrics
	return []prometheus.Collector{m.refusals, m.pauses, m.paused, m.throttled, m.throttledGlobal, m.publishBuffer, m.publishBufferLimit, m.dispatchThrottled}
}

// dispatchLimiters are a new subscription's dispatch limiters on t: the
// topic's and the subscription's dispatch rates, counted when they throttle.
func (s *Server) dispatchLimiters(t *topic) []actors.DispatchLimiter {
	m := s.lim.metrics
	adm := t.Admission()
	return []actors.DispatchLimiter{
		&dispatchLimiter{b: adm.Dispatch(), throttled: m.dispatchThrottled.WithLabelValues("topic")},
		&dispatchLimiter{b: &broker.TokenBucket{}, spec: adm.SubscriptionDispatch(), throttled: m.dispatchThrottled.WithLabelValues("subscription")},
	}
}
