package icebergrest

// The catalog's storage policy and access rules (policy.go, access.go),
// over both catalogs lakegate serves (metacat and the SQL catalog),
// through the HTTP API: locations outside the warehouse refused and
// nothing written there, clients' storage properties dropped, register
// only inside the warehouse, the streams' identifiers reserved, read-only
// without AllowWrites, and an Authorizer's decisions applied to every
// route. Run: go test -count=1 -run 'TestPolicy|TestAccess' ./icebergrest/

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"

	"github.com/lakegate/lakegate/lakehouse/iceberg"
)

// backend is a catalog to serve and its warehouse.
type backend struct {
	name      string
	cat       catalog.Catalog
	warehouse string
}

// backends are lakegate's two served catalogs on fresh storage: metacat
// (the cluster's) and the SQL catalog (a standalone's), as node.Start
// opens them, on a file:// store.
func backends(t *testing.T) []backend {
	t.Helper()
	mc := newMetacat(t)
	store := "file://" + filepath.ToSlash(t.TempDir())
	sq, err := iceberg.Open(ctxT(t), iceberg.CatalogConfig{Kind: iceberg.KindSQL, URI: filepath.Join(t.TempDir(), "catalog.db"), StoreURL: store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.Close() })
	return []backend{{"metacat", mc.Catalog, mc.warehouse}, {"sql", sq.Catalog(), sq.Warehouse()}}
}

