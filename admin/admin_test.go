package admin

// Unit tests of the admin REST that need no storage engine: the error →
// status mapping, body parsing, and tenants/namespaces over an in-memory
// namespace catalog. Topic endpoints run against a real node in
// e2e/test.go. Run: go test -race -run Admin ./gateway/

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/internal/testmember"
	"github.com/lakegate/lakegate/lakestream"
)

func TestAdminStatus(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{fmt.Errorf("%w: x", errAdminNotFound), 404},
		{fmt.Errorf("%w: x", errAdminConflict), 409},
		{fmt.Errorf("%w: x", errAdminPrecondition), 412},
		{fmt.Errorf("%w: x", errAdminBadRequest), 400},
		{fmt.Errorf("%w: x", errAdminNotImplemented), 501},
		{fmt.Errorf("%w: x", errAdminMethodNotAllowed), 405},
		{fmt.Errorf("%w: x", errAdminUnprocessable), 422},
		{fmt.Errorf("%w: x", broker.ErrInvalidTopicName), 412},
		{broker.ErrServiceNotReady, 503},
		{actors.ErrConsumerBusy, 412},
		{fmt.Errorf("open: %w", lakestream.ErrNoSuchStream), 404},
		{lakestream.ErrNoSuchNamespace, 404},
		{lakestream.ErrNoSuchCursor, 404},
		{lakestream.ErrAlreadyExists, 409},
		{lakestream.ErrNamespaceNotEmpty, 409},
		{lakestream.ErrInvalidArgument, 412},
		{lakestream.ErrUnavailable, 503},
		{context.DeadlineExceeded, 504},
		{fmt.Errorf("something else"), 500},
	} {
		if got := adminStatus(tc.err); got != tc.want {
			t.Errorf("adminStatus(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
	if r := adminReason(fmt.Errorf("%w: topic x not found", errAdminNotFound)); r != "topic x not found" {
		t.Errorf("reason = %q", r)
	}
	if r := adminReason(fmt.Errorf("%w: a/b", lakestream.ErrAlreadyExists)); r != "already exists: a/b" {
		t.Errorf("reason = %q", r)
	}
}

func TestAdminParsePartitions(t *testing.T) {
	for body, want := range map[string]int{`4`: 4, ` 7 `: 7, `{"partitions":3}`: 3, `{"partitions":2,"properties":{"a":"b"}}`: 2} {
		r := httptest.NewRequest("PUT", "/", strings.NewReader(body))
		m, err := parsePartitions(r)
		if err != nil || m.Partitions != want {
			t.Errorf("parsePartitions(%q) = %+v, %v; want %d", body, m, err, want)
		}
	}
	for _, body := range []string{``, `x`, `{"partitions":"x"}`} {
		r := httptest.NewRequest("PUT", "/", strings.NewReader(body))
		if _, err := parsePartitions(r); adminStatus(err) != http.StatusBadRequest {
			t.Errorf("parsePartitions(%q) = %v, want a 400", body, err)
		}
	}
}

// nsCatalog keeps namespaces in memory; every other catalog method panics
// (nil embedded interface).
type nsCatalog struct {
	lakestream.StreamCatalog
	mu  sync.Mutex
	nss map[string]map[string]string
}

func (c *nsCatalog) CreateNamespace(_ context.Context, name string, props map[string]string) (lakestream.Namespace, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.nss[name]; ok {
		return lakestream.Namespace{}, lakestream.ErrAlreadyExists
	}
	c.nss[name] = maps.Clone(props)
	if c.nss[name] == nil {
		c.nss[name] = map[string]string{}
	}
	return lakestream.Namespace{Name: name, Properties: props}, nil
}

func (c *nsCatalog) ListNamespaces(context.Context) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.nss)), nil
}

func (c *nsCatalog) LoadNamespace(_ context.Context, name string) (lakestream.Namespace, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.nss[name]
	if !ok {
		return lakestream.Namespace{}, lakestream.ErrNoSuchNamespace
	}
	return lakestream.Namespace{Name: name, Properties: maps.Clone(p)}, nil
}

func (c *nsCatalog) NamespaceExists(_ context.Context, name string) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.nss[name]
	return ok, nil
}

func (c *nsCatalog) DropNamespace(_ context.Context, name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.nss[name]; !ok {
		return lakestream.ErrNoSuchNamespace
	}
	delete(c.nss, name)
	return nil
}

func (c *nsCatalog) SetNamespaceProperties(_ context.Context, name string, set map[string]string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.nss[name]
	if !ok {
		return lakestream.ErrNoSuchNamespace
	}
	maps.Copy(p, set)
	return nil
}

func (c *nsCatalog) RemoveNamespaceProperties(_ context.Context, name string, keys []string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		delete(c.nss[name], k)
	}
	return nil
}

func (c *nsCatalog) ListStreams(context.Context, string) ([]lakestream.StreamIdentifier, error) {
	return nil, nil
}

// adminCall runs one request and decodes a JSON answer into out.
func adminCall(t *testing.T, h http.Handler, method, path, body string, out any) int {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, path, strings.NewReader(body)))
	if out != nil {
		if err := json.Unmarshal(w.Body.Bytes(), out); err != nil {
			t.Fatalf("%s %s: %d %q: %v", method, path, w.Code, w.Body.String(), err)
		}
	}
	return w.Code
}

