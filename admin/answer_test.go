package admin

// Unit tests of how the admin REST writes answers (answer.go) and of
// its route table (routes.go). Run: go test -run 'TestAdminAnswer|TestAdminRoutes' ./gateway/

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestAdminAnswerWrites(t *testing.T) {
	entry := http.Header{}
	entry.Set("Content-Type", "application/octet-stream")
	entry.Set("X-Pulsar-Message-ID", "1:2:-1")
	for _, tc := range []struct {
		name        string
		h           http.Handler
		status      int
		contentType string
		body        string
		header      string // a header that must be set: "Key: value"
	}{
		{"nil is 204 without a body", handler(func(*http.Request) (any, error) { return nil, nil }), 204, "", "", ""},
		{"a value is JSON without a newline", handler(func(*http.Request) (any, error) { return []string{"a"}, nil }), 200, "application/json", `["a"]`, ""},
		{"a nil slice is null", handler(func(*http.Request) (any, error) { return []string(nil), nil }), 200, "application/json", `null`, ""},
		{"jsonNull is null", handler(func(*http.Request) (any, error) { return jsonNull, nil }), 200, "application/json", `null`, ""},
		{"rawJSON is written as stored", handler(func(*http.Request) (any, error) { return rawJSON(`{ "a" : 1 }`), nil }), 200, "application/json", `{ "a" : 1 }`, ""},
		{"octets keep their headers", handler(func(*http.Request) (any, error) { return octets{header: entry, body: []byte("pay")}, nil }), 200, "application/octet-stream", "pay", "X-Pulsar-Message-Id: 1:2:-1"},
		{"a reply keeps its status", handler(func(*http.Request) (any, error) {
			return reply{http.StatusConflict, adminError{Reason: "partition 1: busy"}}, nil
		}), 409, "application/json", `{"reason":"partition 1: busy"}`, ""},
		{"an error goes through the mapping", handler(func(*http.Request) (any, error) {
			return []string{"ignored"}, fmt.Errorf("%w: topic t not found", errAdminNotFound)
		}), 404, "application/json", `{"reason":"topic t not found"}`, ""},
		{"a writer's error goes through the mapping", writer(func(http.ResponseWriter, *http.Request) error {
			return fmt.Errorf("%w: x", errAdminConflict)
		}), 409, "application/json", `{"reason":"x"}`, ""},
		{"an unknown error is 500", writer(func(http.ResponseWriter, *http.Request) error { return errors.New("boom") }), 500, "application/json", `{"reason":"boom"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			tc.h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
			if rec.Code != tc.status || rec.Header().Get("Content-Type") != tc.contentType || rec.Body.String() != tc.body {
				t.Errorf("got %d %q %q, want %d %q %q", rec.Code, rec.Header().Get("Content-Type"), rec.Body.String(), tc.status, tc.contentType, tc.body)
			}
			if k, v, ok := strings.Cut(tc.header, ": "); ok && rec.Header().Get(k) != v {
				t.Errorf("header %s = %q, want %q", k, rec.Header().Get(k), v)
			}
		})
	}
}

// TestAdminRoutes checks the route table's rows: each names a pattern, a
// rule and what answers it, and no pattern is listed twice (http.ServeMux
// would panic on a conflict; Handler is built here to prove it does not).
func TestAdminRoutes(t *testing.T) {
	a := &admin{}
	seen := map[string]bool{}
	for _, rt := range a.routes() {
		if rt.pattern == "" || rt.rule == nil || rt.serve == nil {
			t.Errorf("route %q: missing pattern, rule or handler", rt.pattern)
		}
		if seen[rt.pattern] {
			t.Errorf("route %q listed twice", rt.pattern)
		}
		seen[rt.pattern] = true
	}
	if len(seen) < 100 {
		t.Errorf("%d routes, want the whole admin REST", len(seen))
	}
	mux := http.NewServeMux()
	for _, rt := range a.routes() {
		mux.Handle(rt.pattern, rt.serve)
	}
}
