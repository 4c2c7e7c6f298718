package auth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// TLSFiles names the PEM files of a node's TLS.
type TLSFiles struct {
	// CertFile and KeyFile are the node's certificate (chain) and key.
	CertFile, KeyFile string
	// CAFile holds the certificates that client certificates (mTLS) and
	// other members' certificates are checked against. Optional for a
	// server that does not ask for client certificates.
	CAFile string
}

// Reloader serves a node's certificate and CA pool from PEM files, reading
// them again when a file's modification time changes (checked at most once
// per checkInterval, on use): certificates are rotated without a restart.
// A file that fails to load keeps the previous good state (and the error is
// reported by Err). Safe for concurrent use.
type Reloader struct {
	files         TLSFiles
	checkInterval time.Duration

	mu struct {
		sync.Mutex
		cert    *tls.Certificate
		pool    *x509.CertPool
		mtimes  [3]time.Time
		checked time.Time
		err     error
	}
}

// reloadCheckInterval bounds how often the files' modification times are
// looked at.
const reloadCheckInterval = time.Second

// NewReloader loads the files (they must be valid now).
func NewReloader(files TLSFiles) (*Reloader, error) {
	if files.CertFile == "" || files.KeyFile == "" {
		return nil, errors.New("auth: TLS needs a certificate file and a key file")
	}
	r := &Reloader{files: files, checkInterval: reloadCheckInterval}
	if err := r.load(); err != nil {
		return nil, err
	}
	return r, nil
}

func mtime(path string) time.Time {
	if path == "" {
		return time.Time{}
	}
	fi, err := os.Stat(path)
	if err != nil {
		return time.Time{}
	}
	return fi.ModTime()
}

// load reads every file; on error the previous state stays.
func (r *Reloader) load() error {
	m := [3]time.Time{mtime(r.files.CertFile), mtime(r.files.KeyFile), mtime(r.files.CAFile)}
	cert, err := tls.LoadX509KeyPair(r.files.CertFile, r.files.KeyFile)
	if err != nil {
		return fmt.Errorf("auth: TLS certificate %s / key %s: %w", r.files.CertFile, r.files.KeyFile, err)
	}
	var pool *x509.CertPool
	if r.files.CAFile != "" {
		b, err := os.ReadFile(r.files.CAFile)
		if err != nil {
			return fmt.Errorf("auth: TLS CA file: %w", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return fmt.Errorf("auth: TLS CA file %s holds no PEM certificate", r.files.CAFile)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.cert, r.mu.pool, r.mu.mtimes, r.mu.err = &cert, pool, m, nil
	return nil
}

// current returns the state, reloading it first if a file changed.
func (r *Reloader) current() (*tls.Certificate, *x509.CertPool) {
	r.mu.Lock()
	due := time.Since(r.mu.checked) >= r.checkInterval
	if due {
		r.mu.checked = time.Now()
	}
	old := r.mu.mtimes
	r.mu.Unlock()
	if due {
		now := [3]time.Time{mtime(r.files.CertFile), mtime(r.files.KeyFile), mtime(r.files.CAFile)}
		if now != old {
			if err := r.load(); err != nil {
				r.mu.Lock()
				r.mu.err = err
				r.mu.mtimes = now // do not retry a bad file at every handshake
				r.mu.Unlock()
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.cert, r.mu.pool
}

// Err is the error of the last reload that failed (nil after a good one).
func (r *Reloader) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.err
}

// ServerConfig is a TLS server configuration: TLS 1.2 at least, Go's
// default cipher suites (AEAD, forward secrecy), the current certificate;
// with requestClientCerts, client certificates are asked for and, when
// given, verified against the CA (a client without one may still
// authenticate with a token).
func (r *Reloader) ServerConfig(requestClientCerts bool) *tls.Config {
	base := &tls.Config{MinVersion: tls.VersionTLS12}
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		cert, pool := r.current()
		c := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*cert}}
		if requestClientCerts && pool != nil {
			c.ClientAuth = tls.VerifyClientCertIfGiven
			c.ClientCAs = pool
		}
		return c, nil
	}
	return base
}

// ClientConfig is the TLS configuration a node uses to reach other members
// (forwarded admin requests, hand-overs, relayed connections): it trusts the
// CA file (the system roots when there is none) and presents the node's
// certificate (members may require client certificates). The CA pool is
// the one current when ClientConfig is called: call it for every new
// connection, so that a rotated CA file is used from the next one on (the
// certificate presented is looked up at each handshake anyway).
func (r *Reloader) ClientConfig() *tls.Config {
	_, pool := r.current()
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		RootCAs:    pool,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cert, _ := r.current()
			return cert, nil
		},
	}
}

// Certificate is the node's current certificate (reloaded as
// ServerConfig's), parsed: its subject common name is the node's role for
// the tls provider.
func (r *Reloader) Certificate() (*x509.Certificate, error) {
	cert, _ := r.current()
	if cert.Leaf != nil {
		return cert.Leaf, nil
	}
	return x509.ParseCertificate(cert.Certificate[0])
}
