package faultproxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestProxyFaults(t *testing.T) {
	var hits atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.WriteString(w, "ok "+r.Method)
	}))
	defer up.Close()
	p, err := Start(up.URL, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cl := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	do := func(method string) (int, string, error) {
		req, _ := http.NewRequest(method, p.URL+"/bucket/key", strings.NewReader("body"))
		resp, err := cl.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}

	if code, body, err := do("GET"); err != nil || code != 200 || body != "ok GET" {
		t.Fatalf("no faults: %d %q %v", code, body, err)
	}

	p.Set(Rule{Methods: []string{"PUT"}, ErrorRate: 1})
	if code, body, err := do("PUT"); err != nil || code != 503 || !strings.Contains(body, "<Code>SlowDown</Code>") {
		t.Fatalf("PUT error: %d %q %v", code, body, err)
	}
	if code, _, err := do("GET"); err != nil || code != 200 {
		t.Fatalf("GET untouched by a PUT rule: %d %v", code, err)
	}

	p.Set(Rule{ErrorRate: 1, Status: 500})
	if code, body, _ := do("GET"); code != 500 || !strings.Contains(body, "InternalError") {
		t.Fatalf("500: %d %q", code, body)
	}

	before := hits.Load()
	p.Set(Rule{DropRate: 1})
	if _, _, err := do("PUT"); err == nil {
		t.Fatal("drop: no error")
	}
	if hits.Load() != before {
		t.Fatal("drop: the request reached the upstream")
	}

	p.Set(Rule{DropAfterRate: 1})
	if _, _, err := do("PUT"); err == nil {
		t.Fatal("drop after: no error")
	}
	if hits.Load() != before+1 {
		t.Fatal("drop after: the request did not reach the upstream")
	}

	p.Set(Rule{Latency: 100 * time.Millisecond})
	start := time.Now()
	if code, _, err := do("GET"); err != nil || code != 200 {
		t.Fatalf("latency: %d %v", code, err)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Fatalf("latency: answered in %v", d)
	}

	p.Outage(true)
	if code, _, _ := do("HEAD"); code != 503 {
		t.Fatalf("outage: %d", code)
	}
	p.Outage(false)
	if code, _, err := do("GET"); err != nil || code != 200 {
		t.Fatalf("after outage: %d %v", code, err)
	}
	s := p.Stats()
	t.Logf("stats: %v", s)
	if s.Errors["PUT"] != 1 || s.Dropped["PUT"] != 1 || s.DroppedAfter["PUT"] != 1 || s.Errors["HEAD"] != 1 {
		t.Fatalf("stats: %+v", s)
	}
}

func TestStartBadUpstream(t *testing.T) {
	if _, err := Start("not a url", 1); err == nil {
		t.Fatal("no error")
	}
}
