package meta

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Defaults of EtcdOptions and DialOptions.
const (
	// DefaultRequestTimeout bounds one etcd request whose context has no
	// earlier deadline.
	DefaultRequestTimeout = 10 * time.Second
	// DefaultDialTimeout bounds Dial's first contact with the cluster.
	DefaultDialTimeout = 5 * time.Second
	// DefaultEmbeddedMaxRequestBytes is the request size limit the embedded
	// member is given (etcd's own default is 1.5 MiB).
	DefaultEmbeddedMaxRequestBytes = 8 << 20
	// grpcOverheadBytes is what etcd adds to --max-request-bytes for the
	// gRPC envelope (etcd's embed.grpcOverheadBytes).
	grpcOverheadBytes = 512 << 10
)

// EtcdOptions configures an Etcd store. The zero value gives the defaults.
type EtcdOptions struct {
	// Prefix is prepended to every key sent to etcd and stripped from every
	// key returned, so that several deployments (or tests) can share one
	// cluster. Callers never see it. Default "" (none).
	Prefix string
	// MaxTxnOps is the store's MaxTxnOps. It must not exceed the cluster's
	// --max-txn-ops (a larger Txn is then refused by the server, also with
	// ErrTooManyOps). Default DefaultMaxTxnOps (128, etcd's default).
	MaxTxnOps int
	// MaxRequestBytes bounds the size of one Txn (keys and values plus 16
	// bytes per compare and op; ErrTooManyOps beyond) before it is sent. It
	// must not exceed the cluster's --max-request-bytes (the server then
	// refuses, also with ErrTooManyOps). Default EtcdDefaultMaxRequestBytes
	// (1.5 MiB, etcd's default).
	MaxRequestBytes int
	// RequestTimeout bounds each Get, Range and Txn whose context has no
	// earlier deadline; when it passes the call fails with ErrUnavailable.
	// Default DefaultRequestTimeout (10 s).
	RequestTimeout time.Duration
	// WatchBufferEvents is the capacity of each watch channel, in events; a
	// watcher whose buffer is full when an event arrives is closed.
	// Default DefaultWatchBufferEvents (1024).
	WatchBufferEvents int
}

