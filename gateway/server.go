package gateway

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/auth"
	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/txn"
)

// Config configures a Server. Zero values take the documented defaults.
type Config struct {
	// Catalog is the storage the gateway serves. Required.
	Catalog lakestream.StreamCatalog
	// Runtime runs the subscription actors. Default: actors.NewRuntime,
	// shut down by Close.
	Runtime actors.Runtime
	// AdvertisedAddr is the host:port LOOKUP answers point clients to.
	// Default: the listener's address, with localhost for a wildcard host.
	AdvertisedAddr string
	// MaxMessageSize is the largest metadata+payload a producer may send,
	// in bytes, announced in CONNECTED. Default protocol.DefaultMaxMessageSize
	// (5 MiB). Frames above MaxMessageSize + protocol.FramePaddingBytes close
	// the connection.
	MaxMessageSize int
	// IdleTimeout closes a connection from which nothing was read for this
	// long; the server pings after IdleTimeout/2 of silence. Default 60 s.
	IdleTimeout time.Duration
	// HandshakeTimeout bounds the wait for CONNECT. Default 30 s.
	HandshakeTimeout time.Duration
	// OutboundFramesMax bounds a connection's outbound queue, in frames:
	// MESSAGEs are not queued past it (the consumer waits for room, its
	// subscription dispatches to others meanwhile) and the connection is
	// not read while its queue holds this many. Default 1024.
	OutboundFramesMax int
	// OutboundOwedMax is how many frames answers, receipts and notices —
	// queued by actors, which never wait for a socket — may add past
	// OutboundFramesMax; a connection whose queue reaches
	// OutboundFramesMax + OutboundOwedMax is closed (its client does not
	// read). Default 65536.
	OutboundOwedMax int
	// ProducerPendingMax bounds a producer's appends in flight, in SENDs.
	// Default 1000.
	ProducerPendingMax int
	// DisableTopicAutoCreation turns Pulsar's allowAutoTopicCreation off.
	// Default false: unknown topics are created non-partitioned.
	DisableTopicAutoCreation bool
	// AutoTopicCreationType and DefaultNumPartitions: what an unknown
	// topic is created as (broker.Config). Default non-partitioned.
	AutoTopicCreationType string
	DefaultNumPartitions  int
	// DefaultRetention applies to topics without a retention policy
	// (broker.Config). Default 0/0, Pulsar's.
	DefaultRetention broker.RetentionPolicy
	// RetentionMinAge: no retention trim removes an entry younger than
	// this (broker.Config). Default 0.
	RetentionMinAge time.Duration
	// ServerVersion is announced in CONNECTED. Default "lakegate".
	ServerVersion string
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// MetricsSubscriptionsMax caps the per-subscription series (backlog,
	// unacked) one /metrics scrape exports; the rest are counted in
	// lakegate_subscription_series_dropped. Default 1000.
	MetricsSubscriptionsMax int
	// MetricsTopicsMax caps the topics of the Pulsar topic-level families
	// (pulsar_rate_in, …, and the table lag) one scrape exports: the
	// first by name; the rest are counted in
	// lakegate_metrics_series_dropped{level="topic"}. Default 1000.
	MetricsTopicsMax int
	// MetricsNamespaceLevelOnly turns Pulsar's
	// exposeTopicLevelMetricsInPrometheus off: the pulsar_* topic families
	// are summed per namespace (labels cluster, namespace) and no
	// pulsar_subscription_* series are exported. Default false (topic
	// level, as Pulsar's default).
	MetricsNamespaceLevelOnly bool
	// MetricsConsumerLevel is Pulsar's
	// exposeConsumerLevelMetricsInPrometheus: export the pulsar_consumer_*
	// families (labels consumer_name, consumer_id), capped like the
	// subscriptions. Default false.
	MetricsConsumerLevel bool

	// Membership makes this node one member of a cluster: it serves only
	// the topics it owns and answers LOOKUP with their owners (cluster.go,
	// docs/cluster.md). Its Self endpoints must include "pulsar" (this
	// server's URL) and "http" (the admin API's). Required: a node on its
	// own is the one member of its cluster (node/assembly).
	Membership lakestream.Membership
	// ProxyLookups makes LOOKUP answers tell clients to connect through the
	// address they dialled (proxy_through_service_url), and this node relays
	// such connections to the owner: for clients that can reach only one
	// load-balanced address. Default false (clients connect to owners).
	ProxyLookups bool
	// RebalanceInterval is how often a member hands over topics that
	// placement gives to another member. Default 10 s; negative: never.
	RebalanceInterval time.Duration
	// RebalanceMax bounds the topics handed over per round. Default 8.
	RebalanceMax int
	// PolicyCheckInterval is how often the retention, message TTL and
	// backlog quota policies of the served topics are enforced
	// (broker/enforcement.go). Default 30 s; negative: never.
	PolicyCheckInterval time.Duration

	// Auth, when set, makes every connection and admin request
	// authenticate (auth.go, docs/security.md). Default nil: no
	// authentication (every client is trusted).
	Auth *auth.Authenticator
	// Authorization checks authenticated roles against superusers, tenant
	// admins and grants (authz.go). Only with Auth. Default false.
	Authorization bool
	// SuperUserRoles may do everything.
	SuperUserRoles []string
	// Txn is the node's transaction coordinator (docs/transactions.md);
	// nil: transactions are off and their requests are refused.
	Txn txn.Coordinator
	// AuthRefreshGrace is how long a client has to answer AUTH_CHALLENGE
	// with fresh credentials once its own expired. Default 30 s.
	AuthRefreshGrace time.Duration
	// BrokerClientToken, when set, is the token this node presents to other
	// members: on forwarded admin requests (its role should be a superuser)
	// and on relayed connections (its role must be one of the owners'
	// ProxyRoles). Without it, forwarded requests carry the client's own
	// credentials and relayed connections authenticate with this node's
	// certificate (the tls provider).
	BrokerClientToken string
	// ClientTLS returns the TLS configuration for reaching other members
	// over TLS (their pulsar+ssl and https endpoints). It is called for
	// every new connection, so that a rotated CA file is used from the next
	// one on (auth.Reloader.ClientConfig). Default: the system roots.
	ClientTLS func() *tls.Config
	// ProxyRoles are the roles that may connect on behalf of a client
	// (Pulsar's proxyRoles): a CONNECT naming original_principal is only
	// accepted from them, and then both roles are authorized; a proxy role
	// must name one. Other members relaying to this node, and Apache
	// Pulsar's proxy, authenticate as one. Default none.
	ProxyRoles []string
	// SkipOriginalAuthData turns off the check of the credentials a proxy
	// forwards (original_auth_data): the original principal is then taken
	// on the proxy's word. Default false: forwarded tokens are verified
	// like the client's own, and their expiry is enforced (Pulsar's
	// authenticateOriginalAuthData, on).
	SkipOriginalAuthData bool
	// AllowPlaintextPeers lets a node with Auth reach other members over
	// plain TCP and HTTP when they advertise no TLS endpoint (forwarded
	// admin requests, hand-overs, relays): the broker token and clients'
	// credentials then travel in clear. Default false: such a request is
	// refused (ServiceNotReady) instead.
	AllowPlaintextPeers bool
	// AdvertisedTLSAddr is the host:port of the pulsar+ssl listener LOOKUP
	// answers name (with a TLS listener). Default: that listener's address.
	AdvertisedTLSAddr string

	// Limits (limits.go; docs/security.md, "Limits"), with Pulsar's
	// names and defaults.
	//
	// MaxConnections refuses connections beyond this many open ones
	// (Pulsar's brokerMaxConnections): the client gets an ERROR
	// (NotAllowedError), then the connection closes. Default 0: no limit.
	MaxConnections int
	// MaxConnectionsPerIP is the same per client IP address (Pulsar's
	// brokerMaxConnectionsPerIp). Default 0: no limit.
	MaxConnectionsPerIP int
	// MaxPendingPublishRequestsPerConnection pauses the reads of a
	// connection with this many SENDs unanswered until half of them are
	// answered (Pulsar's maxPendingPublishRequestsPerConnection). Default
	// 1000; negative: no limit.
	MaxPendingPublishRequestsPerConnection int
	// MaxPublishBufferBytes is the node's budget of SEND payload bytes read
	// and not answered yet (Pulsar's maxMessagePublishBufferSizeInMB):
	// beyond it the reads of every connection with producers pause until
	// half of it is answered. Default (0): half the Go memory limit
	// (GOMEMLIMIT) when one is set, else 256 MiB, at least 64 MiB;
	// negative: no limit.
	MaxPublishBufferBytes int64
	// TopicLimits are the node's defaults of the per-topic limits, which
	// namespace and topic policies override (docs/policies.md, "Limits").
	// Zero fields take the defaults TopicLimits names.
	TopicLimits TopicLimits
	// AdminMaxRequestBytes bounds an admin REST request's body: a larger
	// one is answered 413 with a reason (Pulsar's httpMaxRequestSize).
	// Default 1 MiB.
	AdminMaxRequestBytes int64
}

