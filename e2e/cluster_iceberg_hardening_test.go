package e2e

// The Iceberg REST catalog is a read/commit path for lakegate's own
// tables, not a file-writing service (docs/iceberg-catalog.md, "Locations
// and storage properties", "Who may do what"), against real `lakegate`
// processes with iceberg-go's REST client and raw HTTP:
//
//   - TestIcebergCatalogHardening (two serve nodes on SeaweedFS, one with
//     tables.iceberg.allowWrites, one without): locations outside the
//     warehouse refused (create, stage-create, set-location, write.*.path,
//     namespace location, register), nothing written there; a client's
//     storage properties never used (a recording endpoint sees no
//     request); a stream's identifier cannot be taken, and the stream's
//     table still materializes; the node without allowWrites is
//     read-only.
//   - TestIcebergCatalogGrants (a standalone with token authentication,
//     authorization and OAuth clients): a role with grants on one tenant
//     lists, loads and commits that tenant's tables only; an OAuth client
//     is a role.
//
// Run: go test -count=1 -run 'TestIcebergCatalog(Hardening|Grants)' ./e2e/

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/google/uuid"

	"github.com/lakegate/lakegate/auth"
	"github.com/lakegate/lakegate/internal/testservers"
)

// iceCall is one raw request to a node's Iceberg REST API: base is the
// catalog URI (…/iceberg), path begins with /v1/, body is JSON (nil: none).
// It returns the status and the body.
func iceCall(t *testing.T, base, token, method, path string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = strings.NewReader(string(b))
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// wantIceError checks an Iceberg REST error answer: the status, the
// ErrorModel shape with that code and type, and a message naming why.
func wantIceError(t *testing.T, what string, code int, body []byte, wantCode int, wantType, why string) {
	t.Helper()
	var e struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    int    `json:"code"`
		} `json:"error"`
	}
	if code != wantCode || json.Unmarshal(body, &e) != nil || e.Error.Code != wantCode || e.Error.Type != wantType || !strings.Contains(e.Error.Message, why) {
		t.Fatalf("%s: HTTP %d %s; want %d %s naming %q", what, code, body, wantCode, wantType, why)
	}
}

// nsPath is the {namespace} path segment of ns.
func nsPath(ns ...string) string { return url.PathEscape(strings.Join(ns, "\x1f")) }

// emptyDir fails unless dir holds no file (missing is empty).
func emptyDir(t *testing.T, what, dir string) {
	t.Helper()
	var files []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	if len(files) > 0 {
		t.Fatalf("%s: files written outside the warehouse: %v", what, files)
	}
}

var hardeningSchema = map[string]any{"type": "struct", "schema-id": 0, "fields": []any{
	map[string]any{"id": 1, "name": "x", "type": "long", "required": true},
}}

