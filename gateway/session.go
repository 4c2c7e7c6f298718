package gateway

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

// session is one client connection. Goroutines: the reader (run) decodes
// frames and handles every command in order; the writer drains the
// outbound queue (outqueue.go) onto the socket. Partition and subscription
// actors, and every other goroutine, queue frames without waiting (send,
// and offer for MESSAGEs); only the reader waits, before it reads the next
// frame, while the queue is full: a slow connection gets backpressure on
// its own socket and nowhere else.
//
// producers and consumers are touched only by the reader goroutine.
type session struct {
	srv  *Server
	conn net.Conn
	log  *slog.Logger

	out       *outQueue // Config.OutboundFramesMax, + Config.OutboundOwedMax
	done      chan struct{}
	closeOnce sync.Once
	// stopWriter ends the writer without closing the connection (a CONNECT
	// that is relayed to another member); writerDone is closed when it ended.
	stopWriter chan struct{}
	writerDone chan struct{}
	// final takes the last frame of a connection being refused: the writer
	// writes it after what is queued, flushes, and closes the connection.
	final chan []byte

	// handshakeDeadline is when a connection that has not completed
	// CONNECT is closed: Config.HandshakeTimeout after accept, whatever
	// it sends meanwhile.
	handshakeDeadline time.Time
	connected         bool
	protocolVersion   int32
	clientVersion     string // from CONNECT
	// entryMetadata: the client parses broker entry metadata (CONNECT's
	// feature flags); MESSAGEs then carry it (consumer.Deliver).
	entryMetadata bool
	producers     map[uint64]*producer
	consumers     map[uint64]*consumer
	// auth is the authenticated identity (auth.go).
	auth sessionAuth
	// txnSlots bounds the transaction requests in flight (txn.go).
	txnSlots chan struct{}
	// lim: pending SENDs and publish-rate pauses (limits.go).
	lim sessionLimits
}

func newSession(srv *Server, conn net.Conn) *session {
	return &session{
		srv:               srv,
		conn:              conn,
		handshakeDeadline: time.Now().Add(srv.cfg.HandshakeTimeout),
		log:               srv.cfg.Logger.With("session", srv.sessionID.Add(1), "remote", conn.RemoteAddr().String()),
		out:               newOutQueue(srv.cfg.OutboundFramesMax, srv.cfg.OutboundOwedMax),
		done:              make(chan struct{}),
		stopWriter:        make(chan struct{}),
		writerDone:        make(chan struct{}),
		final:             make(chan []byte, 1),
		producers:         map[uint64]*producer{},
		consumers:         map[uint64]*consumer{},
		txnSlots:          make(chan struct{}, txnRequestsMax),
	}
}

// Reading before and after CONNECT.
const (
	// preConnectFrameMax bounds a frame read before CONNECT succeeded, in
	// bytes: a CONNECT with its credentials fits (a JWT, a SASL token);
	// a larger frame closes the connection before anything is allocated
	// for it (docs/security.md).
	preConnectFrameMax = 64 << 10
	// preConnectReadBytes and connectedReadBytes are the connection's read
	// buffer before and after CONNECT, in bytes.
	preConnectReadBytes = 4 << 10
	connectedReadBytes  = 64 << 10
)

// errCloseConnection ends the session without an error worth logging.
var errCloseConnection = errors.New("gateway: close connection")

// errRefused ends a session whose last frame (sendFinal) is on its way.
var errRefused = errors.New("gateway: connection refused")

// sendFinal queues the connection's last frame: written after everything
// queued before it, then the connection closes.
func (s *session) sendFinal(cmd *pb.BaseCommand) {
	b, err := protocol.AppendCommand(nil, cmd)
	if err != nil {
		return
	}
	select {
	case s.final <- b:
	default: // a final frame is already on its way
	}
}

// relayRequest ends the read loop of a connection whose CONNECT names
// another member (proxy mode): the connection is relayed there.
type relayRequest struct {
	member   lakestream.Member
	connect  *pb.CommandConnect
	buffered []byte
}

func (r *relayRequest) Error() string { return "gateway: relay to " + r.member.ID }