func (c *Config) defaults() {
	if c.MaxMessageSize <= 0 {
		c.MaxMessageSize = protocol.DefaultMaxMessageSize
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 60 * time.Second
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = 30 * time.Second
	}
	if c.OutboundFramesMax <= 0 {
		c.OutboundFramesMax = 1024
	}
	if c.OutboundOwedMax <= 0 {
		c.OutboundOwedMax = 65536
	}
	if c.ProducerPendingMax <= 0 {
		c.ProducerPendingMax = 1000
	}
	if c.ServerVersion == "" {
		c.ServerVersion = "lakegate"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.MetricsSubscriptionsMax <= 0 {
		c.MetricsSubscriptionsMax = defaultMetricsSubscriptionsMax
	}
	if c.MetricsTopicsMax <= 0 {
		c.MetricsTopicsMax = defaultMetricsTopicsMax
	}
	if c.RebalanceInterval == 0 {
		c.RebalanceInterval = 10 * time.Second
	}
	if c.RebalanceMax <= 0 {
		c.RebalanceMax = 8
	}
	if c.PolicyCheckInterval == 0 {
		c.PolicyCheckInterval = 30 * time.Second
	}
	if c.AuthRefreshGrace <= 0 {
		c.AuthRefreshGrace = 30 * time.Second
	}
	c.limitDefaults() // limits.go
}

// Server is the Pulsar binary-protocol listener. Safe for concurrent use.
type Server struct {
	cfg Config
	// brk owns topic behaviour (broker/); sessions and the admin REST
	// call it.
	brk     *broker.Broker
	lns     []net.Listener // plain first (when there is one), then TLS
	ownsRT  bool
	rt      actors.Runtime
	ctx     context.Context // cancelled by Close: ends appends and reads
	cancel  context.CancelFunc
	wg      sync.WaitGroup // accept loop and sessions
	nameSeq atomic.Uint64
	// namePrefix starts the names given to unnamed producers
	// (producerNamePrefix): unique per start.
	namePrefix string
	sessionID  atomic.Uint64
	metrics    *gatewayMetrics
	// tables caches the table ends of the table lag (pulsar_metrics.go).
	tables tableEnds
	// draining is set by Drain: rebalancing stops.
	draining atomic.Bool
	// lim: connection counts, the publish buffer, limit metrics (limits.go).
	lim        serverLimits
	httpClient *http.Client // forwarded admin requests

	// topics: the topic-partitions served here (broker/registry.go).
	topics *broker.Topics[*producer, *consumer]

	mu struct {
		sync.Mutex
		// npTopics are the non-persistent topics served here, by full name
		// (nonpersistent.go).
		npTopics map[string]*npTopic
		sessions map[*session]struct{}
		closed   bool
	}
}

// Listen starts a Server on addr ("host:port"; port 0 picks one) and serves
// connections until Close.
func Listen(addr string, cfg Config) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("gateway: listen: %w", err)
	}
	s, err := Serve(ln, cfg)
	if err != nil {
		ln.Close()
	}
	return s, err
}

