package kafka

// The listener: connections, the request framing of Kafka's protocol and
// the dispatch of requests to their handlers, in order per connection.
//
// A connection has a reader goroutine (reads a request, decodes it with
// kmsg, hands it to its handler) and a writer goroutine (writes the
// answers in the order of the requests, as Kafka's protocol requires).
// A handler answers at once (most) or later (Produce waits for its
// receipts, Fetch may wait for data, JoinGroup and SyncGroup for the
// group): the reader does not wait for the answer, so a client's pipelined
// produces are appended together, but at most MaxInflight requests of a
// connection are unanswered (the reader waits beyond: backpressure on the
// socket).

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sync/semaphore"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/auth"
	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/lakestream"
)

// Config configures a Server.
type Config struct {
	// Broker is the node's broker (names, ownership, placement). Required.
	Broker *broker.Broker
	// Catalog is the node's catalog (topics created and deleted). Required.
	Catalog lakestream.StreamCatalog
	// Serve returns the topic-partition of a full Pulsar topic name,
	// served by this node (the registry the Pulsar gateway shares), loading
	// it — taking its ownership — when it is not loaded. Required.
	Serve func(ctx context.Context, name string, create bool) (broker.ServedPartition, error)
	// UnloadUnit stops serving a unit wherever it is served (the gateway's
	// hand-over to dest, "" for none): deleted topics. Required.
	UnloadUnit func(ctx context.Context, unit, dest string) error
	// Reload unloads a served topic-partition gracefully, so that its next
	// Serve loads it again (its new deduplication state). Required.
	Reload func(ctx context.Context, name string) error
	// Namespace is the Pulsar namespace Kafka topics live in. Default
	// "public/default".
	Namespace string
	// AutoCreate creates a topic a Metadata or Produce request names
	// (Kafka's auto.create.topics.enable), with the broker's auto-creation
	// policy.
	AutoCreate bool
	// MaxRequestBytes bounds one request (Kafka's socket.request.max.bytes).
	// Default 16 MiB.
	MaxRequestBytes int
	// MaxInflight bounds the unanswered requests of one connection.
	// Default 32.
	MaxInflight int
	// MaxFetchBytes bounds one Fetch answer, whatever the client asks
	// (Kafka's fetch.max.bytes). Default 8 MiB.
	MaxFetchBytes int
	// MaxInflightBytes bounds, node-wide, the requests read and not yet
	// answered (produce payloads waiting for their appends) plus the Fetch
	// answers being built and written: a connection's reads (or a fetch)
	// wait beyond it. Default 256 MiB.
	MaxInflightBytes int64
	// MaxConnections bounds the open connections; more are closed at once.
	// 0: no limit.
	MaxConnections int
	// GroupInitialRebalanceDelay is how long a new group's first join
	// waits for more members (Kafka's group.initial.rebalance.delay.ms).
	// 0: 3 s; negative: none.
	GroupInitialRebalanceDelay time.Duration
	// TransactionalIDExpiration is how long a transactional.id's record
	// is kept after its last use with no transaction open (Kafka's
	// transactional.id.expiration.ms; txn_expiry.go). Default 7 days.
	TransactionalIDExpiration time.Duration
	// Auth, when set, requires SASL authentication with its tokens
	// (sasl.go); the broker's authorization then applies to every request.
	Auth *auth.Authenticator
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// Server is a Kafka listener.
type Server struct {
	cfg    Config
	log    *slog.Logger
	ln     net.Listener
	ctx    context.Context
	cancel context.CancelFunc
	conns  sync.WaitGroup
	open   atomic.Int64

	producers *producers
	groups    *groupCoordinator
	// inflight weighs the bytes of requests and fetch answers held
	// (Config.MaxInflightBytes).
	inflight *semaphore.Weighted
	served   servedCache
	owned    ownedGroups
	metrics  *metrics
	pids     producerIDs
	// txns caches transactional.id records; awaits the transactions whose
	// offsets this node applies when they end (txn.go, txn_offsets.go).
	txns   txnProducers
	awaits txnAwaits

	mu struct {
		sync.Mutex
		conns  map[*conn]struct{}
		closed bool
	}
}

// Serve starts a Kafka listener on ln.
func Serve(ln net.Listener, cfg Config) (*Server, error) {
	if cfg.Broker == nil || cfg.Catalog == nil || cfg.Serve == nil || cfg.Reload == nil || cfg.UnloadUnit == nil {
		return nil, errors.New("kafka: Config.Broker, Catalog, Serve, Reload and UnloadUnit are required")
	}
	if cfg.Namespace == "" {
		cfg.Namespace = "public/default"
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = 16 << 20
	}
	if cfg.MaxInflight <= 0 {
		cfg.MaxInflight = 32
	}
	if cfg.MaxFetchBytes <= 0 {
		cfg.MaxFetchBytes = 8 << 20
	}
	if cfg.MaxInflightBytes <= 0 {
		cfg.MaxInflightBytes = 256 << 20
	}
	if cfg.TransactionalIDExpiration <= 0 {
		cfg.TransactionalIDExpiration = defaultTransactionalIDExpiration
	}
	cfg.MaxRequestBytes = int(min(int64(cfg.MaxRequestBytes), cfg.MaxInflightBytes))
	cfg.MaxFetchBytes = int(min(int64(cfg.MaxFetchBytes), cfg.MaxInflightBytes))
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{cfg: cfg, log: cfg.Logger.With("component", "kafka"), ln: ln}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.inflight = semaphore.NewWeighted(cfg.MaxInflightBytes)
	s.mu.conns = map[*conn]struct{}{}
	s.producers = newProducers(s)
	s.metrics = newMetrics(s)
	// Producer ids: the member's hash in the top 15 bits, the start time
	// (seconds) in the next 24, a counter below (docs/kafka.md).
	self := nodeID(cfg.Broker.Self())
	s.pids.base = int64(self&0x7fff)<<48 | (time.Now().Unix()&0xffffff)<<24
	s.groups = newGroupCoordinator(groupOptions{InitialRebalanceDelay: cfg.GroupInitialRebalanceDelay})
	go s.accept()
	go s.sweepProducers()
	go s.expireTxnIDs()
	return s, nil
}

// Addr is the listener's address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops the listener and closes every connection; requests in
// flight are answered with errors or dropped with their connection.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.closed = true
	for c := range s.mu.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	err := s.ln.Close()
	s.cancel()
	s.groups.Close()
	s.conns.Wait()
	return err
}