// call makes one request to the API at base; body is JSON (nil: none).
func call(t *testing.T, base, token, method, path string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	req, _ := http.NewRequest(method, base+path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// wantError checks the Iceberg ErrorModel of an answer.
func wantError(t *testing.T, what string, code int, body []byte, wantCode int, wantType, why string) {
	t.Helper()
	var e errorModel
	if code != wantCode || json.Unmarshal(body, &e) != nil || e.Error.Code != wantCode || e.Error.Type != wantType || !strings.Contains(e.Error.Message, why) {
		t.Fatalf("%s: HTTP %d %s; want %d %s naming %q", what, code, body, wantCode, wantType, why)
	}
}

var schemaJSON = map[string]any{"type": "struct", "schema-id": 0, "fields": []any{
	map[string]any{"id": 1, "name": "x", "type": "long", "required": true},
}}

func createBody(name string, extra map[string]any) map[string]any {
	b := map[string]any{"name": name, "schema": schemaJSON}
	for k, v := range extra {
		b[k] = v
	}
	return b
}

func nsSeg(levels ...string) string { return url.PathEscape(strings.Join(levels, "\x1f")) }

func noFiles(t *testing.T, dir string) {
	t.Helper()
	var files []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	if len(files) > 0 {
		t.Fatalf("files written outside the warehouse: %v", files)
	}
}

func TestPolicyLocations(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			base := serve(t, Options{Catalog: b.cat, Warehouse: b.warehouse, AllowWrites: true})
			elsewhere := filepath.Join(t.TempDir(), "elsewhere")
			out := "file://" + filepath.ToSlash(elsewhere)
			for _, ns := range []string{"analytics", "other"} {
				if code, body := call(t, base, "", http.MethodPost, "/v1/namespaces", map[string]any{"namespace": []string{ns}}); code != 200 {
					t.Fatalf("create namespace: %d %s", code, body)
				}
			}
			code, body := call(t, base, "", http.MethodPost, "/v1/namespaces/analytics/tables", createBody("ok", nil))
			var res struct {
				Metadata struct {
					Location string `json:"location"`
				} `json:"metadata"`
			}
			if code != 200 || json.Unmarshal(body, &res) != nil || res.Metadata.Location != b.warehouse+"/analytics/ok" {
				t.Fatalf("create without a location: %d %s; want it at %s/analytics/ok", code, body, b.warehouse)
			}
			for _, c := range []struct {
				what string
				ns   string
				body map[string]any
			}{
				{"a file:// location", "analytics", createBody("t1", map[string]any{"location": out})},
				{"another bucket", "analytics", createBody("t2", map[string]any{"location": "s3://other-bucket/t2"})},
				{"a stage-create elsewhere", "analytics", createBody("t3", map[string]any{"location": out, "stage-create": true})},
				{"the warehouse's parent", "analytics", createBody("t4", map[string]any{"location": strings.TrimSuffix(b.warehouse, "/warehouse") + "/tables/x"})},
				{"a '..' segment", "analytics", createBody("t5", map[string]any{"location": b.warehouse + "/analytics/../../x"})},
				{"an escaped segment", "analytics", createBody("t6", map[string]any{"location": b.warehouse + "/analytics/%2E%2E/x"})},
				{"another tenant's directory", "other", createBody("t7", map[string]any{"location": b.warehouse + "/analytics/t7"})},
				{"the tenant directory itself", "analytics", createBody("t8", map[string]any{"location": b.warehouse + "/analytics"})},
				{"write.data.path", "analytics", createBody("t9", map[string]any{"properties": map[string]string{"write.data.path": out}})},
				{"write.metadata.path", "analytics", createBody("t10", map[string]any{"properties": map[string]string{"write.metadata.path": out}})},
			} {
				code, body := call(t, base, "", http.MethodPost, "/v1/namespaces/"+c.ns+"/tables", c.body)
				wantError(t, c.what, code, body, http.StatusForbidden, "ForbiddenException", "outside the warehouse")
			}
			code, body = call(t, base, "", http.MethodPost, "/v1/namespaces", map[string]any{"namespace": []string{"n2"}, "properties": map[string]string{"location": out}})
			wantError(t, "namespace location", code, body, http.StatusForbidden, "ForbiddenException", "outside the warehouse")
			code, body = call(t, base, "", http.MethodPost, "/v1/namespaces/analytics/properties", map[string]any{"updates": map[string]string{"location": out}})
			wantError(t, "namespace location update", code, body, http.StatusForbidden, "ForbiddenException", "outside the warehouse")
			code, body = call(t, base, "", http.MethodPost, "/v1/namespaces/analytics/properties", map[string]any{"updates": map[string]string{"location": b.warehouse + "/analytics"}})
			if code != 200 {
				t.Fatalf("namespace location at its directory: %d %s", code, body)
			}
			for _, u := range []map[string]any{
				{"action": "set-location", "location": out},
				{"action": "set-properties", "updates": map[string]string{"write.data.path": out}},
				{"action": "set-properties", "updates": map[string]string{"write.object-storage.path": "s3://other/x"}},
			} {
				code, body := call(t, base, "", http.MethodPost, "/v1/namespaces/analytics/tables/ok", map[string]any{"updates": []any{u}})
				wantError(t, fmt.Sprintf("commit %v", u), code, body, http.StatusForbidden, "ForbiddenException", "outside the warehouse")
			}
			// Create through a commit (what stage-create leads to): its
			// location is checked the same way.
			code, body = call(t, base, "", http.MethodPost, "/v1/namespaces/analytics/tables/viacommit", map[string]any{
				"requirements": []any{map[string]any{"type": "assert-create"}},
				"updates": []any{
					map[string]any{"action": "assign-uuid", "uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1"},
					map[string]any{"action": "upgrade-format-version", "format-version": 2},
					map[string]any{"action": "add-schema", "schema": schemaJSON},
					map[string]any{"action": "set-current-schema", "schema-id": -1},
					map[string]any{"action": "set-location", "location": out},
				}})
			wantError(t, "create via commit elsewhere", code, body, http.StatusForbidden, "ForbiddenException", "outside the warehouse")
			noFiles(t, elsewhere)

			// Through iceberg-go's client: a location elsewhere is an error.
			cl := restClient(t, base)
			sc := ice.NewSchema(0, ice.NestedField{ID: 1, Name: "x", Type: ice.PrimitiveTypes.Int64, Required: true})
			if _, err := cl.CreateTable(ctxT(t), table.Identifier{"analytics", "t11"}, sc, catalog.WithLocation(out)); !errors.Is(err, rest.ErrForbidden) {
				t.Fatalf("iceberg-go creates elsewhere: %v, want 403", err)
			}
			noFiles(t, elsewhere)
		})
	}
}