func (o *EtcdOptions) setDefaults() {
	if o.MaxTxnOps <= 0 {
		o.MaxTxnOps = DefaultMaxTxnOps
	}
	if o.MaxRequestBytes <= 0 {
		o.MaxRequestBytes = EtcdDefaultMaxRequestBytes
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.WatchBufferEvents <= 0 {
		o.WatchBufferEvents = DefaultWatchBufferEvents
	}
}

// Etcd is the Store on an etcd cluster (go.etcd.io/etcd/client/v3). Create
// it with NewEtcd on a client you own, with Dial, or with Embedded.NewStore.
type Etcd struct {
	cli        *clientv3.Client
	opts       EtcdOptions
	ownsClient bool // Dial: Close closes cli too

	// ctx is canceled by Close; it cancels in-flight calls and watches.
	ctx    context.Context
	cancel context.CancelFunc

	mu struct {
		sync.Mutex
		closed bool
	}
	// watches counts watch goroutines; Add only under mu while not closed.
	watches sync.WaitGroup
}

var _ Store = (*Etcd)(nil)

// NewEtcd returns a Store on cli. The caller keeps ownership of cli: Close
// releases the store's watches but does not close the client.
func NewEtcd(cli *clientv3.Client, opts EtcdOptions) *Etcd {
	opts.setDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Etcd{cli: cli, opts: opts, ctx: ctx, cancel: cancel}
}

// DialOptions configures Dial. The zero value gives the defaults.
type DialOptions struct {
	EtcdOptions
	// DialTimeout bounds the first contact with the cluster, when ctx has
	// no earlier deadline. Default DefaultDialTimeout (5 s).
	DialTimeout time.Duration
	// AutoSyncInterval, when > 0, refreshes the endpoint list from the
	// cluster's member list at that interval. Default 0 (off): the given
	// endpoints are used as they are, which is what a cluster behind a load
	// balancer or a Kubernetes service needs.
	AutoSyncInterval time.Duration
	// MaxCallSendBytes is the client's gRPC send limit. Default
	// MaxRequestBytes plus etcd's gRPC overhead (512 KiB).
	MaxCallSendBytes int
	// KeepAliveTime and KeepAliveTimeout detect dead connections (so that
	// watches close instead of hanging). Defaults 10 s and 5 s.
	KeepAliveTime, KeepAliveTimeout time.Duration
	// Username and Password authenticate, when the cluster has auth on.
	Username, Password string
	// TLS, when set, is used for https endpoints.
	TLS *tls.Config
	// Logger receives the etcd client's logs. Default: none (zap.NewNop);
	// every failure that matters is returned as an error anyway.
	Logger *zap.Logger
}

// Dial connects to an external etcd cluster at endpoints (host:port or
// URLs) and checks that it answers a linearizable read within ctx (bounded
// by DialTimeout), failing with ErrUnavailable otherwise (with the reason
// found by connecting to the endpoints once more: refused, a TLS handshake
// that failed and why, plain HTTP to a TLS member), or with
// ErrPermissionDenied when etcd refuses the user, password or prefix. The
// returned store owns its client: Close closes it.
func Dial(ctx context.Context, endpoints []string, opts DialOptions) (*Etcd, error) {
	if len(endpoints) == 0 {
		return nil, fmt.Errorf("%w: no etcd endpoints", ErrInvalid)
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = DefaultDialTimeout
	}
	opts.EtcdOptions.setDefaults()
	if opts.MaxCallSendBytes <= 0 {
		opts.MaxCallSendBytes = opts.MaxRequestBytes + grpcOverheadBytes
	}
	if opts.KeepAliveTime <= 0 {
		opts.KeepAliveTime = 10 * time.Second
	}
	if opts.KeepAliveTimeout <= 0 {
		opts.KeepAliveTimeout = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            endpoints,
		DialTimeout:          opts.DialTimeout,
		AutoSyncInterval:     opts.AutoSyncInterval,
		DialKeepAliveTime:    opts.KeepAliveTime,
		DialKeepAliveTimeout: opts.KeepAliveTimeout,
		MaxCallSendMsgSize:   opts.MaxCallSendBytes,
		MaxCallRecvMsgSize:   math.MaxInt32,
		Username:             opts.Username,
		Password:             opts.Password,
		TLS:                  opts.TLS,
		Logger:               opts.Logger,
	})
	if err != nil {
		return nil, dialError(ctx, endpoints, opts.TLS, mapEtcdErr("dial", err))
	}
	cctx, cancel := context.WithTimeout(ctx, opts.DialTimeout)
	defer cancel()
	// A plain linearizable read of a key nobody writes (as `etcdctl
	// endpoint health` does) proves a quorum answers — under the prefix,
	// which is all an etcd user of this store may need to read.
	if _, err := cli.Get(cctx, opts.Prefix+"health"); err != nil {
		_ = cli.Close()
		return nil, dialError(ctx, endpoints, opts.TLS, mapEtcdErr("dial", err))
	}
	e := NewEtcd(cli, opts.EtcdOptions)
	e.ownsClient = true
	return e, nil
}

// Client returns the etcd client (for maintenance such as compaction or
// defragmentation; never write keys through it behind the store's back).
func (e *Etcd) Client() *clientv3.Client { return e.cli }

// Prefix returns the store's key prefix (EtcdOptions.Prefix).
func (e *Etcd) Prefix() string { return e.opts.Prefix }

// call prepares one request: it fails fast after Close, and returns a
// context that ends at the request timeout or when the store closes.
func (e *Etcd) call(ctx context.Context) (context.Context, func(), error) {
	e.mu.Lock()
	closed := e.mu.closed
	e.mu.Unlock()
	if closed {
		return nil, nil, ErrClosed
	}
	if err := ctxErr(ctx); err != nil {
		return nil, nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, e.opts.RequestTimeout)
	stop := context.AfterFunc(e.ctx, cancel)
	return cctx, func() { stop(); cancel() }, nil
}