func (s *Server) accept() {
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return
		}
		if max := s.cfg.MaxConnections; max > 0 && s.open.Load() >= int64(max) {
			nc.Close()
			continue
		}
		c := &conn{srv: s, nc: nc, log: s.log.With("client", nc.RemoteAddr().String())}
		c.answers = make(chan *answer, s.cfg.MaxInflight)
		s.mu.Lock()
		if s.mu.closed {
			s.mu.Unlock()
			nc.Close()
			return
		}
		s.mu.conns[c] = struct{}{}
		s.conns.Add(2)
		s.mu.Unlock()
		s.open.Add(1)
		s.metrics.connectionsTotal.Inc()
		go c.read()
		go c.write()
	}
}

// conn is one client connection.
type conn struct {
	srv *Server
	nc  net.Conn
	log *slog.Logger
	// answers holds the requests in flight, in order; the writer writes
	// each once it is ready.
	answers chan *answer
	// clientID is the last request's client id (group member ids).
	clientID string
	closed   atomic.Bool
	// closeAfter: the request just handled closes the connection once its
	// answer is written (a failed authentication). Reader goroutine only.
	closeAfter bool

	// auth is the connection's authentication (sasl.go).
	auth struct {
		sync.Mutex
		connAuth
	}
}

// answer is one request's answer slot.
type answer struct {
	key, version int16
	correlation  int32
	// ready is closed once resp is set (nil resp: no answer, e.g. a
	// Produce with acks=0).
	ready chan struct{}
	resp  kmsg.Response
	once  sync.Once
	// held is the request's weight in Server.inflight, released once the
	// answer is written (a Fetch adds its answer's).
	held atomic.Int64
}

// set answers the request; later calls are ignored.
func (a *answer) set(r kmsg.Response) {
	a.once.Do(func() {
		if r != nil {
			r.SetVersion(a.version)
		}
		a.resp = r
		close(a.ready)
	})
}

// read reads requests until the connection ends.
func (c *conn) read() {
	defer c.srv.conns.Done()
	defer close(c.answers)
	br := bufio.NewReaderSize(c.nc, 64<<10)
	var size [4]byte
	for {
		if _, err := io.ReadFull(br, size[:]); err != nil {
			c.nc.Close()
			return
		}
		n := int32(binary.BigEndian.Uint32(size[:]))
		limit := c.srv.cfg.MaxRequestBytes
		if c.unauthenticated() {
			limit = min(limit, preAuthRequestBytes)
		}
		if n < 8 || int(n) > limit {
			c.log.Warn("kafka request refused: size out of bounds", "bytes", n, "max", limit)
			c.nc.Close() // Kafka closes the connection too (InvalidReceiveException)
			return
		}
		if err := c.srv.inflight.Acquire(c.srv.ctx, int64(n)); err != nil {
			c.nc.Close()
			return // the server is closing
		}
		buf := make([]byte, n)
		if _, err := io.ReadFull(br, buf); err != nil {
			c.srv.inflight.Release(int64(n))
			c.nc.Close()
			return
		}
		if err := c.dispatch(buf); err != nil {
			c.srv.inflight.Release(int64(n))
			c.log.Warn("kafka connection closed", "err", err)
			c.nc.Close()
			return
		}
		if c.closeAfter {
			return // the writer closes the connection after the answer
		}
	}
}