// Serve starts a Server on a listener (closed by Close): a cluster member
// listens first, to advertise its address, then joins, then serves. tlsLn,
// when given, is a TLS listener (pulsar+ssl) served the same way; ln may
// then be nil (no plain listener).
func Serve(ln net.Listener, cfg Config, tlsLn ...net.Listener) (*Server, error) {
	if cfg.Catalog == nil {
		return nil, errors.New("gateway: Config.Catalog is required")
	}
	if cfg.Membership == nil {
		return nil, errors.New("gateway: Config.Membership is required (a node on its own is a one-member cluster)")
	}
	cfg.defaults()
	if ln == nil && len(tlsLn) == 0 {
		return nil, errors.New("gateway: no listener")
	}
	if cfg.AdvertisedAddr == "" && ln != nil {
		cfg.AdvertisedAddr = advertisedOf(ln)
	}
	if cfg.AdvertisedTLSAddr == "" && len(tlsLn) > 0 {
		cfg.AdvertisedTLSAddr = advertisedOf(tlsLn[0])
	}
	var lns []net.Listener
	if ln != nil {
		lns = append(lns, ln)
	}
	lns = append(lns, tlsLn...)
	brk, err := broker.New(broker.Config{
		Catalog:                  cfg.Catalog,
		Logger:                   cfg.Logger,
		Membership:               cfg.Membership,
		TopicLimits:              cfg.TopicLimits,
		MaxMessageSize:           cfg.MaxMessageSize,
		DisableTopicAutoCreation: cfg.DisableTopicAutoCreation,
		AutoTopicCreationType:    cfg.AutoTopicCreationType,
		DefaultNumPartitions:     cfg.DefaultNumPartitions,
		DefaultRetention:         cfg.DefaultRetention,
		RetentionMinAge:          cfg.RetentionMinAge,
		Authorization:            cfg.Auth != nil && cfg.Authorization,
		SuperUserRoles:           cfg.SuperUserRoles,
		Txn:                      cfg.Txn,
	})
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, brk: brk, lns: lns, rt: cfg.Runtime, metrics: newGatewayMetrics()}
	s.initLimits()
	s.httpClient = &http.Client{Timeout: peerRequestTimeout, Transport: s.peerTransport()}
	if s.rt == nil {
		s.rt = actors.NewRuntime(cfg.Logger.With("component", "actors"))
		s.ownsRT = true
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.namePrefix = producerNamePrefix(cfg.Membership.Self().ID)
	s.topics = broker.NewTopics[*producer, *consumer](brk, broker.TopicsOptions{
		Runtime: s.rt, Context: s.ctx,
		Refused:  func(label string) { s.lim.metrics.refusals.WithLabelValues(label).Inc() },
		Unloaded: func(reason string) { s.metrics.unloads.WithLabelValues(reason).Inc() },
	})
	s.mu.npTopics = map[string]*npTopic{}
	s.mu.sessions = map[*session]struct{}{}
	for _, l := range lns {
		s.wg.Add(1)
		go s.accept(l)
	}
	if cfg.RebalanceInterval > 0 {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.brk.RunRebalance(s.ctx, broker.RebalanceOptions{ // broker/cluster.go
				Interval: cfg.RebalanceInterval, Max: cfg.RebalanceMax,
				Paused: s.draining.Load, HandOver: s.unloadUnit, // cluster.go
			})
		}()
	}
	if cfg.PolicyCheckInterval > 0 {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.brk.RunPolicies(s.ctx, cfg.PolicyCheckInterval, s.policyTopics, s.policyHooks())
		}()
	}
	return s, nil
}

