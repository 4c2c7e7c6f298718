package faultproxy

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"
)

// maxDrainBytes bounds the request body read (and discarded) before an
// injected error response.
const maxDrainBytes = 256 << 20

// Rule is the faults injected into requests of some methods. Rates are
// fractions in [0, 1], drawn independently in this order: Drop, Error,
// then (for forwarded requests) DropAfter. Latency is added to every
// matching request before it is forwarded or answered.
type Rule struct {
	// Methods the rule applies to ("PUT", "GET", "HEAD", "DELETE",
	// "POST"); empty means every method.
	Methods []string
	// Latency is added before the request is handled.
	Latency time.Duration
	// DropRate: the connection is closed without a response, and the
	// request never reaches the upstream.
	DropRate float64
	// ErrorRate: the request is answered with Status and an S3 error body
	// with Code, and never reaches the upstream.
	ErrorRate float64
	// Status is the error status. Default 503.
	Status int
	// Code is the S3 error code. Default "SlowDown" for 503,
	// "InternalError" otherwise.
	Code string
	// DropAfterRate: the request is forwarded (and takes effect), then the
	// connection is closed without the response.
	DropAfterRate float64
}

func (r Rule) applies(method string) bool {
	if len(r.Methods) == 0 {
		return true
	}
	for _, m := range r.Methods {
		if strings.EqualFold(m, method) {
			return true
		}
	}
	return false
}

// Stats counts requests per method (and "*" for all methods).
type Stats struct {
	Requests, Forwarded, Errors, Dropped, DroppedAfter map[string]int
}

func newStats() Stats {
	return Stats{map[string]int{}, map[string]int{}, map[string]int{}, map[string]int{}, map[string]int{}}
}

func (s Stats) clone() Stats {
	c := newStats()
	for _, p := range [][2]map[string]int{{c.Requests, s.Requests}, {c.Forwarded, s.Forwarded}, {c.Errors, s.Errors}, {c.Dropped, s.Dropped}, {c.DroppedAfter, s.DroppedAfter}} {
		for k, v := range p[1] {
			p[0][k] = v
		}
	}
	return c
}

// String is a one-line summary of the "*" counters.
func (s Stats) String() string {
	return fmt.Sprintf("requests=%d forwarded=%d errors=%d dropped=%d dropped-after=%d",
		s.Requests["*"], s.Forwarded["*"], s.Errors["*"], s.Dropped["*"], s.DroppedAfter["*"])
}

// Proxy is a running fault-injecting reverse proxy.
type Proxy struct {
	// URL is the proxy's base URL, "http://127.0.0.1:PORT".
	URL string

	target *url.URL
	rp     *httputil.ReverseProxy
	srv    *http.Server
	ln     net.Listener
	done   chan struct{}

	mu    sync.Mutex
	rnd   *rand.Rand
	rules []Rule
	stats Stats
}

// Start starts a proxy to upstream (a base URL such as
// "http://127.0.0.1:8333") with no faults, drawing fault decisions from a
// source seeded with seed.
func Start(upstream string, seed uint64) (*Proxy, error) {
	target, err := url.Parse(upstream)
	if err != nil || target.Scheme == "" || target.Host == "" {
		return nil, fmt.Errorf("faultproxy: bad upstream %q", upstream)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{
		URL:    "http://" + ln.Addr().String(),
		target: target,
		ln:     ln,
		done:   make(chan struct{}),
		rnd:    rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		stats:  newStats(),
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = r.In.Host // S3 signs the Host header; keep it
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			http.Error(w, "faultproxy: upstream: "+err.Error(), http.StatusBadGateway)
		},
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(p.done)
		_ = p.srv.Serve(ln)
	}()
	return p, nil
}

// Set replaces the rules; the first rule that applies to a request's
// method is used. Set() with no rules turns faults off.
func (p *Proxy) Set(rules ...Rule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = append([]Rule(nil), rules...)
}

// Outage answers every request with 503 SlowDown (on true) until
// Outage(false), which removes every rule.
func (p *Proxy) Outage(on bool) {
	if on {
		p.Set(Rule{ErrorRate: 1, Status: http.StatusServiceUnavailable, Code: "SlowDown"})
		return
	}
	p.Set()
}

// Stats returns a copy of the counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats.clone()
}

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() error {
	err := p.srv.Close()
	<-p.done
	return err
}

type decision int

const (
	forward decision = iota
	drop
	fail
	dropAfter
)

func (p *Proxy) decide(method string) (Rule, decision) {
	p.mu.Lock()
	defer p.mu.Unlock()
	count := func(m map[string]int) { m[method]++; m["*"]++ }
	count(p.stats.Requests)
	var rule Rule
	found := false
	for _, r := range p.rules {
		if r.applies(method) {
			rule, found = r, true
			break
		}
	}
	if !found {
		count(p.stats.Forwarded)
		return rule, forward
	}
	switch {
	case rule.DropRate > 0 && p.rnd.Float64() < rule.DropRate:
		count(p.stats.Dropped)
		return rule, drop
	case rule.ErrorRate > 0 && p.rnd.Float64() < rule.ErrorRate:
		count(p.stats.Errors)
		return rule, fail
	case rule.DropAfterRate > 0 && p.rnd.Float64() < rule.DropAfterRate:
		count(p.stats.Forwarded)
		count(p.stats.DroppedAfter)
		return rule, dropAfter
	}
	count(p.stats.Forwarded)
	return rule, forward
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rule, d := p.decide(r.Method)
	if rule.Latency > 0 {
		t := time.NewTimer(rule.Latency)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	switch d {
	case drop:
		hangUp(w)
		return
	case fail:
		status := rule.Status
		if status == 0 {
			status = http.StatusServiceUnavailable
		}
		code := rule.Code
		if code == "" {
			code = "InternalError"
			if status == http.StatusServiceUnavailable {
				code = "SlowDown"
			}
		}
		// Drain the body so the client's connection stays reusable.
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, maxDrainBytes))
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(status)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
			`<Error><Code>%s</Code><Message>injected by faultproxy</Message><Resource>%s</Resource><RequestId>faultproxy</RequestId></Error>`,
			code, r.URL.Path)
		return
	case dropAfter:
		// Forward with a recorder, then hang up instead of answering.
		rec := &discardWriter{h: http.Header{}}
		p.rp.ServeHTTP(rec, r)
		hangUp(w)
		return
	}
	p.rp.ServeHTTP(w, r)
}

// hangUp closes the client's connection without a response.
func hangUp(w http.ResponseWriter) {
	rc := http.NewResponseController(w)
	conn, _, err := rc.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // closes the connection (HTTP/1) or resets the stream
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // RST, like a crashed server
	}
	_ = conn.Close()
}

// discardWriter is a ResponseWriter that keeps nothing.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header { return d.h }
func (d *discardWriter) Write(b []byte) (int, error) {
	return len(b), nil
}
func (d *discardWriter) WriteHeader(int) {}
