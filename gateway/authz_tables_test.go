package gateway

// TableAccess: the grants set through the admin REST decide what a role
// may read and write of the streams' tables (the Iceberg REST catalog
// asks it). Run: go test -count=1 -run TestTableAccess ./gateway/

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lakegate/lakegate/auth"
)

func TestTableAccess(t *testing.T) {
	srv, secret := startAuthGateway(t)
	h := adminHandler(srv)
	tok, _ := auth.NewToken(auth.TokenSpec{Subject: "admin", Expiry: time.Hour}, secret, nil, "")
	do := func(method, path, body string) {
		t.Helper()
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code/100 != 2 {
			t.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body)
		}
	}
	for _, tn := range []string{"acme", "globex"} {
		do(http.MethodPut, "/admin/v2/tenants/"+tn, `{"adminRoles":["`+tn+`-admin"],"allowedClusters":["standalone"]}`)
		do(http.MethodPut, "/admin/v2/namespaces/"+tn+"/ns", "")
	}
	do(http.MethodPost, "/admin/v2/namespaces/acme/ns/permissions/ns-reader", `["consume"]`)
	do(http.MethodPut, "/admin/v2/persistent/acme/ns/orders", "")
	do(http.MethodPut, "/admin/v2/persistent/acme/ns/other", "")
	do(http.MethodPost, "/admin/v2/persistent/acme/ns/orders/permissions/topic-writer", `["produce"]`)

	ctx := t.Context()
	ta := srv.TableAccess()
	if !ta.Enabled() || !ta.IsSuperUser("admin") || ta.IsSuperUser("acme-admin") {
		t.Fatal("TableAccess does not reflect the configuration")
	}
	type check struct {
		role   string
		ns     []string
		name   string
		write  bool
		allows bool
	}
	for _, c := range []check{
		{"admin", []string{"globex", "ns"}, "secrets", false, true},
		{"admin", nil, "", true, true},
		{"acme-admin", []string{"acme"}, "ledger", false, true},
		{"acme-admin", []string{"acme"}, "", true, true},
		{"acme-admin", []string{"acme", "ns", "deep"}, "", true, true},
		{"acme-admin", []string{"globex"}, "ledger", false, false},
		{"acme-admin", []string{"globex", "ns"}, "", true, false},
		{"acme-admin", nil, "", true, false},
		{"ns-reader", []string{"acme", "ns"}, "", false, true},
		{"ns-reader", []string{"acme", "ns"}, "orders", false, true},
		{"ns-reader", []string{"acme", "ns", "deep"}, "t", false, true},
		{"ns-reader", []string{"acme"}, "ledger", false, false},
		{"ns-reader", []string{"acme"}, "", false, false},
		{"ns-reader", []string{"acme", "ns"}, "", true, false},
		{"ns-reader", []string{"globex", "ns"}, "secrets", false, false},
		{"topic-writer", []string{"acme", "ns"}, "orders", false, true},
		{"topic-writer", []string{"acme", "ns"}, "other", false, false},
		{"topic-writer", []string{"acme", "ns"}, "", false, false},
		{"stranger", []string{"acme", "ns"}, "orders", false, false},
		{"stranger", []string{"a/b", "ns"}, "orders", false, false},
		{"", []string{"acme", "ns"}, "orders", false, false},
	} {
		var err error
		if c.write {
			err = ta.CanWrite(ctx, c.role, c.ns)
		} else {
			err = ta.CanRead(ctx, c.role, c.ns, c.name)
		}
		if c.allows != (err == nil) || (err != nil && !errors.Is(err, ErrAuthorization)) {
			t.Errorf("%+v: %v", c, err)
		}
	}
}
