package meta

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Defaults of EmbeddedConfig; docs/metadata.md says why.
const (
	// DefaultEmbeddedMaxTxnOps is the embedded member's --max-txn-ops.
	DefaultEmbeddedMaxTxnOps = 1024
	// DefaultEmbeddedQuotaBytes is the embedded member's backend quota
	// (etcd's own default is 2 GiB; 8 GiB is etcd's suggested maximum).
	DefaultEmbeddedQuotaBytes = 8 << 30
	// DefaultEmbeddedCompactionMode and DefaultEmbeddedCompactionRetention:
	// periodic auto-compaction keeping 5 minutes of history, so a watch can
	// resume from any revision of the last 5 minutes, whatever the write
	// rate.
	DefaultEmbeddedCompactionMode      = "periodic"
	DefaultEmbeddedCompactionRetention = "5m"
	// DefaultEmbeddedCompactionRevisions is the retention when the mode is
	// set to "revision" without one: the latest 10000 revisions.
	DefaultEmbeddedCompactionRevisions = "10000"
	// DefaultEmbeddedStartTimeout bounds StartEmbedded's wait for the
	// member to be ready.
	DefaultEmbeddedStartTimeout = 60 * time.Second
	// DefaultEmbeddedLogLevel keeps the member quiet.
	DefaultEmbeddedLogLevel = "error"

	// startAttemptsMax is how often StartEmbedded retries when a port it
	// picked was taken by someone else before etcd bound it.
	startAttemptsMax = 5
)

// EmbeddedConfig configures StartEmbedded. Zero fields take the defaults.
type EmbeddedConfig struct {
	// Dir is the member's data directory (etcd's --data-dir), created if
	// missing. Required. Data survives restarts on the same Dir.
	Dir string
	// Name is the member name. Default "lakegate".
	Name string
	// Host is the address the client and peer listeners bind. Default
	// "127.0.0.1".
	Host string
	// ClientPort and PeerPort are the listening ports. 0 (the default)
	// picks a free port at every start.
	ClientPort, PeerPort int
	// MaxTxnOps is --max-txn-ops. Default DefaultEmbeddedMaxTxnOps (1024).
	MaxTxnOps int
	// MaxRequestBytes is --max-request-bytes. Default
	// DefaultEmbeddedMaxRequestBytes (8 MiB).
	MaxRequestBytes int
	// QuotaBackendBytes is --quota-backend-bytes. Default
	// DefaultEmbeddedQuotaBytes (8 GiB).
	QuotaBackendBytes int64
	// AutoCompactionMode ("periodic" or "revision") and
	// AutoCompactionRetention (a duration such as "5m" for periodic, a
	// revision count such as "10000" for revision). Defaults "periodic",
	// "5m" ("10000" in revision mode).
	AutoCompactionMode, AutoCompactionRetention string
	// StartTimeout bounds the wait for the member to be ready. Default
	// DefaultEmbeddedStartTimeout (60 s).
	StartTimeout time.Duration
	// LogLevel is the member's zap level (debug, info, warn, error).
	// Default "error".
	LogLevel string
	// UnsafeNoFsync turns fsync off. For tests only: a crash loses data.
	UnsafeNoFsync bool
}

func (c *EmbeddedConfig) setDefaults() {
	if c.Name == "" {
		c.Name = "lakegate"
	}
	if c.Host == "" {
		c.Host = "127.0.0.1"
	}
	if c.MaxTxnOps <= 0 {
		c.MaxTxnOps = DefaultEmbeddedMaxTxnOps
	}
	if c.MaxRequestBytes <= 0 {
		c.MaxRequestBytes = DefaultEmbeddedMaxRequestBytes
	}
	if c.QuotaBackendBytes <= 0 {
		c.QuotaBackendBytes = DefaultEmbeddedQuotaBytes
	}
	if c.AutoCompactionMode == "" {
		c.AutoCompactionMode = DefaultEmbeddedCompactionMode
	}
	if c.AutoCompactionRetention == "" {
		c.AutoCompactionRetention = DefaultEmbeddedCompactionRetention
		if c.AutoCompactionMode == "revision" {
			c.AutoCompactionRetention = DefaultEmbeddedCompactionRevisions
		}
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = DefaultEmbeddedStartTimeout
	}
	if c.LogLevel == "" {
		c.LogLevel = DefaultEmbeddedLogLevel
	}
}

// Embedded is a single-member etcd server running in this process, with a
// client connected to it.
type Embedded struct {
	cfg       EmbeddedConfig
	etcd      *embed.Etcd
	endpoints []string
	cli       *clientv3.Client
	closing   *atomic.Bool // set by Close: quiets the member's logger
}

// StartEmbedded starts a single-member etcd in cfg.Dir and waits until it
// is ready (cfg.StartTimeout) and a client can reach it. A Dir that holds a
// member's data is restarted with that data, whatever the ports.
func StartEmbedded(cfg EmbeddedConfig) (*Embedded, error) {
	if cfg.Dir == "" {
		return nil, fmt.Errorf("%w: embedded etcd needs a data directory", ErrInvalid)
	}
	cfg.setDefaults()
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("meta: embedded etcd: %w", err)
	}
	var err error
	for range startAttemptsMax {
		var e *Embedded
		e, err = startEmbedded(cfg)
		if err == nil {
			return e, nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) || (cfg.ClientPort != 0 && cfg.PeerPort != 0) {
			break
		}
	}
	return nil, err
}