func TestPolicyStoragePropertiesDropped(t *testing.T) {
	client := map[string]string{"s3.endpoint": "http://127.0.0.1:1", "s3.access-key-id": "k", "s3.secret-access-key": "s",
		"gcs.keypath": "/etc/passwd", "adls.sas-token.acct": "t", "io-impl": "x.EvilIO", "py-io-impl": "x.Evil", "client.region": "r", "kept": "yes"}
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			base := serve(t, Options{Catalog: b.cat, Warehouse: b.warehouse, AllowWrites: true})
			code, body := call(t, base, "", http.MethodPost, "/v1/namespaces", map[string]any{"namespace": []string{"a"}, "properties": client})
			if code != 200 {
				t.Fatalf("create namespace: %d %s", code, body)
			}
			props, err := b.cat.LoadNamespaceProperties(ctxT(t), table.Identifier{"a"})
			if err != nil || props["kept"] != "yes" || props["s3.endpoint"] != "" || props["io-impl"] != "" {
				t.Fatalf("namespace properties %v %v", props, err)
			}
			code, body = call(t, base, "", http.MethodPost, "/v1/namespaces/a/tables", createBody("t", map[string]any{"properties": client}))
			if code != 200 {
				t.Fatalf("create table: %d %s", code, body)
			}
			code, body = call(t, base, "", http.MethodPost, "/v1/namespaces/a/tables/t", map[string]any{"updates": []any{
				map[string]any{"action": "set-properties", "updates": map[string]string{"s3.endpoint": "http://127.0.0.1:2", "also": "kept"}}}})
			if code != 200 {
				t.Fatalf("commit: %d %s", code, body)
			}
			tbl, err := b.cat.LoadTable(ctxT(t), table.Identifier{"a", "t"})
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tbl.Properties() {
				if isStorageProp(k) {
					t.Fatalf("table property %s=%s kept", k, v)
				}
			}
			if tbl.Properties()["kept"] != "yes" || tbl.Properties()["also"] != "kept" {
				t.Fatalf("other properties lost: %v", tbl.Properties())
			}
		})
	}
}

// TestPolicyRegister: only metadata files inside the tenant's directory
// register, and only if their table stays there.
func TestPolicyRegister(t *testing.T) {
	mc := newMetacat(t)
	base := serve(t, mc.options())
	ctx := ctxT(t)
	for _, ns := range []string{"a", "b"} {
		if err := mc.CreateNamespace(ctx, table.Identifier{ns}, nil); err != nil {
			t.Fatal(err)
		}
	}
	sc := ice.NewSchema(0, ice.NestedField{ID: 1, Name: "x", Type: ice.PrimitiveTypes.Int64, Required: true})
	src, err := mc.CreateTable(ctx, table.Identifier{"a", "src"}, sc)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(src.Metadata())
	write := func(dir, loc string) string {
		var md map[string]any
		json.Unmarshal(b, &md)
		if loc != "" {
			md["location"] = loc
		}
		mb, _ := json.Marshal(md)
		p := filepath.Join(dir, "metadata", "00001-0b2c9ba9-72dd-4de8-a0bf-ba1ff34ad333.metadata.json")
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, mb, 0o644); err != nil {
			t.Fatal(err)
		}
		return "file://" + filepath.ToSlash(p)
	}
	whDir := strings.TrimPrefix(mc.warehouse, "file://")
	outside := write(t.TempDir(), "")
	inB := write(filepath.Join(whDir, "b", "x"), "")
	elsewhereTable := write(filepath.Join(whDir, "a", "y"), "file:///tmp/elsewhere")
	for _, c := range []struct{ what, ns, loc, why string }{
		{"a file outside the warehouse", "a", outside, "outside the warehouse"},
		{"another tenant's file", "a", inB, "outside the warehouse"},
		{"a table located elsewhere", "a", elsewhereTable, "outside the warehouse"},
		{"/etc/passwd", "a", "file:///etc/passwd", "metadata.json"},
	} {
		code, body := call(t, base, "", http.MethodPost, "/v1/namespaces/"+c.ns+"/register", map[string]any{"name": "r", "metadata-location": c.loc})
		wantCode, typ := http.StatusForbidden, "ForbiddenException"
		if c.why == "metadata.json" {
			wantCode, typ = http.StatusBadRequest, "BadRequestException"
		}
		wantError(t, c.what, code, body, wantCode, typ, c.why)
	}
	if code, body := call(t, base, "", http.MethodPost, "/v1/namespaces/a/register", map[string]any{"name": "copy", "metadata-location": src.MetadataLocation()}); code != 200 {
		t.Fatalf("register a file of the tenant's directory: %d %s", code, body)
	}
	// metacat itself refuses files outside its warehouse.
	if _, err := mc.RegisterTable(ctx, table.Identifier{"a", "direct"}, outside); err == nil {
		t.Fatal("metacat registered a file outside its warehouse")
	}
}