// write writes the answers in request order until the reader ends.
func (c *conn) write() {
	defer c.srv.conns.Done()
	defer c.finish()
	bw := bufio.NewWriterSize(c.nc, 64<<10)
	var buf []byte
	for a := range c.answers {
		<-a.ready
		if a.resp == nil || c.closed.Load() {
			c.srv.inflight.Release(a.held.Load())
			continue
		}
		buf = append(buf[:0], 0, 0, 0, 0)
		buf = binary.BigEndian.AppendUint32(buf, uint32(a.correlation))
		// ApiVersions answers with header v0 whatever its version, so a
		// client can read it before it knows the versions.
		if a.resp.IsFlexible() && a.key != apiVersionsKey {
			buf = append(buf, 0) // no tagged fields
		}
		buf = a.resp.AppendTo(buf)
		binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
		if _, err := bw.Write(buf); err != nil {
			c.closed.Store(true)
			c.nc.Close()
			continue
		}
		if len(c.answers) == 0 {
			if err := bw.Flush(); err != nil {
				c.closed.Store(true)
				c.nc.Close()
			}
		}
		if cap(buf) > 1<<20 {
			buf = nil // do not keep a large fetch's buffer
		}
		c.srv.inflight.Release(a.held.Load())
	}
	bw.Flush()
}

// finish forgets the connection.
func (c *conn) finish() {
	c.closed.Store(true)
	c.nc.Close()
	c.srv.open.Add(-1)
	c.srv.mu.Lock()
	delete(c.srv.mu.conns, c)
	c.srv.mu.Unlock()
}

const apiVersionsKey = 18

// dispatch decodes one request (its header and body) and starts its
// handler. An error closes the connection (a request that cannot be
// read: Kafka closes it too).
func (c *conn) dispatch(buf []byte) error {
	key := int16(binary.BigEndian.Uint16(buf))
	version := int16(binary.BigEndian.Uint16(buf[2:]))
	corr := int32(binary.BigEndian.Uint32(buf[4:]))
	rest := buf[8:]
	if len(rest) < 2 {
		return fmt.Errorf("request header of %d bytes", len(buf))
	}
	idLen := int(int16(binary.BigEndian.Uint16(rest)))
	rest = rest[2:]
	if idLen > 0 {
		if idLen > len(rest) {
			return errors.New("request header: client id past the end")
		}
		c.clientID = string(rest[:idLen])
		rest = rest[idLen:]
	}
	c.srv.metrics.requests.WithLabelValues(kmsg.NameForKey(key)).Inc()
	a := &answer{key: key, version: version, correlation: corr, ready: make(chan struct{})}
	a.held.Store(int64(len(buf)))
	api, ok := apis[key]
	req := kmsg.RequestForKey(key)
	if !ok || req == nil || version < api.min || version > api.max {
		if key == apiVersionsKey {
			// Unknown ApiVersions version: answered v0 with the list, so
			// the client retries with one we know (KIP-511).
			resp := apiVersionsAnswer(kerr.UnsupportedVersion.Code)
			a.version = 0
			c.answers <- a // the writer releases its weight
			a.set(resp)
			return nil
		}
		return fmt.Errorf("request key %d (%s) v%d is not served", key, kmsg.NameForKey(key), version)
	}
	if err := c.checkAuthenticated(key); err != nil {
		return err
	}
	req.SetVersion(version)
	if req.IsFlexible() {
		var err error
		if rest, err = skipTags(rest); err != nil {
			return fmt.Errorf("request header: %w", err)
		}
	}
	if err := req.ReadFrom(rest); err != nil {
		return fmt.Errorf("reading %s v%d: %w", kmsg.NameForKey(key), version, err)
	}
	c.answers <- a // waits while MaxInflight are unanswered
	api.handle(c, req, a)
	return nil
}