func startEmbedded(cfg EmbeddedConfig) (*Embedded, error) {
	clientPort, err := portOrFree(cfg.Host, cfg.ClientPort)
	if err != nil {
		return nil, err
	}
	peerPort, err := portOrFree(cfg.Host, cfg.PeerPort)
	if err != nil {
		return nil, err
	}
	clientURL := url.URL{Scheme: "http", Host: net.JoinHostPort(cfg.Host, strconv.Itoa(clientPort))}
	peerURL := url.URL{Scheme: "http", Host: net.JoinHostPort(cfg.Host, strconv.Itoa(peerPort))}

	ec := embed.NewConfig()
	ec.Name = cfg.Name
	ec.Dir = cfg.Dir
	ec.ListenClientUrls = []url.URL{clientURL}
	ec.AdvertiseClientUrls = []url.URL{clientURL}
	ec.ListenPeerUrls = []url.URL{peerURL}
	ec.AdvertisePeerUrls = []url.URL{peerURL}
	ec.InitialCluster = ec.InitialClusterFromName(cfg.Name)
	ec.InitialClusterToken = "lakegate-" + cfg.Name
	ec.MaxTxnOps = uint(cfg.MaxTxnOps)
	ec.MaxRequestBytes = uint(cfg.MaxRequestBytes)
	ec.QuotaBackendBytes = cfg.QuotaBackendBytes
	ec.AutoCompactionMode = cfg.AutoCompactionMode
	ec.AutoCompactionRetention = cfg.AutoCompactionRetention
	ec.UnsafeNoFsync = cfg.UnsafeNoFsync
	level, err := zapcore.ParseLevel(cfg.LogLevel)
	if err != nil {
		return nil, fmt.Errorf("%w: embedded etcd log level: %w", ErrInvalid, err)
	}
	closing := new(atomic.Bool)
	ec.Logger = "zap"
	ec.LogLevel = cfg.LogLevel
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.New(quietOnClose{
		Core: zapcore.NewCore(
			zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.Lock(os.Stderr), level),
		closing: closing,
	}))

	etcd, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("meta: starting embedded etcd in %s: %w", cfg.Dir, err)
	}
	timer := time.NewTimer(cfg.StartTimeout)
	defer timer.Stop()
	select {
	case <-etcd.Server.ReadyNotify():
	case err := <-etcd.Err():
		etcd.Close()
		return nil, fmt.Errorf("meta: embedded etcd in %s failed: %w", cfg.Dir, err)
	case <-timer.C:
		etcd.Close()
		return nil, fmt.Errorf("%w: embedded etcd in %s not ready after %v", ErrUnavailable, cfg.Dir, cfg.StartTimeout)
	}
	endpoints := []string{clientURL.String()}
	// The node's own client calls the member's request handlers directly
	// (etcd's v3client): no gRPC marshalling, no loopback socket. Other
	// processes (etcdctl, tools) use the client URL.
	cli := v3client.New(etcd.Server)
	return &Embedded{cfg: cfg, etcd: etcd, endpoints: endpoints, cli: cli, closing: closing}, nil
}

// quietOnClose drops the member's log entries below DPanic once Close has
// begun: a clean shutdown makes etcd log "use of closed network connection"
// and "server closed" at error level, which is noise, not news.
type quietOnClose struct {
	zapcore.Core
	closing *atomic.Bool
}

func (c quietOnClose) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if ent.Level < zapcore.DPanicLevel && c.closing.Load() {
		return ce
	}
	if c.Enabled(ent.Level) {
		return ce.AddCore(ent, c)
	}
	return ce
}

func (c quietOnClose) With(fields []zapcore.Field) zapcore.Core {
	return quietOnClose{Core: c.Core.With(fields), closing: c.closing}
}

// portOrFree returns port, or when it is 0 a port that was free a moment
// ago (the caller retries if someone takes it before etcd binds it: embed
// cannot be handed listeners).
func portOrFree(host string, port int) (int, error) {
	if port != 0 {
		return port, nil
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("meta: finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Endpoints returns the member's client URLs (for Dial or etcdctl).
func (e *Embedded) Endpoints() []string { return append([]string(nil), e.endpoints...) }

// Config returns the configuration the member runs with, defaults filled in
// (ports as given: see Endpoints for the ones in use).
func (e *Embedded) Config() EmbeddedConfig { return e.cfg }

// Client returns a client of the member, owned by the Embedded: Close
// closes it.
func (e *Embedded) Client() *clientv3.Client { return e.cli }

// NewStore returns a Store on the member. opts.MaxTxnOps and
// opts.MaxRequestBytes default to the member's limits. The store must be
// closed before the Embedded.
func (e *Embedded) NewStore(opts EtcdOptions) *Etcd {
	if opts.MaxTxnOps <= 0 {
		opts.MaxTxnOps = e.cfg.MaxTxnOps
	}
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = e.cfg.MaxRequestBytes
	}
	return NewEtcd(e.cli, opts)
}

// Err reports a fatal error of the running member (the channel is closed
// when it stops).
func (e *Embedded) Err() <-chan error { return e.etcd.Err() }

// Close closes the client and stops the member cleanly; its data stays in
// Dir. Close is idempotent.
func (e *Embedded) Close() error {
	if e.closing.Swap(true) {
		return nil
	}
	err := e.cli.Close()
	e.etcd.Close()
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("meta: closing embedded etcd client: %w", err)
	}
	return nil
}