func (s *session) run() {
	go s.writer()
	err := s.readLoop()
	var relay *relayRequest
	if errors.As(err, &relay) {
		close(s.stopWriter)
		<-s.writerDone
		s.auth.relaying.Store(true) // the owner challenges expiring tokens now
		err = s.relay(relay.member, relay.connect, relay.buffered)
	}
	if errors.Is(err, errRefused) {
		// The writer sends the refusal, then closes the connection.
		select {
		case <-s.writerDone:
		case <-time.After(s.srv.cfg.HandshakeTimeout):
		}
	}
	switch {
	case err == nil, errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), errors.Is(err, errCloseConnection), errors.Is(err, errRefused):
		s.log.Debug("connection closed", "err", err)
	case isTimeout(err):
		s.log.Info("closing idle connection")
	default:
		s.log.Info("closing connection", "err", err)
	}
	s.close()
	s.stopAuth()
	s.teardown()
	<-s.writerDone
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// close ends the connection; safe to call from any goroutine, any number of
// times.
func (s *session) close() {
	s.closeOnce.Do(func() {
		close(s.done)
		s.out.close()
		s.conn.Close()
	})
}

func (s *session) readLoop() (err error) {
	defer func() {
		if r := recover(); r != nil {
			// Never let one connection's input take the node down.
			err = fmt.Errorf("gateway: panic handling a frame: %v", r)
		}
	}()
	// Until CONNECT succeeds: a small read buffer, frames of at most
	// preConnectFrameMax bytes, one deadline for the whole handshake, and
	// anything unexpected closes the connection.
	br := bufio.NewReaderSize(s.conn, preConnectReadBytes)
	maxFrame := s.srv.cfg.MaxMessageSize + protocol.FramePaddingBytes
	s.conn.SetReadDeadline(s.handshakeDeadline)
	for {
		limit := preConnectFrameMax
		if s.connected {
			// Nothing more is read while the client does not read what
			// it is sent.
			if !s.out.waitRoom() {
				return net.ErrClosed
			}
			if !s.pauseReads() { // limits.go: backpressure from the limits
				return errCloseConnection
			}
			limit = maxFrame
			s.conn.SetReadDeadline(time.Now().Add(s.srv.cfg.IdleTimeout))
		}
		f, err := protocol.ReadFrame(br, limit)
		switch {
		case err == nil:
		case errors.Is(err, protocol.ErrUnknownCommand) && s.connected:
			s.log.Debug("ignoring unknown command", "err", err)
			continue
		case errors.Is(err, protocol.ErrChecksum) && f.Cmd.GetType() == pb.BaseCommand_SEND && s.connected:
			send := f.Cmd.GetSend()
			s.send(protocol.SendError(send.GetProducerId(), send.GetSequenceId(), pb.ServerError_ChecksumError, err.Error()))
			continue
		case errors.Is(err, protocol.ErrUnknownCommand):
			return fmt.Errorf("%w: %w before CONNECT", errCloseConnection, err)
		default:
			return err
		}
		if !s.connected && f.Cmd.GetType() == pb.BaseCommand_CONNECT && f.Cmd.GetConnect().GetProxyToBrokerUrl() != "" {
			// This node authenticates the client; the owner sees its role
			// as the original principal of this node's connection.
			if err := s.authenticateConnect(f.Cmd.GetConnect()); err != nil {
				return err
			}
			ctx, cancel := s.ctx()
			member, err := s.srv.proxyTarget(ctx, f.Cmd.GetConnect().GetProxyToBrokerUrl())
			cancel()
			if err != nil {
				s.sendFinal(protocol.Error(0, serverError(err), err.Error()))
				return fmt.Errorf("%w: %w", errRefused, err)
			}
			if member != nil {
				buffered, _ := br.Peek(br.Buffered())
				return &relayRequest{member: *member, connect: f.Cmd.GetConnect(), buffered: buffered}
			}
		}
		wasConnected := s.connected
		if err := s.handle(f); err != nil {
			return err
		}
		if !wasConnected && s.connected && br.Buffered() == 0 {
			br = bufio.NewReaderSize(s.conn, connectedReadBytes)
		}
	}
}