// skipTags skips a header's tagged fields.
func skipTags(b []byte) ([]byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, errors.New("tagged fields: bad count")
	}
	b = b[k:]
	for range n {
		_, k := binary.Uvarint(b) // tag
		if k <= 0 {
			return nil, errors.New("tagged fields: bad tag")
		}
		b = b[k:]
		size, k := binary.Uvarint(b)
		if k <= 0 || size > uint64(len(b)-k) {
			return nil, errors.New("tagged fields: bad size")
		}
		b = b[k+int(size):]
	}
	return b, nil
}

// api is one request type the listener serves: its versions and handler.
type api struct {
	min, max int16
	handle   func(c *conn, req kmsg.Request, a *answer)
}

// apis are the request types served, by key (docs/kafka.md, "Supported
// requests"). Versions above a max use topic ids, KIP-848's consumer
// groups or other parts not built; below a min, formats kafka-clients 4
// no longer speaks.
var apis map[int16]api

func init() {
	apis = map[int16]api{
		0:  {3, 12, handleProduce},
		1:  {4, 12, handleFetch},
		2:  {1, 9, handleListOffsets},
		3:  {0, 12, handleMetadata},
		8:  {2, 9, handleOffsetCommit},
		9:  {1, 8, handleOffsetFetch},
		10: {0, 4, handleFindCoordinator},
		11: {0, 9, handleJoinGroup},
		12: {0, 4, handleHeartbeat},
		13: {0, 5, handleLeaveGroup},
		14: {0, 5, handleSyncGroup},
		15: {0, 5, handleDescribeGroups},
		16: {0, 4, handleListGroups},
		17: {1, 1, handleSaslHandshake},
		18: {0, 4, handleApiVersions},
		19: {2, 7, handleCreateTopics},
		20: {1, 5, handleDeleteTopics},
		22: {0, 5, handleInitProducerID},
		23: {2, 4, handleOffsetForLeaderEpoch},
		24: {0, 3, handleAddPartitionsToTxn},
		25: {0, 3, handleAddOffsetsToTxn},
		26: {0, 4, handleEndTxn},
		28: {0, 4, handleTxnOffsetCommit},
		32: {0, 4, handleDescribeConfigs},
		33: {0, 2, handleAlterConfigs},
		36: {0, 2, handleSaslAuthenticate},
		37: {0, 3, handleCreatePartitions},
		42: {0, 2, handleDeleteGroups},
		44: {0, 1, handleIncrementalAlterConfigs},
		47: {0, 0, handleOffsetDelete},
		60: {0, 1, handleDescribeCluster},
	}
}

// apiVersionsAnswer lists the requests served and their versions.
func apiVersionsAnswer(code int16) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.ErrorCode = code
	for key := range int16(100) {
		api, ok := apis[key]
		if !ok {
			continue
		}
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = key, api.min, api.max
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
	return resp
}

func handleApiVersions(c *conn, req kmsg.Request, a *answer) {
	a.set(apiVersionsAnswer(0))
}

// nodeID is a member's Kafka broker id: stable for its member id.
func nodeID(member lakestream.Member) int32 {
	h := fnv.New32a()
	h.Write([]byte(member.ID))
	return int32(h.Sum32() & 0x7fffffff)
}

// errCode is the Kafka error code of an error of the broker layer.
func errCode(err error) int16 {
	var ke *kerr.Error
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ke): // first: a kerr error wrapped with a reason
		return ke.Code
	case errors.Is(err, broker.ErrServiceNotReady), errors.Is(err, lakestream.ErrGuardLost):
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, lakestream.ErrNoSuchStream):
		return kerr.UnknownTopicOrPartition.Code
	case errors.Is(err, broker.ErrNotAllowed), errors.Is(err, lakestream.ErrInvalidArgument):
		return kerr.InvalidRequest.Code
	case errors.Is(err, broker.ErrMessageTooLarge), errors.Is(err, ErrTooLarge):
		return kerr.MessageTooLarge.Code
	case errors.Is(err, actors.ErrOutOfOrderSequence):
		return kerr.OutOfOrderSequenceNumber.Code
	case errors.Is(err, actors.ErrEarlierSendFailed):
		return kerr.NotLeaderForPartition.Code // the client resends: the producer starts over
	case errors.Is(err, ErrMalformed):
		return kerr.CorruptMessage.Code
	case errors.Is(err, ErrUnsupported):
		return kerr.UnsupportedForMessageFormat.Code
	case errors.Is(err, lakestream.ErrFenced):
		return kerr.InvalidRecord.Code
	case errors.Is(err, context.DeadlineExceeded):
		return kerr.RequestTimedOut.Code
	case errors.Is(err, lakestream.ErrUnavailable):
		return kerr.KafkaStorageError.Code
	default:
		return kerr.UnknownServerError.Code
	}
}
