package meta

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
)

// dialCheckTimeout bounds each connection dialError makes to find out why
// a first contact failed.
const dialCheckTimeout = 2 * time.Second

// dialError adds to an ErrUnavailable of Dial what gRPC leaves out (it
// only says that the deadline passed): the reason found by connecting to
// each endpoint once more as the client does — the connection refused, the
// TLS handshake failed (an unknown CA, a name mismatch, a client
// certificate the member refuses or requires), or a plain client talking
// to a member that serves TLS. Other errors are returned as they are.
func dialError(ctx context.Context, endpoints []string, cfg *tls.Config, err error) error {
	if !errors.Is(err, ErrUnavailable) {
		return err
	}
	var reasons []string
	for _, ep := range endpoints {
		if r := checkEndpoint(ctx, ep, cfg); r != "" {
			reasons = append(reasons, ep+": "+r)
		}
	}
	if len(reasons) == 0 {
		return err
	}
	return fmt.Errorf("%w; %s", err, strings.Join(reasons, "; "))
}

// checkEndpoint connects to ep as the etcd client would (TLS for https://
// endpoints and, with a TLS configuration, for endpoints without a scheme)
// and returns what went wrong, or "" when nothing did.
func checkEndpoint(ctx context.Context, ep string, cfg *tls.Config) string {
	host, useTLS := ep, cfg != nil
	if u, err := url.Parse(ep); err == nil && u.Host != "" {
		host = u.Host
		switch u.Scheme {
		case "https", "unixs":
			useTLS = true
		case "http", "unix":
			useTLS = false
		}
	}
	ctx, cancel := context.WithTimeout(ctx, dialCheckTimeout)
	defer cancel()
	d := &net.Dialer{}
	raw, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return err.Error()
	}
	defer raw.Close()
	deadline, _ := ctx.Deadline()
	_ = raw.SetDeadline(deadline)
	if !useTLS {
		// A member serving TLS closes a plain client's connection without a
		// word; it completes a TLS handshake (here without checking its
		// certificate: nothing is sent over it).
		probe := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) // #nosec G402 -- detection only
		if probe.HandshakeContext(ctx) == nil {
			return "the member serves TLS: use an https:// endpoint (and trust the members' CA)"
		}
		return ""
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg != nil {
		tc = cfg.Clone()
	}
	if tc.ServerName == "" {
		tc.ServerName, _, _ = net.SplitHostPort(host)
	}
	tc.NextProtos = []string{"h2"}
	conn := tls.Client(raw, tc)
	if err := conn.HandshakeContext(ctx); err != nil {
		return "TLS handshake: " + err.Error()
	}
	// With TLS 1.3 a member refuses the client's certificate (or its
	// absence) after the client's side of the handshake ended: the alert
	// arrives as the first read. A member that accepted it waits for the
	// client's preface instead, and the short read times out.
	_ = conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := conn.Read(make([]byte, 1)); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return ""
		}
		return "TLS: " + err.Error()
	}
	return ""
}