func TestPolicyReservedIdentifiers(t *testing.T) {
	mc := newMetacat(t)
	ctx := ctxT(t)
	o := mc.options()
	o.Reserved = func(id table.Identifier) bool { return len(id) == 3 }
	o.ReadOnly = func(p ice.Properties) bool { _, ok := p["lakegate.format"]; return ok }
	base := serve(t, o)
	for _, ns := range []table.Identifier{{"public"}, {"public", "default"}} {
		if err := mc.CreateNamespace(ctx, ns, nil); err != nil {
			t.Fatal(err)
		}
	}
	sc := ice.NewSchema(0, ice.NestedField{ID: 1, Name: "x", Type: ice.PrimitiveTypes.Int64, Required: true})
	user, err := mc.CreateTable(ctx, table.Identifier{"public", "user"}, sc)
	if err != nil {
		t.Fatal(err)
	}
	pd := nsSeg("public", "default")
	code, body := call(t, base, "", http.MethodPost, "/v1/namespaces/"+pd+"/tables", createBody("orders", nil))
	wantError(t, "create", code, body, http.StatusForbidden, "ForbiddenException", "reserved for a stream's table")
	code, body = call(t, base, "", http.MethodPost, "/v1/namespaces/"+pd+"/tables", createBody("orders", map[string]any{"stage-create": true}))
	wantError(t, "stage-create", code, body, http.StatusForbidden, "ForbiddenException", "reserved")
	code, body = call(t, base, "", http.MethodPost, "/v1/namespaces/"+pd+"/register", map[string]any{"name": "orders", "metadata-location": user.MetadataLocation()})
	wantError(t, "register", code, body, http.StatusForbidden, "ForbiddenException", "reserved")
	code, body = call(t, base, "", http.MethodPost, "/v1/tables/rename", map[string]any{
		"source": map[string]any{"namespace": []string{"public"}, "name": "user"}, "destination": map[string]any{"namespace": []string{"public", "default"}, "name": "orders"}})
	wantError(t, "rename onto", code, body, http.StatusForbidden, "ForbiddenException", "reserved")
	code, body = call(t, base, "", http.MethodPost, "/v1/namespaces/"+pd+"/tables/orders", map[string]any{
		"requirements": []any{map[string]any{"type": "assert-create"}},
		"updates":      []any{map[string]any{"action": "set-location", "location": mc.warehouse + "/public/default/orders"}}})
	wantError(t, "create via commit", code, body, http.StatusForbidden, "ForbiddenException", "reserved")
	if ok, _ := mc.CheckTableExists(ctx, table.Identifier{"public", "default", "orders"}); ok {
		t.Fatal("a client took a stream's identifier")
	}
	// A squatter made before the rule (directly in the catalog) cannot be
	// committed to, but can be dropped: the stream gets its identifier back.
	if _, err := mc.CreateTable(ctx, table.Identifier{"public", "default", "squat"}, sc); err != nil {
		t.Fatal(err)
	}
	code, body = call(t, base, "", http.MethodPost, "/v1/namespaces/"+pd+"/tables/squat", map[string]any{
		"updates": []any{map[string]any{"action": "set-properties", "updates": map[string]string{"x": "y"}}}})
	wantError(t, "commit to a squatter", code, body, http.StatusForbidden, "ForbiddenException", "reserved")
	if code, body := call(t, base, "", http.MethodDelete, "/v1/namespaces/"+pd+"/tables/squat", nil); code != http.StatusNoContent {
		t.Fatalf("drop a squatter: %d %s", code, body)
	}
}