func TestIcebergCatalogHardening(t *testing.T) {
	s3 := testservers.StartSeaweed(t)
	// A client-named endpoint: counts every request it gets, answers 200.
	var hits atomic.Int64
	rec := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.Copy(io.Discard, r.Body)
	}))
	defer rec.Close()

	c := startLGCluster(t, 0, s3.URL+"&prefix=lg/",
		"--tables-age", "200ms", "--tables-interval", "300ms", "--tables-scan-interval", "500ms")
	base := c.flags
	c.flags = append(slices.Clone(base), "--tables-iceberg-allow-writes")
	writable := c.addNode()
	c.flags = base
	readOnly := c.addNode()
	ctx := ctxFor(t, 5*time.Minute)
	w, ro := writable.httpURL+"/iceberg", readOnly.httpURL+"/iceberg"
	warehouse := "s3://" + s3.Bucket + "/lg/warehouse"
	elsewhere := filepath.Join(t.TempDir(), "elsewhere")
	elsewhereURI := "file://" + filepath.ToSlash(elsewhere)

	for _, ns := range []string{"analytics", "other"} {
		if code, b := iceCall(t, w, "", http.MethodPost, "/v1/namespaces", map[string]any{"namespace": []string{ns}}); code != 200 {
			t.Fatalf("create namespace %s: %d %s", ns, code, b)
		}
	}
	create := func(ns []string, body map[string]any) (int, []byte) {
		t.Helper()
		body["schema"] = hardeningSchema
		return iceCall(t, w, "", http.MethodPost, "/v1/namespaces/"+nsPath(ns...)+"/tables", body)
	}
	var ok struct {
		MetadataLocation string `json:"metadata-location"`
		Metadata         struct {
			Location   string            `json:"location"`
			Properties map[string]string `json:"properties"`
		} `json:"metadata"`
	}
	code, b := create([]string{"analytics"}, map[string]any{"name": "ok"})
	if code != 200 || json.Unmarshal(b, &ok) != nil || ok.Metadata.Location != warehouse+"/analytics/ok" {
		t.Fatalf("create analytics.ok without a location: %d %s; want it at %s/analytics/ok", code, b, warehouse)
	}

	t.Run("LocationsOutsideTheWarehouse", func(t *testing.T) {
		for _, c := range []struct {
			what string
			ns   []string
			body map[string]any
		}{
			{"a file:// location", []string{"analytics"}, map[string]any{"name": "t1", "location": elsewhereURI}},
			{"another bucket", []string{"analytics"}, map[string]any{"name": "t2", "location": "s3://other-bucket/t2"}},
			{"a stage-create elsewhere", []string{"analytics"}, map[string]any{"name": "t3", "location": elsewhereURI, "stage-create": true}},
			{"the store outside the warehouse", []string{"analytics"}, map[string]any{"name": "t4", "location": "s3://" + s3.Bucket + "/lg/tables/public/default/x"}},
			{"a '..' escape", []string{"analytics"}, map[string]any{"name": "t5", "location": warehouse + "/analytics/../../tables/x"}},
			{"another tenant's directory", []string{"other"}, map[string]any{"name": "t6", "location": warehouse + "/analytics/steal"}},
			{"write.data.path elsewhere", []string{"analytics"}, map[string]any{"name": "t7", "properties": map[string]string{"write.data.path": elsewhereURI}}},
			{"write.metadata.path elsewhere", []string{"analytics"}, map[string]any{"name": "t8", "properties": map[string]string{"write.metadata.path": elsewhereURI}}},
		} {
			code, b := create(c.ns, c.body)
			wantIceError(t, c.what, code, b, http.StatusForbidden, "ForbiddenException", "outside the warehouse")
		}
		code, b := iceCall(t, w, "", http.MethodPost, "/v1/namespaces", map[string]any{"namespace": []string{"ns_elsewhere"}, "properties": map[string]string{"location": elsewhereURI}})
		wantIceError(t, "a namespace located elsewhere", code, b, http.StatusForbidden, "ForbiddenException", "outside the warehouse")
		code, b = iceCall(t, w, "", http.MethodPost, "/v1/namespaces/analytics/properties", map[string]any{"updates": map[string]string{"location": elsewhereURI}})
		wantIceError(t, "moving a namespace elsewhere", code, b, http.StatusForbidden, "ForbiddenException", "outside the warehouse")
		code, b = iceCall(t, w, "", http.MethodPost, "/v1/namespaces/analytics/tables/ok", map[string]any{
			"updates": []any{map[string]any{"action": "set-location", "location": elsewhereURI}}})
		wantIceError(t, "set-location elsewhere", code, b, http.StatusForbidden, "ForbiddenException", "outside the warehouse")
		code, b = iceCall(t, w, "", http.MethodPost, "/v1/namespaces/analytics/tables/ok", map[string]any{
			"updates": []any{map[string]any{"action": "set-properties", "updates": map[string]string{"write.data.path": elsewhereURI}}}})
		wantIceError(t, "write.data.path elsewhere by a commit", code, b, http.StatusForbidden, "ForbiddenException", "outside the warehouse")
		emptyDir(t, "creates and commits", elsewhere)
	})

	t.Run("StoragePropertiesIgnored", func(t *testing.T) {
		client := map[string]string{
			"s3.endpoint": rec.URL, "s3.access-key-id": "client-key", "s3.secret-access-key": "client-secret",
			"s3.region": "us-east-1", "s3.force-virtual-addressing": "false", "io-impl": "org.example.EvilIO", "kept": "yes",
		}
		code, b := create([]string{"analytics"}, map[string]any{"name": "io", "properties": client})
		var res struct {
			Metadata struct {
				Properties map[string]string `json:"properties"`
			} `json:"metadata"`
		}
		if code != 200 || json.Unmarshal(b, &res) != nil {
			t.Fatalf("create with storage properties: %d %s", code, b)
		}
		for k := range client {
			if _, has := res.Metadata.Properties[k]; has != (k == "kept") {
				t.Fatalf("table properties %v: %s kept=%v", res.Metadata.Properties, k, has)
			}
		}
		code, b = iceCall(t, w, "", http.MethodPost, "/v1/namespaces/analytics/tables/io", map[string]any{
			"updates": []any{map[string]any{"action": "set-properties", "updates": map[string]string{"s3.endpoint": rec.URL, "also": "kept"}}}})
		if code != 200 || strings.Contains(string(b), rec.URL) || !strings.Contains(string(b), `"also":"kept"`) {
			t.Fatalf("commit with storage properties: %d %s", code, b)
		}
		if code, b := iceCall(t, w, "", http.MethodGet, "/v1/namespaces/analytics/tables/io", nil); code != 200 {
			t.Fatalf("load analytics.io: %d %s", code, b)
		}
		if n := hits.Load(); n != 0 {
			t.Fatalf("the client-named endpoint got %d requests, want 0", n)
		}
	})

	t.Run("RegisterOnlyInsideTheWarehouse", func(t *testing.T) {
		// A valid metadata file outside the warehouse (a copy of ok's).
		code, b := iceCall(t, w, "", http.MethodGet, "/v1/namespaces/analytics/tables/ok", nil)
		var lt struct {
			MetadataLocation string          `json:"metadata-location"`
			Metadata         json.RawMessage `json:"metadata"`
		}
		if code != 200 || json.Unmarshal(b, &lt) != nil {
			t.Fatalf("load analytics.ok: %d %s", code, b)
		}
		outside := filepath.Join(t.TempDir(), "metadata", "00000-"+uuid.NewString()+".metadata.json")
		os.MkdirAll(filepath.Dir(outside), 0o755)
		if err := os.WriteFile(outside, lt.Metadata, 0o644); err != nil {
			t.Fatal(err)
		}
		code, b = iceCall(t, w, "", http.MethodPost, "/v1/namespaces/analytics/register", map[string]any{"name": "reg1", "metadata-location": "file://" + filepath.ToSlash(outside)})
		wantIceError(t, "register a file outside the warehouse", code, b, http.StatusForbidden, "ForbiddenException", "outside the warehouse")
		// A metadata file inside the warehouse whose table is elsewhere.
		var md map[string]any
		json.Unmarshal(lt.Metadata, &md)
		md["location"] = elsewhereURI
		mb, _ := json.Marshal(md)
		key := "lg/warehouse/analytics/reg2/metadata/00000-" + uuid.NewString() + ".metadata.json"
		req, _ := http.NewRequest(http.MethodPut, s3.Endpoint+"/"+s3.Bucket+"/"+key, strings.NewReader(string(mb)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode/100 != 2 {
			t.Fatalf("PUT %s: %v %v", key, resp, err)
		}
		resp.Body.Close()
		code, b = iceCall(t, w, "", http.MethodPost, "/v1/namespaces/analytics/register", map[string]any{"name": "reg2", "metadata-location": "s3://" + s3.Bucket + "/" + key})
		wantIceError(t, "register a table located elsewhere", code, b, http.StatusForbidden, "ForbiddenException", "outside the warehouse")
		// ok's own metadata file registers.
		code, b = iceCall(t, w, "", http.MethodPost, "/v1/namespaces/analytics/register", map[string]any{"name": "ok_again", "metadata-location": lt.MetadataLocation})
		if code != 200 {
			t.Fatalf("register a metadata file of the warehouse: %d %s", code, b)
		}
	})

	t.Run("StreamIdentifiersReserved", func(t *testing.T) {
		for _, ns := range [][]string{{"public"}, {"public", "default"}} {
			if code, b := iceCall(t, w, "", http.MethodPost, "/v1/namespaces", map[string]any{"namespace": ns}); code != 200 && code != 409 {
				t.Fatalf("create namespace %v: %d %s", ns, code, b)
			}
		}
		code, b := create([]string{"public", "default"}, map[string]any{"name": "squat"})
		wantIceError(t, "create a stream's table", code, b, http.StatusForbidden, "ForbiddenException", "reserved for a stream's table")
		code, b = iceCall(t, w, "", http.MethodPost, "/v1/namespaces/"+nsPath("public", "default")+"/register", map[string]any{"name": "squat", "metadata-location": ok.MetadataLocation})
		wantIceError(t, "register onto a stream's table", code, b, http.StatusForbidden, "ForbiddenException", "reserved for a stream's table")
		code, b = iceCall(t, w, "", http.MethodPost, "/v1/tables/rename", map[string]any{
			"source": map[string]any{"namespace": []string{"analytics"}, "name": "ok"}, "destination": map[string]any{"namespace": []string{"public", "default"}, "name": "squat"}})
		if code != http.StatusForbidden {
			t.Fatalf("rename onto a stream's table: %d %s", code, b)
		}

		// The stream's table materializes.
		const n = 20
		cl := c.client(writable.pulsarURL)
		p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://public/default/squat"})
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "m%d", i)}); err != nil {
				t.Fatal(err)
			}
		}
		p.Close()
		waitForTable(t, ctxFor(t, 2*time.Minute), writable.httpURL, "public/default/squat", n, "DELTA", "ICEBERG")

		// And stays lakegate's.
		code, b = iceCall(t, w, "", http.MethodPost, "/v1/namespaces/"+nsPath("public", "default")+"/tables/squat", map[string]any{
			"updates": []any{map[string]any{"action": "set-properties", "updates": map[string]string{"x": "y"}}}})
		wantIceError(t, "commit to a stream's table", code, b, http.StatusForbidden, "ForbiddenException", "")
		code, b = iceCall(t, w, "", http.MethodDelete, "/v1/namespaces/"+nsPath("public", "default")+"/tables/squat", nil)
		wantIceError(t, "drop a stream's table", code, b, http.StatusForbidden, "ForbiddenException", "stream's table")
	})

	t.Run("ReadOnlyWithoutAuthorization", func(t *testing.T) {
		code, b := iceCall(t, ro, "", http.MethodPost, "/v1/namespaces", map[string]any{"namespace": []string{"ro"}})
		wantIceError(t, "create a namespace", code, b, http.StatusForbidden, "ForbiddenException", "read-only")
		code, b = iceCall(t, ro, "", http.MethodPost, "/v1/namespaces/analytics/tables", map[string]any{"name": "ro", "schema": hardeningSchema})
		wantIceError(t, "create a table", code, b, http.StatusForbidden, "ForbiddenException", "read-only")
		code, b = iceCall(t, ro, "", http.MethodPost, "/v1/namespaces/analytics/tables/ok", map[string]any{
			"updates": []any{map[string]any{"action": "set-properties", "updates": map[string]string{"x": "y"}}}})
		wantIceError(t, "commit", code, b, http.StatusForbidden, "ForbiddenException", "read-only")
		code, b = iceCall(t, ro, "", http.MethodDelete, "/v1/namespaces/analytics/tables/ok", nil)
		wantIceError(t, "drop a table", code, b, http.StatusForbidden, "ForbiddenException", "read-only")
		if code, b := iceCall(t, ro, "", http.MethodGet, "/v1/namespaces/analytics/tables/ok", nil); code != 200 {
			t.Fatalf("load through the read-only node: %d %s", code, b)
		}
		cat, err := rest.NewCatalog(ctx, "lakegate", ro)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cat.CreateTable(ctx, table.Identifier{"analytics", "ro2"}, ice.NewSchema(0, ice.NestedField{ID: 1, Name: "x", Type: ice.PrimitiveTypes.Int64, Required: true})); err == nil {
			t.Fatal("iceberg-go created a table through the read-only node")
		}
	})
}