// producerNamePrefix starts the names this start of the server gives to
// producers that name none: "lakegate-", the member id and a random part.
// The random part keeps them unique across restarts, as Pulsar's are (it
// numbers them per broker start and per cluster): the counter after the
// prefix starts at 1 again, and with deduplication a reused name would
// inherit the last sequence id of an earlier producer of that name.
func producerNamePrefix(memberID string) string {
	return "lakegate-" + memberID + "-" + strings.ToLower(rand.Text()[:6])
}

// advertisedOf is a listener's address, with localhost for a wildcard host.
func advertisedOf(ln net.Listener) string {
	if a, ok := ln.Addr().(*net.TCPAddr); ok && a.IP.IsUnspecified() {
		return net.JoinHostPort("localhost", fmt.Sprint(a.Port))
	}
	return ln.Addr().String()
}

// Addr is the plain listener's address (the TLS one's without it).
func (s *Server) Addr() net.Addr { return s.lns[0].Addr() }

// ServiceURL is the pulsar:// URL clients use ("" without a plain listener).
func (s *Server) ServiceURL() string {
	if s.cfg.AdvertisedAddr == "" {
		return ""
	}
	return "pulsar://" + s.cfg.AdvertisedAddr
}

// ServiceURLTLS is the pulsar+ssl:// URL ("" without a TLS listener).
func (s *Server) ServiceURLTLS() string {
	if s.cfg.AdvertisedTLSAddr == "" {
		return ""
	}
	return "pulsar+ssl://" + s.cfg.AdvertisedTLSAddr
}