func TestPolicyReadOnlyByDefault(t *testing.T) {
	mc := newMetacat(t)
	ctx := ctxT(t)
	if err := mc.CreateNamespace(ctx, table.Identifier{"a"}, nil); err != nil {
		t.Fatal(err)
	}
	sc := ice.NewSchema(0, ice.NestedField{ID: 1, Name: "x", Type: ice.PrimitiveTypes.Int64, Required: true})
	if _, err := mc.CreateTable(ctx, table.Identifier{"a", "t"}, sc); err != nil {
		t.Fatal(err)
	}
	base := serve(t, Options{Catalog: mc.Catalog, Warehouse: mc.warehouse}) // no AllowWrites, no Authorizer
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{http.MethodPost, "/v1/namespaces", map[string]any{"namespace": []string{"b"}}},
		{http.MethodPost, "/v1/namespaces/a/properties", map[string]any{"updates": map[string]string{"k": "v"}}},
		{http.MethodDelete, "/v1/namespaces/a", nil},
		{http.MethodPost, "/v1/namespaces/a/tables", createBody("u", nil)},
		{http.MethodPost, "/v1/namespaces/a/register", map[string]any{"name": "u", "metadata-location": mc.warehouse + "/a/t/metadata/x.metadata.json"}},
		{http.MethodPost, "/v1/namespaces/a/tables/t", map[string]any{"updates": []any{}}},
		{http.MethodDelete, "/v1/namespaces/a/tables/t", nil},
		{http.MethodPost, "/v1/tables/rename", map[string]any{"source": map[string]any{"namespace": []string{"a"}, "name": "t"}, "destination": map[string]any{"namespace": []string{"a"}, "name": "u"}}},
	} {
		code, body := call(t, base, "", c.method, c.path, c.body)
		wantError(t, c.method+" "+c.path, code, body, http.StatusForbidden, "ForbiddenException", "tables.iceberg.allowWrites")
	}
	if code, body := call(t, base, "", http.MethodGet, "/v1/namespaces/a/tables/t", nil); code != 200 {
		t.Fatalf("load: %d %s", code, body)
	}
	if code, body := call(t, base, "", http.MethodGet, "/v1/namespaces/a/tables", nil); code != 200 {
		t.Fatalf("list: %d %s", code, body)
	}
}

// fakeAuthorizer grants per principal: reads of namespaces (joined by
// "."), reads of tables ("ns.name"), writes of first levels.
type fakeAuthorizer struct {
	reads, writes map[string][]string
	super         string
	fail          bool
}

func (f fakeAuthorizer) CanRead(_ context.Context, p string, ns []string, name string) error {
	if f.fail {
		return errors.New("etcd down")
	}
	key := strings.Join(ns, ".")
	if name != "" {
		key += "." + name
	}
	if p == f.super || slices.Contains(f.reads[p], key) || slices.Contains(f.reads[p], strings.Join(ns, ".")) || slices.Contains(f.writes[p], ns[0]) {
		return nil
	}
	return fmt.Errorf("%w: %s may not read %s", ErrForbidden, p, key)
}

func (f fakeAuthorizer) CanWrite(_ context.Context, p string, ns []string) error {
	if p == f.super || (len(ns) > 0 && slices.Contains(f.writes[p], ns[0])) {
		return nil
	}
	return fmt.Errorf("%w: %s may not write %v", ErrForbidden, p, ns)
}