// fail maps err from a call made with cctx, which was derived from ctx.
func (e *Etcd) fail(op string, ctx, cctx context.Context, err error) error {
	switch {
	case e.ctx.Err() != nil:
		// Close interrupted the call: a Txn's outcome is unknown.
		return fmt.Errorf("%w while in flight, %w (etcd %s: %w)", ErrClosed, ErrUnavailable, op, err)
	case ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("meta: etcd %s: %w", op, ctx.Err()) // canceled by the caller
	case cctx.Err() != nil:
		// The caller's deadline or the request timeout: ErrUnavailable.
		return fmt.Errorf("%w (etcd %s: %w)", ErrUnavailable, op, errors.Join(err, cctx.Err()))
	}
	return mapEtcdErr(op, err)
}

// mapEtcdErr maps an etcd client error to the package's sentinels, keeping
// the cause: too many ops or too large a request → ErrTooManyOps; empty or
// duplicate keys → ErrInvalid; deadline exceeded or gRPC Unavailable (no
// connection, no leader, request timed out, leader changed) →
// ErrUnavailable.
func mapEtcdErr(op string, err error) error {
	switch {
	case errors.Is(err, rpctypes.ErrTooManyOps), errors.Is(err, rpctypes.ErrGRPCTooManyOps),
		errors.Is(err, rpctypes.ErrRequestTooLarge), errors.Is(err, rpctypes.ErrGRPCRequestTooLarge):
		return fmt.Errorf("%w (etcd %s: %w)", ErrTooManyOps, op, err)
	case errors.Is(err, rpctypes.ErrEmptyKey), errors.Is(err, rpctypes.ErrGRPCEmptyKey),
		errors.Is(err, rpctypes.ErrDuplicateKey), errors.Is(err, rpctypes.ErrGRPCDuplicateKey):
		return fmt.Errorf("%w (etcd %s: %w)", ErrInvalid, op, err)
	case errors.Is(err, rpctypes.ErrLeaseNotFound), errors.Is(err, rpctypes.ErrGRPCLeaseNotFound):
		return fmt.Errorf("%w (etcd %s: %w)", ErrLeaseExpired, op, err)
	case errors.Is(err, rpctypes.ErrAuthFailed), errors.Is(err, rpctypes.ErrGRPCAuthFailed),
		errors.Is(err, rpctypes.ErrUserEmpty), errors.Is(err, rpctypes.ErrGRPCUserEmpty),
		errors.Is(err, rpctypes.ErrUserNotFound), errors.Is(err, rpctypes.ErrGRPCUserNotFound),
		errors.Is(err, rpctypes.ErrPermissionDenied), errors.Is(err, rpctypes.ErrGRPCPermissionDenied),
		errors.Is(err, rpctypes.ErrInvalidAuthToken), errors.Is(err, rpctypes.ErrGRPCInvalidAuthToken):
		return fmt.Errorf("%w (etcd %s: %w)", ErrPermissionDenied, op, err)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w (etcd %s: %w)", ErrUnavailable, op, err)
	}
	switch grpcCode(err) {
	case codes.Unauthenticated, codes.PermissionDenied:
		return fmt.Errorf("%w (etcd %s: %w)", ErrPermissionDenied, op, err)
	case codes.Unavailable, codes.DeadlineExceeded:
		return fmt.Errorf("%w (etcd %s: %w)", ErrUnavailable, op, err)
	}
	return fmt.Errorf("meta: etcd %s: %w", op, err)
}

// grpcCode returns the gRPC code of an etcd client error (codes.Unknown if
// it has none).
func grpcCode(err error) codes.Code {
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee.Code()
	}
	if s, ok := status.FromError(err); ok {
		return s.Code()
	}
	return codes.Unknown
}

func (e *Etcd) export(key []byte, value []byte, mod, create int64) KV {
	return KV{
		Key:            strings.TrimPrefix(string(key), e.opts.Prefix),
		Value:          value,
		ModRevision:    mod,
		CreateRevision: create,
	}
}