func (s *Server) accept(ln net.Listener) {
	defer s.wg.Done()
	var backoff time.Duration
	for {
		conn, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || s.closed() {
				return // listener closed
			}
			// Out of file descriptors (EMFILE) or another passing
			// failure: wait and accept again, as net/http does; the
			// listener must outlive it.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.cfg.Logger.Warn("accepting a connection failed; retrying", "err", err, "in", backoff)
			select {
			case <-time.After(backoff):
			case <-s.ctx.Done():
				return
			}
			continue
		}
		backoff = 0
		if err := s.admitConn(conn); err != nil { // limits.go
			s.metrics.connectionsRefused.Inc()
			s.refuseConn(conn, err)
			continue
		}
		s.metrics.connectionsTotal.Inc()
		sess := newSession(s, conn)
		sess.lim.pending.limit = int64(max(s.cfg.MaxPendingPublishRequestsPerConnection, 0)) // limits.go
		s.mu.Lock()
		if s.mu.closed {
			s.mu.Unlock()
			s.releaseConn(conn)
			conn.Close()
			return
		}
		s.mu.sessions[sess] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			sess.run()
			s.releaseConn(conn)
			s.metrics.connectionsClosed.Inc()
			s.mu.Lock()
			delete(s.mu.sessions, sess)
			s.mu.Unlock()
		}()
	}
}

// Close stops accepting, closes every connection, unloads every topic
// (persisting cursors; appends in flight are cancelled: their producers get
// no receipt and resend) and waits for the sessions to end. Call Drain
// first to hand topics over gracefully.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.closed = true
	s.topics.Close() // no topic is loaded from now on
	sessions := make([]*session, 0, len(s.mu.sessions))
	for sess := range s.mu.sessions {
		sessions = append(sessions, sess)
	}
	s.mu.Unlock()
	var err error
	for _, l := range s.lns {
		if e := l.Close(); e != nil && !errors.Is(e, net.ErrClosed) {
			err = e
		}
	}
	for _, sess := range sessions {
		sess.close()
	}
	s.cancel()
	s.wg.Wait()
	for _, t := range s.loadedTopics() {
		s.unloadTopic(t, false, "")
	}
	for _, t := range s.npTopicsServed() {
		t.Close("")
	}
	if s.ownsRT {
		s.rt.Shutdown()
	}
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// Closing reports whether Close has begun (the node is draining: /readyz
// fails).
func (s *Server) Closing() bool { return s.closed() }

func (s *Server) autoCreate() bool { return !s.cfg.DisableTopicAutoCreation }

func (s *Server) closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.closed
}