func (f fakeAuthorizer) IsSuperUser(p string) bool { return p == f.super }

func TestAccessAuthorizer(t *testing.T) {
	mc := newMetacat(t)
	ctx := ctxT(t)
	sc := ice.NewSchema(0, ice.NestedField{ID: 1, Name: "x", Type: ice.PrimitiveTypes.Int64, Required: true})
	for _, id := range []table.Identifier{{"acme", "ns", "orders"}, {"acme", "ns", "other"}, {"globex", "ns", "secrets"}, {"globex", "ledger"}} {
		for i := 1; i < len(id); i++ {
			mc.CreateNamespace(ctx, id[:i], nil)
		}
		if _, err := mc.CreateTable(ctx, id, sc); err != nil {
			t.Fatal(err)
		}
	}
	authz := fakeAuthorizer{
		reads:  map[string][]string{"reader": {"acme.ns.orders"}, "nsreader": {"acme.ns"}},
		writes: map[string][]string{"acme-admin": {"acme"}},
		super:  "root",
	}
	au := &Auth{Clients: map[string]string{"reader": "pw", "nsreader": "pw", "acme-admin": "pw", "root": "pw"}, Key: []byte("k")}
	o := mc.options()
	o.AllowWrites = false // the Authorizer decides
	o.Auth, o.Authorizer = au, authz
	o.ClientConfig = map[string]string{"s3.endpoint": "http://store"}
	o.StoreCredentials = map[string]string{"s3.secret-access-key": "node-secret"}
	base := serve(t, o)
	tok := func(p string) string { s, _ := au.Issue(p); return s }

	type listed struct {
		Namespaces  [][]string   `json:"namespaces"`
		Identifiers []tableIdent `json:"identifiers"`
	}
	list := func(p, path string) (int, listed) {
		code, body := call(t, base, tok(p), http.MethodGet, path, nil)
		var l listed
		json.Unmarshal(body, &l)
		return code, l
	}
	// A namespace grant shows the namespace and its tenant; a table grant
	// alone shows the table only (listing its namespace, or loading it).
	if code, l := list("nsreader", "/v1/namespaces"); code != 200 || len(l.Namespaces) != 1 || l.Namespaces[0][0] != "acme" {
		t.Fatalf("nsreader lists namespaces: %d %v", code, l.Namespaces)
	}
	if code, l := list("nsreader", "/v1/namespaces?parent=acme"); code != 200 || len(l.Namespaces) != 1 || strings.Join(l.Namespaces[0], ".") != "acme.ns" {
		t.Fatalf("nsreader lists acme's namespaces: %d %v", code, l.Namespaces)
	}
	if code, l := list("reader", "/v1/namespaces"); code != 200 || len(l.Namespaces) != 0 {
		t.Fatalf("reader lists namespaces: %d %v", code, l.Namespaces)
	}
	code, body := call(t, base, tok("nsreader"), http.MethodGet, "/v1/namespaces?parent=globex", nil)
	wantError(t, "nsreader lists globex's namespaces", code, body, http.StatusForbidden, "ForbiddenException", "may not read")
	if code, l := list("reader", "/v1/namespaces/"+nsSeg("acme", "ns")+"/tables"); code != 200 || len(l.Identifiers) != 1 || l.Identifiers[0].Name != "orders" {
		t.Fatalf("reader lists acme.ns: %d %v", code, l.Identifiers)
	}
	if code, l := list("nsreader", "/v1/namespaces/"+nsSeg("acme", "ns")+"/tables"); code != 200 || len(l.Identifiers) != 2 {
		t.Fatalf("nsreader lists acme.ns: %d %v", code, l.Identifiers)
	}
	code, body = call(t, base, tok("reader"), http.MethodGet, "/v1/namespaces/"+nsSeg("globex", "ns")+"/tables", nil)
	wantError(t, "reader lists globex.ns", code, body, http.StatusForbidden, "ForbiddenException", "may not read")
	code, body = call(t, base, tok("reader"), http.MethodGet, "/v1/namespaces/"+nsSeg("globex", "nope")+"/tables", nil)
	wantError(t, "reader lists a namespace that does not exist", code, body, http.StatusForbidden, "ForbiddenException", "may not read")
	code, body = call(t, base, tok("reader"), http.MethodHead, "/v1/namespaces/"+nsSeg("globex", "ns")+"/tables/nope", nil)
	if code != http.StatusForbidden {
		t.Fatalf("reader probes globex: %d, want 403 before existence", code)
	}
	for _, path := range []string{"/tables/secrets", "/tables/secrets/credentials"} {
		code, body = call(t, base, tok("reader"), http.MethodGet, "/v1/namespaces/"+nsSeg("globex", "ns")+path, nil)
		wantError(t, "reader GET globex.ns"+path, code, body, http.StatusForbidden, "ForbiddenException", "may not read")
	}
	code, body = call(t, base, tok("reader"), http.MethodGet, "/v1/namespaces/"+nsSeg("acme", "ns")+"/tables/orders", nil)
	var res struct {
		Config map[string]string `json:"config"`
	}
	if code != 200 || json.Unmarshal(body, &res) != nil || res.Config["s3.endpoint"] != "http://store" || res.Config["s3.secret-access-key"] != "" {
		t.Fatalf("reader loads acme.ns.orders: %d %s (config: endpoint, no store secret)", code, body)
	}
	code, body = call(t, base, tok("root"), http.MethodGet, "/v1/namespaces/"+nsSeg("acme", "ns")+"/tables/orders", nil)
	if code != 200 || json.Unmarshal(body, &res) != nil || res.Config["s3.secret-access-key"] != "node-secret" {
		t.Fatalf("the superuser loads acme.ns.orders: %d %s (with the store credentials)", code, body)
	}
	code, body = call(t, base, tok("reader"), http.MethodPost, "/v1/namespaces/acme/tables", createBody("mine", nil))
	wantError(t, "reader creates in acme", code, body, http.StatusForbidden, "ForbiddenException", "may not write")
	code, body = call(t, base, tok("acme-admin"), http.MethodPost, "/v1/namespaces/acme/tables", createBody("mine", nil))
	if code != 200 {
		t.Fatalf("acme-admin creates in acme: %d %s", code, body)
	}
	code, body = call(t, base, tok("acme-admin"), http.MethodPost, "/v1/namespaces/globex/tables/ledger", map[string]any{"updates": []any{}})
	wantError(t, "acme-admin commits to globex.ledger", code, body, http.StatusForbidden, "ForbiddenException", "may not write")
	code, body = call(t, base, tok("acme-admin"), http.MethodPost, "/v1/tables/rename", map[string]any{
		"source": map[string]any{"namespace": []string{"globex"}, "name": "ledger"}, "destination": map[string]any{"namespace": []string{"acme"}, "name": "stolen"}})
	wantError(t, "acme-admin renames globex.ledger", code, body, http.StatusForbidden, "ForbiddenException", "may not write")
	code, body = call(t, base, tok("root"), http.MethodPost, "/v1/tables/rename", map[string]any{
		"source": map[string]any{"namespace": []string{"globex"}, "name": "ledger"}, "destination": map[string]any{"namespace": []string{"acme"}, "name": "stolen"}})
	wantError(t, "a rename across tenants", code, body, http.StatusForbidden, "ForbiddenException", "stays in its first namespace level")

	// An Authorizer that cannot decide is 503, not a refusal nor a pass.
	o.Authorizer = fakeAuthorizer{fail: true}
	base = serve(t, o)
	code, body = call(t, base, tok("reader"), http.MethodGet, "/v1/namespaces/"+nsSeg("acme", "ns")+"/tables/orders", nil)
	wantError(t, "authorizer down", code, body, http.StatusServiceUnavailable, "ServiceUnavailableException", "etcd down")
}