// Get implements Store.
func (e *Etcd) Get(ctx context.Context, key string) (KV, bool, error) {
	if key == "" {
		return KV{}, false, fmt.Errorf("%w: empty key", ErrInvalid)
	}
	cctx, done, err := e.call(ctx)
	if err != nil {
		return KV{}, false, err
	}
	defer done()
	resp, err := e.cli.Get(cctx, e.opts.Prefix+key)
	if err != nil {
		return KV{}, false, e.fail("get", ctx, cctx, err)
	}
	if len(resp.Kvs) == 0 {
		return KV{}, false, nil
	}
	kv := resp.Kvs[0]
	return e.export(kv.Key, kv.Value, kv.ModRevision, kv.CreateRevision), true, nil
}

// Range implements Store.
func (e *Etcd) Range(ctx context.Context, start, end string, limit int) ([]KV, error) {
	return e.rangeKeys(ctx, start, end, limit, false)
}

// RangeReverse implements Store. etcd sorts the whole [start, end) on the
// server before applying limit: keep the range narrow.
func (e *Etcd) RangeReverse(ctx context.Context, start, end string, limit int) ([]KV, error) {
	return e.rangeKeys(ctx, start, end, limit, true)
}

func (e *Etcd) rangeKeys(ctx context.Context, start, end string, limit int, reverse bool) ([]KV, error) {
	cctx, done, err := e.call(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if end != "" && end <= start {
		return nil, nil
	}
	key := e.opts.Prefix + start
	if key == "" {
		key = "\x00" // etcd keys are non-empty: "\x00" is the first possible key
	}
	var rangeEnd string
	if end == "" {
		// The end of the prefix's keyspace; "\x00" (etcd's "to the end")
		// when there is no prefix.
		rangeEnd = clientv3.GetPrefixRangeEnd(e.opts.Prefix)
	} else {
		rangeEnd = e.opts.Prefix + end
	}
	opts := []clientv3.OpOption{clientv3.WithRange(rangeEnd)}
	if limit > 0 {
		opts = append(opts, clientv3.WithLimit(int64(limit)))
	}
	if reverse {
		opts = append(opts, clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend))
	}
	resp, err := e.cli.Get(cctx, key, opts...)
	if err != nil {
		return nil, e.fail("range", ctx, cctx, err)
	}
	out := make([]KV, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		out[i] = e.export(kv.Key, kv.Value, kv.ModRevision, kv.CreateRevision)
	}
	return out, nil
}

// Txn implements Store. The request is checked like etcd's server checks it
// before it is sent (ErrTooManyOps against EtcdOptions.MaxTxnOps,
// ErrInvalid); the server's own refusals map to the same sentinels.
func (e *Etcd) Txn(ctx context.Context, cmps []Cmp, ops []Op) (bool, int64, error) {
	if err := checkTxn(cmps, ops, e.opts.MaxTxnOps, e.opts.MaxRequestBytes); err != nil {
		return false, 0, err
	}
	cctx, done, err := e.call(ctx)
	if err != nil {
		return false, 0, err
	}
	defer done()
	ifs := make([]clientv3.Cmp, len(cmps))
	for i, c := range cmps {
		ifs[i] = clientv3.Compare(clientv3.ModRevision(e.opts.Prefix+c.Key), "=", c.ModRevision)
	}
	thens := make([]clientv3.Op, len(ops))
	for i, op := range ops {
		k := e.opts.Prefix + op.Key
		switch op.Kind {
		case OpPut:
			if op.Lease != 0 {
				thens[i] = clientv3.OpPut(k, string(op.Value), clientv3.WithLease(clientv3.LeaseID(op.Lease)))
			} else {
				thens[i] = clientv3.OpPut(k, string(op.Value))
			}
		case OpDelete:
			thens[i] = clientv3.OpDelete(k)
		case OpDeletePrefix:
			thens[i] = clientv3.OpDelete(k, clientv3.WithPrefix())
		}
	}
	resp, err := e.cli.Txn(cctx).If(ifs...).Then(thens...).Commit()
	if err != nil {
		return false, 0, e.fail("txn", ctx, cctx, err)
	}
	return resp.Succeeded, resp.Header.Revision, nil
}