// writer owns the socket's write side. Every write must make progress
// within Config.IdleTimeout: a client that stops reading is disconnected.
func (s *session) writer() {
	defer close(s.writerDone)
	w := newFrameWriter(s.conn)
	idle := s.srv.cfg.IdleTimeout
	ping := time.NewTicker(idle / 2)
	defer ping.Stop()
	pingFrame, _ := protocol.AppendCommand(nil, protocol.Ping())
	// The write deadline is moved on at most every rearm (a syscall-free
	// but not free call), so it is always between idle - rearm and idle
	// ahead.
	var armed time.Time
	rearm := min(time.Second, idle/4)
	write := func(f outFrame) bool {
		if now := time.Now(); now.Sub(armed) >= rearm {
			s.conn.SetWriteDeadline(now.Add(idle))
			armed = now
		}
		if err := w.add(f); err != nil {
			s.close()
			return false
		}
		return true
	}
	flush := func() bool {
		if err := w.flush(); err != nil {
			s.close()
			return false
		}
		return true
	}
	// drain writes what is queued, batch after batch, until the queue is
	// empty.
	var batch []outFrame
	drain := func() bool {
		for {
			batch = s.out.take(batch)
			n := len(batch)
			if n == 0 {
				w.release()
				return true
			}
			for _, f := range batch {
				if !write(f) {
					return false
				}
			}
			if !flush() {
				return false
			}
			clear(batch) // the entries written are not kept alive
			batch = batch[:0]
			s.out.written(n)
		}
	}
	for {
		select {
		case <-s.done:
			return
		case <-s.stopWriter:
			return
		case b := <-s.final:
			if drain() && write(outFrame{head: b}) {
				flush()
			}
			s.close()
			return
		case <-ping.C:
			if !write(outFrame{head: pingFrame}) || !flush() {
				return
			}
			w.release()
		case <-s.out.ready:
			if !drain() {
				return
			}
		}
	}
}

// post queues a frame without waiting; false once the session is closed.
// A client that lets its queue reach the hard bound is disconnected.
func (s *session) post(f outFrame) bool {
	err := s.out.post(f)
	if errors.Is(err, errOutboundOverflow) {
		s.log.Warn("closing connection: it does not read what it is sent", "framesMax", s.out.hard)
		s.srv.metrics.connectionsOverflowed.Inc()
		s.close()
	}
	return err == nil
}

// offer queues a MESSAGE frame unless the queue is full; then it returns
// false and, when drained is not nil, calls it once the queue has room
// again (on the writer's goroutine: it must not block). False as well once
// the session is closed (drained is then never called).
func (s *session) offer(f outFrame, drained func()) bool { return s.out.offer(f, drained) }

// send queues cmd without waiting (see post); false once the session is
// closed. Safe from any goroutine, actors included.
func (s *session) send(cmd *pb.BaseCommand) bool {
	b, err := protocol.AppendCommand(nil, cmd)
	if err != nil {
		s.log.Error("encoding command", "type", cmd.GetType(), "err", err)
		return false
	}
	return s.post(outFrame{head: b})
}

// sendError answers a request with the ServerError mapped from err.
func (s *session) sendError(requestID uint64, err error) {
	s.send(protocol.Error(requestID, serverError(err), err.Error()))
}

// ctx is the context of a request handled on the reader goroutine.
func (s *session) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(s.srv.ctx, 30*time.Second)
}

// handle dispatches one command. A returned error closes the connection.
func (s *session) handle(f protocol.Frame) error {
	cmd := f.Cmd
	t := cmd.GetType()
	if !s.connected && t != pb.BaseCommand_CONNECT {
		return fmt.Errorf("%w: %s before CONNECT", errCloseConnection, t)
	}
	switch t {
	case pb.BaseCommand_CONNECT:
		return s.handleConnect(cmd.GetConnect())
	case pb.BaseCommand_AUTH_RESPONSE:
		return s.handleAuthResponse(cmd.GetAuthResponse())
	case pb.BaseCommand_PING:
		s.send(protocol.Pong())
	case pb.BaseCommand_PONG:
	case pb.BaseCommand_LOOKUP:
		s.handleLookup(cmd.GetLookupTopic())
	case pb.BaseCommand_PARTITIONED_METADATA:
		s.handlePartitionedMetadata(cmd.GetPartitionMetadata())
	case pb.BaseCommand_PRODUCER:
		s.handleProducer(cmd.GetProducer())
	case pb.BaseCommand_SEND:
		return s.handleSend(cmd.GetSend(), f)
	case pb.BaseCommand_CLOSE_PRODUCER:
		s.handleCloseProducer(cmd.GetCloseProducer())
	case pb.BaseCommand_SUBSCRIBE:
		s.handleSubscribe(cmd.GetSubscribe())
	case pb.BaseCommand_FLOW:
		s.handleFlow(cmd.GetFlow())
	case pb.BaseCommand_ACK:
		s.handleAck(cmd.GetAck())
	case pb.BaseCommand_REDELIVER_UNACKNOWLEDGED_MESSAGES:
		s.handleRedeliver(cmd.GetRedeliverUnacknowledgedMessages())
	case pb.BaseCommand_CLOSE_CONSUMER:
		s.handleCloseConsumer(cmd.GetCloseConsumer())
	case pb.BaseCommand_UNSUBSCRIBE:
		s.handleUnsubscribe(cmd.GetUnsubscribe())
	case pb.BaseCommand_GET_LAST_MESSAGE_ID:
		s.handleGetLastMessageID(cmd.GetGetLastMessageId())
	case pb.BaseCommand_SEEK:
		s.handleSeek(cmd.GetSeek())
	case pb.BaseCommand_GET_SCHEMA:
		s.handleGetSchema(cmd.GetGetSchema())
	case pb.BaseCommand_GET_OR_CREATE_SCHEMA:
		s.handleGetOrCreateSchema(cmd.GetGetOrCreateSchema())
	case pb.BaseCommand_GET_TOPICS_OF_NAMESPACE:
		s.handleGetTopicsOfNamespace(cmd.GetGetTopicsOfNamespace())
	case pb.BaseCommand_CONSUMER_STATS:
		s.handleConsumerStats(cmd.GetConsumerStats())
	default:
		if s.handleTxn(cmd) { // txn.go: answered with NotAllowedError
			return nil
		}
		// A command we know but do not serve (auth refresh, topic
		// watchers, broker-to-broker commands...): the client cannot
		// proceed; close.
		return fmt.Errorf("%w: unsupported command %s", errCloseConnection, t)
	}
	return nil
}