func TestAdminTenantsAreImplicitOrRecorded(t *testing.T) {
	cat := &nsCatalog{nss: map[string]map[string]string{"public/default": {}}}
	brk, err := broker.New(broker.Config{Catalog: cat, Membership: testmember.New(lakestream.Member{ID: "test"})})
	if err != nil {
		t.Fatal(err)
	}
	h := Handler(Config{Node: noTopics{}, Broker: brk, Catalog: cat})

	var list []string
	if adminCall(t, h, "GET", "/admin/v2/tenants", "", &list); !slices.Equal(list, []string{"public"}) {
		t.Fatalf("tenants = %v", list)
	}
	var e adminError
	if code := adminCall(t, h, "PUT", "/admin/v2/namespaces/acme/ns", "", &e); code != 404 || e.Reason == "" {
		t.Fatalf("namespace of unknown tenant: %d %q", code, e.Reason)
	}
	if code := adminCall(t, h, "PUT", "/admin/v2/tenants/acme", `{"adminRoles":["ops"],"allowedClusters":["standalone"]}`, nil); code != 204 {
		t.Fatalf("create tenant: %d", code)
	}
	if code := adminCall(t, h, "PUT", "/admin/v2/tenants/"+adminHiddenTenant, "", &e); code != 412 {
		t.Fatalf("reserved tenant: %d %q", code, e.Reason)
	}
	if code := adminCall(t, h, "PUT", "/admin/v2/tenants/other", `{"allowedClusters":["elsewhere"]}`, &e); code != 412 {
		t.Fatalf("unknown cluster: %d %q", code, e.Reason)
	}
	var info tenantInfo
	if adminCall(t, h, "GET", "/admin/v2/tenants/acme", "", &info); !slices.Equal(info.AdminRoles, []string{"ops"}) {
		t.Fatalf("tenant info = %+v", info)
	}
	if adminCall(t, h, "GET", "/admin/v2/tenants", "", &list); !slices.Equal(list, []string{"acme", "public"}) {
		t.Fatalf("tenants = %v (the record namespace is hidden)", list)
	}
	if code := adminCall(t, h, "PUT", "/admin/v2/namespaces/acme/ns", "", nil); code != 204 {
		t.Fatalf("create namespace: %d", code)
	}
	if code := adminCall(t, h, "PUT", "/admin/v2/namespaces/acme/ns", "", &e); code != 409 || e.Reason == "" {
		t.Fatalf("create namespace twice: %d %q", code, e.Reason)
	}
	if adminCall(t, h, "GET", "/admin/v2/namespaces/acme", "", &list); !slices.Equal(list, []string{"acme/ns"}) {
		t.Fatalf("namespaces = %v", list)
	}
	if code := adminCall(t, h, "GET", "/admin/v2/namespaces/"+adminHiddenTenant+"/tenants", "", &e); code != 404 {
		t.Fatalf("the record namespace is visible: %d", code)
	}
	if code := adminCall(t, h, "DELETE", "/admin/v2/tenants/acme", "", &e); code != 409 {
		t.Fatalf("delete a tenant with namespaces: %d %q", code, e.Reason)
	}
	adminCall(t, h, "DELETE", "/admin/v2/namespaces/acme/ns", "", nil)
	if code := adminCall(t, h, "DELETE", "/admin/v2/tenants/acme", "", nil); code != 204 {
		t.Fatalf("delete tenant: %d", code)
	}
	if code := adminCall(t, h, "GET", "/admin/v2/tenants/acme", "", &e); code != 404 {
		t.Fatalf("deleted tenant: %d", code)
	}
	if code := adminCall(t, h, "GET", "/admin/v2/bookies/racks-info", "", &e); code != 404 || e.Reason == "" {
		t.Fatalf("unknown endpoint: %d %q", code, e.Reason)
	}
}

// TestAdminBrokersFixedNames: Pulsar's fixed names under /admin/v2/brokers/
// are not taken for a cluster name: /brokers lists this cluster's brokers,
// ready answers ok, the ones lakegate
// does not serve say so (not "cluster … does not exist").
func TestAdminBrokersFixedNames(t *testing.T) {
	cat := &nsCatalog{nss: map[string]map[string]string{"public/default": {}}}
	brk, err := broker.New(broker.Config{Catalog: cat, Membership: testmember.New(lakestream.Member{ID: "test"})})
	if err != nil {
		t.Fatal(err)
	}
	h := Handler(Config{Node: noTopics{}, Broker: brk, Catalog: cat, Membership: testmember.New(lakestream.Member{ID: "test"})})
	var brokers []string
	if code := adminCall(t, h, "GET", "/admin/v2/brokers", "", &brokers); code != 200 {
		t.Fatalf("brokers (no cluster): %d", code)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/admin/v2/brokers/ready", nil))
	if w.Code != 200 || w.Body.String() != "ok" {
		t.Fatalf("brokers/ready: %d %q", w.Code, w.Body.String())
	}
	for _, name := range []string{"version", "backlog-quota-check", "internal-configuration"} {
		var e adminError
		code := adminCall(t, h, "GET", "/admin/v2/brokers/"+name, "", &e)
		if code != 404 || !strings.Contains(e.Reason, "is not an admin endpoint lakegate serves") {
			t.Errorf("brokers/%s: %d %q", name, code, e.Reason)
		}
	}
}

// noTopics is a node that serves no topic: the admin REST's tenants and
// namespaces are the catalog's and the broker's alone (authorization off).
type noTopics struct{ Node }

func (noTopics) Closing() bool { return false }
func (noTopics) AuthzOn() bool { return false }