// Grant implements Store.
func (e *Etcd) Grant(ctx context.Context, ttl time.Duration) (LeaseID, error) {
	cctx, done, err := e.call(ctx)
	if err != nil {
		return 0, err
	}
	defer done()
	secs := int64(math.Ceil(ttl.Seconds()))
	resp, err := e.cli.Grant(cctx, max(secs, 1))
	if err != nil {
		return 0, e.fail("grant", ctx, cctx, err)
	}
	return LeaseID(resp.ID), nil
}

// KeepAlive implements Store.
func (e *Etcd) KeepAlive(ctx context.Context, id LeaseID) (time.Duration, error) {
	cctx, done, err := e.call(ctx)
	if err != nil {
		return 0, err
	}
	defer done()
	resp, err := e.cli.KeepAliveOnce(cctx, clientv3.LeaseID(id))
	if err != nil {
		return 0, e.fail("keepalive", ctx, cctx, err)
	}
	if resp.TTL <= 0 {
		return 0, fmt.Errorf("%w: lease %x", ErrLeaseExpired, int64(id))
	}
	return time.Duration(resp.TTL) * time.Second, nil
}

// Revoke implements Store.
func (e *Etcd) Revoke(ctx context.Context, id LeaseID) error {
	cctx, done, err := e.call(ctx)
	if err != nil {
		return err
	}
	defer done()
	if _, err := e.cli.Revoke(cctx, clientv3.LeaseID(id)); err != nil {
		if err := e.fail("revoke", ctx, cctx, err); !errors.Is(err, ErrLeaseExpired) {
			return err
		}
	}
	return nil
}

// Watch implements Store. The watch requires a leader
// (clientv3.WithRequireLeader), so a member cut off from its quorum closes
// it instead of going silent.
func (e *Etcd) Watch(ctx context.Context, prefix string, afterRev int64) <-chan Event {
	out := make(chan Event, e.opts.WatchBufferEvents)
	e.mu.Lock()
	if e.mu.closed || ctx.Err() != nil {
		e.mu.Unlock()
		close(out)
		return out
	}
	e.watches.Add(1) // under mu: Close waits for this watch
	e.mu.Unlock()
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	stop := context.AfterFunc(e.ctx, cancel)
	opts := []clientv3.OpOption{clientv3.WithPrefix()}
	if afterRev > 0 {
		opts = append(opts, clientv3.WithRev(afterRev+1))
	}
	wch := e.cli.Watch(wctx, e.opts.Prefix+prefix, opts...)
	go func() {
		defer e.watches.Done()
		defer close(out)
		e.forward(wch, out)
		stop()
		cancel()
		// Drain until the client lets go of the canceled watch, so that it
		// never blocks on a send nobody receives.
		for range wch {
		}
	}()
	return out
}

// forward translates watch responses into out until the watch ends, fails
// (compaction included) or out overflows.
func (e *Etcd) forward(wch clientv3.WatchChan, out chan<- Event) {
	for wr := range wch {
		if wr.Canceled || wr.Err() != nil {
			return
		}
		for _, ev := range wr.Events {
			var x Event
			switch ev.Type {
			case clientv3.EventTypePut:
				// A copy: an in-process member (Embedded's client) hands
				// every watch of the key the same event.
				x = Event{Kind: EventPut, KV: e.export(ev.Kv.Key, bytes.Clone(ev.Kv.Value), ev.Kv.ModRevision, ev.Kv.CreateRevision)}
			case clientv3.EventTypeDelete:
				x = Event{Kind: EventDelete, KV: e.export(ev.Kv.Key, nil, ev.Kv.ModRevision, 0)}
			default:
				continue
			}
			select {
			case out <- x:
			default:
				return // the consumer fell behind: close its channel
			}
		}
	}
}

// MaxTxnOps implements Store.
func (e *Etcd) MaxTxnOps() int { return e.opts.MaxTxnOps }

// Close implements Store: it ends in-flight calls and watches, waits for the
// watch goroutines, and closes the client if Dial made it.
func (e *Etcd) Close() error {
	e.mu.Lock()
	if e.mu.closed {
		e.mu.Unlock()
		return nil
	}
	e.mu.closed = true
	e.mu.Unlock()
	e.cancel()
	e.watches.Wait()
	if e.ownsClient {
		if err := e.cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("meta: closing etcd client: %w", err)
		}
	}
	return nil
}