// onlyTenant reports whether the namespaces listed include tenant and
// nothing of another tenant (the SQL catalog lists every level).
func onlyTenant(nss []string, tenant string) bool {
	for _, n := range nss {
		if n != tenant && !strings.HasPrefix(n, tenant+".") {
			return false
		}
	}
	return slices.Contains(nss, tenant)
}

func TestIcebergCatalogGrants(t *testing.T) {
	dir := t.TempDir()
	secret, _ := auth.NewSecretKey()
	keyFile := filepath.Join(dir, "secret.key")
	if err := os.WriteFile(keyFile, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	node := startLakegateArgs(t, lakegateBinary(t), []string{"standalone", "--data-dir", filepath.Join(dir, "data"),
		"--pulsar-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
		"--auth-enabled", "--auth-providers", "token", "--auth-token-secret-key", "file://" + keyFile, "--auth-super-user-roles", "admin",
		"--tables-iceberg-clients", "acme-app:app-secret", "--tables-iceberg-token-key", "k",
		"--tables-age", "200ms", "--tables-interval", "300ms", "--tables-scan-interval", "500ms"})
	ctx := ctxFor(t, 5*time.Minute)
	token := func(role string) string {
		tok, err := auth.NewToken(auth.TokenSpec{Subject: role, Expiry: time.Hour}, secret, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	adm, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: node.httpURL, Token: token("admin")})
	if err != nil {
		t.Fatal(err)
	}
	for _, tn := range []string{"acme", "globex"} {
		if err := adm.Tenants().Create(utils.TenantData{Name: tn, AdminRoles: []string{tn + "-admin"}, AllowedClusters: []string{"standalone"}}); err != nil {
			t.Fatal(err)
		}
		if err := adm.Namespaces().CreateNamespace(tn + "/ns"); err != nil {
			t.Fatal(err)
		}
	}
	ns, _ := utils.GetNamespaceName("acme/ns")
	for _, role := range []string{"acme-reader", "acme-app"} {
		if err := adm.Namespaces().GrantNamespacePermission(*ns, role, []utils.AuthAction{"consume"}); err != nil {
			t.Fatal(err)
		}
	}
	cl, err := pulsar.NewClient(pulsar.ClientOptions{URL: node.pulsarURL, Authentication: pulsar.NewAuthenticationToken(token("admin")), Logger: plog.DefaultNopLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, topic := range []string{"persistent://acme/ns/orders", "persistent://globex/ns/secrets"} {
		p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "%d", i)}); err != nil {
				t.Fatal(err)
			}
		}
		p.Close()
	}
	base := node.httpURL + "/iceberg"
	catalogAs := func(opt rest.Option) *rest.Catalog {
		t.Helper()
		c, err := rest.NewCatalog(ctx, "lakegate", base, opt)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	super := catalogAs(rest.WithOAuthToken(token("admin")))
	for _, id := range []table.Identifier{{"acme", "ns", "orders"}, {"globex", "ns", "secrets"}} {
		waitFor(t, ctx, "the table "+strings.Join(id, "."), func() bool {
			_, err := super.LoadTable(ctx, id)
			return err == nil
		})
	}
	userSchema := ice.NewSchema(0, ice.NestedField{ID: 1, Name: "x", Type: ice.PrimitiveTypes.Int64, Required: true})
	for _, tn := range []string{"acme", "globex"} {
		if _, err := catalogAs(rest.WithOAuthToken(token(tn+"-admin"))).CreateTable(ctx, table.Identifier{tn, "ledger"}, userSchema); err != nil {
			t.Fatalf("%s's admin creates %s.ledger: %v", tn, tn, err)
		}
	}
	forbidden := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, rest.ErrForbidden) {
			t.Fatalf("%s: %v, want 403 Forbidden", what, err)
		}
	}
	nsNames := func(c *rest.Catalog) []string {
		t.Helper()
		nss, err := c.ListNamespaces(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, n := range nss {
			out = append(out, strings.Join(n, "."))
		}
		slices.Sort(out)
		return out
	}

	for _, who := range []struct {
		name string
		opt  rest.Option
	}{{"a token role", rest.WithOAuthToken(token("acme-reader"))}, {"an OAuth client", rest.WithCredential("acme-app:app-secret")}} {
		t.Run("ConsumerOfAcme/"+who.name, func(t *testing.T) {
			c := catalogAs(who.opt)
			if got := nsNames(c); !onlyTenant(got, "acme") {
				t.Fatalf("lists namespaces %v, want acme's only", got)
			}
			var tables []string
			for id, err := range c.ListTables(ctx, table.Identifier{"acme", "ns"}) {
				if err != nil {
					t.Fatal(err)
				}
				tables = append(tables, strings.Join(id, "."))
			}
			if !slices.Equal(tables, []string{"acme.ns.orders"}) {
				t.Fatalf("lists acme.ns tables %v", tables)
			}
			if _, err := c.LoadTable(ctx, table.Identifier{"acme", "ns", "orders"}); err != nil {
				t.Fatalf("loads its tenant's topic table: %v", err)
			}
			var listErr error
			for _, err := range c.ListTables(ctx, table.Identifier{"globex", "ns"}) {
				listErr = err
				break
			}
			forbidden("list globex.ns", listErr)
			_, err := c.LoadTable(ctx, table.Identifier{"globex", "ns", "secrets"})
			forbidden("load globex.ns.secrets", err)
			_, err = c.LoadTable(ctx, table.Identifier{"globex", "ledger"})
			forbidden("load globex.ledger", err)
			_, err = c.LoadTable(ctx, table.Identifier{"acme", "ledger"})
			forbidden("load acme.ledger (a tenant admin's table)", err)
			_, err = c.CreateTable(ctx, table.Identifier{"acme", "mine"}, userSchema)
			forbidden("create in acme", err)
		})
	}

	t.Run("AdminOfAcme", func(t *testing.T) {
		tok := token("acme-admin")
		c := catalogAs(rest.WithOAuthToken(tok))
		if got := nsNames(c); !onlyTenant(got, "acme") {
			t.Fatalf("lists namespaces %v, want acme's only", got)
		}
		tbl, err := c.LoadTable(ctx, table.Identifier{"acme", "ledger"})
		if err != nil {
			t.Fatal(err)
		}
		txn := tbl.NewTransaction()
		if err := txn.SetProperties(ice.Properties{"owner": "acme"}); err != nil {
			t.Fatal(err)
		}
		if _, err := txn.Commit(ctx); err != nil {
			t.Fatalf("commits to its tenant's table: %v", err)
		}
		_, err = c.LoadTable(ctx, table.Identifier{"globex", "ledger"})
		forbidden("load globex.ledger", err)
		code, b := iceCall(t, base, tok, http.MethodPost, "/v1/namespaces/globex/tables/ledger", map[string]any{
			"updates": []any{map[string]any{"action": "set-properties", "updates": map[string]string{"owner": "acme"}}}})
		wantIceError(t, "commit to globex.ledger", code, b, http.StatusForbidden, "ForbiddenException", "acme-admin")
		_, err = c.CreateTable(ctx, table.Identifier{"globex", "mine"}, userSchema)
		forbidden("create in globex", err)
		if err := c.DropTable(ctx, table.Identifier{"globex", "ledger"}); !errors.Is(err, rest.ErrForbidden) {
			t.Fatalf("drop globex.ledger: %v", err)
		}
		_, err = c.RenameTable(ctx, table.Identifier{"globex", "ledger"}, table.Identifier{"acme", "stolen"})
		forbidden("rename globex.ledger into acme", err)
	})

	t.Run("SuperUser", func(t *testing.T) {
		if got := nsNames(super); !slices.Contains(got, "acme") || !slices.Contains(got, "globex") {
			t.Fatalf("lists namespaces %v", got)
		}
		if _, err := super.LoadTable(ctx, table.Identifier{"globex", "ledger"}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("AdminTableRoute", func(t *testing.T) {
		get := func(role, topic string) int {
			req, _ := http.NewRequest(http.MethodGet, node.httpURL+"/admin/v2/persistent/"+topic+"/table", nil)
			req.Header.Set("Authorization", "Bearer "+token(role))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		if code := get("acme-reader", "acme/ns/orders"); code != 200 {
			t.Fatalf("GET acme/ns/orders/table as acme-reader: %d", code)
		}
		if code := get("acme-reader", "globex/ns/secrets"); code != http.StatusForbidden {
			t.Fatalf("GET globex/ns/secrets/table as acme-reader: %d, want 403", code)
		}
	})
}