func (s *session) handleConnect(c *pb.CommandConnect) error {
	if s.connected {
		return fmt.Errorf("%w: second CONNECT", errCloseConnection)
	}
	// Set before the credentials' expiry timer is armed: its challenge
	// reads it.
	s.protocolVersion = min(c.GetProtocolVersion(), protocol.ProtocolVersion)
	if err := s.authenticateConnect(c); err != nil {
		return err
	}
	s.connected = true
	s.clientVersion = c.GetClientVersion()
	s.entryMetadata = c.GetFeatureFlags().GetSupportsBrokerEntryMetadata()
	s.log = s.log.With("client", s.clientVersion)
	s.send(protocol.Connected(s.srv.cfg.ServerVersion, s.protocolVersion, int32(s.srv.cfg.MaxMessageSize), &pb.FeatureFlags{}))
	return nil
}

func (s *session) handleLookup(c *pb.CommandLookupTopic) {
	ctx, cancel := s.ctx()
	defer cancel()
	// The coordinator topic is no topic of a tenant's: any client may look
	// its partitions up (what it may do there, txn.go decides).
	if !isTxnCoordinatorTopic(c.GetTopic()) {
		if err := s.checkTopicName(ctx, c.GetTopic(), actionLookup); err != nil {
			s.send(protocol.LookupError(c.GetRequestId(), serverError(err), err.Error()))
			return
		}
	}
	s.send(s.srv.handleLookupTopic(ctx, c)) // cluster.go
}

func (s *session) handlePartitionedMetadata(c *pb.CommandPartitionedTopicMetadata) {
	if isTxnCoordinatorTopic(c.GetTopic()) {
		if tc := s.srv.brk.Txn(); tc != nil {
			s.send(protocol.PartitionedMetadataResponse(c.GetRequestId(), uint32(tc.Coordinators())))
		} else {
			s.send(protocol.PartitionedMetadataError(c.GetRequestId(), pb.ServerError_NotAllowedError, errTxnOff.Error()))
		}
		return
	}
	ctx, cancel := s.ctx()
	defer cancel()
	if err := s.checkTopicName(ctx, c.GetTopic(), actionLookup); err != nil {
		s.send(protocol.PartitionedMetadataError(c.GetRequestId(), serverError(err), err.Error()))
		return
	}
	create := c.MetadataAutoCreationEnabled == nil || c.GetMetadataAutoCreationEnabled()
	n, err := s.srv.brk.Partitions(ctx, c.GetTopic(), create)
	if err != nil {
		s.send(protocol.PartitionedMetadataError(c.GetRequestId(), serverError(err), err.Error()))
		return
	}
	s.send(protocol.PartitionedMetadataResponse(c.GetRequestId(), uint32(n)))
}

// teardown releases what the session holds: producers leave their topics,
// consumers leave their subscriptions (their unacknowledged messages go to
// other consumers).
func (s *session) teardown() {
	for id, p := range s.producers {
		p.close()
		delete(s.producers, id)
	}
	for id, c := range s.consumers {
		c.close()
		delete(s.consumers, id)
	}
}
