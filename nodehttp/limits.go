package nodehttp

import (
	"log"
	"net"
	"net/http"
	"sync"
	"time"
)

// Limits bound the node's HTTP server (docs/security.md, "Limits"); the
// admin REST's request body limit is the gateway's
// (gateway.Config.AdminMaxRequestBytes). Zero fields take the defaults
// named.
type Limits struct {
	// ReadHeaderTimeout closes a connection that has not sent a request's
	// headers within it (slow-header attacks). Default 10 s.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds the reading of a whole request, body included.
	// Default 60 s.
	ReadTimeout time.Duration
	// IdleTimeout closes a keep-alive connection waiting this long for its
	// next request. Default 120 s.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's line and headers (Pulsar's
	// httpMaxRequestHeaderSize); a larger one is answered 431. Default
	// 8 KiB.
	MaxHeaderBytes int
	// MaxConnections bounds the open connections (Pulsar's
	// maxHttpServerConnections); more wait in the listen backlog until one
	// closes. Default 2048; negative: no limit.
	MaxConnections int
}

func (l Limits) withDefaults() Limits {
	if l.ReadHeaderTimeout <= 0 {
		l.ReadHeaderTimeout = 10 * time.Second
	}
	if l.ReadTimeout <= 0 {
		l.ReadTimeout = 60 * time.Second
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = 120 * time.Second
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = 8 << 10
	}
	if l.MaxConnections == 0 {
		l.MaxConnections = 2048
	}
	return l
}

// Server returns an HTTP server for h with the limits applied (serve it
// on Listener(ln)).
func (l Limits) Server(h http.Handler, errLog *log.Logger) *http.Server {
	srv := &http.Server{Handler: h, ErrorLog: errLog}
	l.Apply(srv)
	return srv
}

// Apply sets the limits' timeouts and header bound on srv.
func (l Limits) Apply(srv *http.Server) {
	l = l.withDefaults()
	srv.ReadHeaderTimeout = l.ReadHeaderTimeout
	srv.ReadTimeout = l.ReadTimeout
	srv.IdleTimeout = l.IdleTimeout
	srv.MaxHeaderBytes = l.MaxHeaderBytes
}

// Listener wraps ln so that at most MaxConnections accepted connections
// are open at once: Accept waits for one to close.
func (l Limits) Listener(ln net.Listener) net.Listener {
	l = l.withDefaults()
	if l.MaxConnections < 0 {
		return ln
	}
	return &limitedListener{Listener: ln, slots: make(chan struct{}, l.MaxConnections), done: make(chan struct{})}
}

type limitedListener struct {
	net.Listener
	slots     chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func (l *limitedListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitedConn{Conn: c, release: func() { <-l.slots }}, nil
}

func (l *limitedListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
