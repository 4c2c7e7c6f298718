package metacat

// The catalog's storage access is its own (Options.Props): a table's
// properties never point it at another endpoint or credentials; register
// reads nothing outside the warehouse; a commit deletes only metadata
// files of the table's own metadata directory. S3 here is a minimal
// in-process server (PUT, GET, HEAD, DELETE of path-style keys) standing
// for the store, and a second one for the endpoint a client names.
// Run: go test -count=1 ./lakehouse/iceberg/metacat/

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	iceio "github.com/apache/iceberg-go/io"
	_ "github.com/apache/iceberg-go/io/gocloud/s3"
	"github.com/apache/iceberg-go/table"

	"github.com/lakegate/lakegate/meta"
)

// fakeS3 keeps objects by path ("/bucket/key") and counts requests.
type fakeS3 struct {
	*httptest.Server
	mu       sync.Mutex
	objects  map[string][]byte
	requests int
}

func newFakeS3(t *testing.T) *fakeS3 {
	f := &fakeS3{objects: map[string][]byte{}}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.requests++
		switch r.Method {
		case http.MethodPut:
			b, _ := io.ReadAll(r.Body)
			f.objects[r.URL.Path] = b
			w.Header().Set("ETag", `"x"`)
		case http.MethodGet, http.MethodHead:
			b, ok := f.objects[r.URL.Path]
			if !ok {
				w.WriteHeader(http.StatusNotFound)
				return
			}
			w.Header().Set("Content-Length", strconv.Itoa(len(b)))
			w.Header().Set("Last-Modified", time.Now().UTC().Format(http.TimeFormat))
			if r.Method == http.MethodGet {
				w.Write(b)
			}
		case http.MethodDelete:
			delete(f.objects, r.URL.Path)
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeS3) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests
}

func s3Props(endpoint string) ice.Properties {
	return ice.Properties{iceio.S3EndpointURL: endpoint, iceio.S3Region: "us-east-1", iceio.S3ForceVirtualAddressing: "false",
		iceio.S3AccessKeyID: "store-key", iceio.S3SecretAccessKey: "store-secret"}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestTablePropertiesNeverOpenStorage(t *testing.T) {
	store, evil := newFakeS3(t), newFakeS3(t)
	ms := meta.NewMem(meta.MemOptions{})
	defer ms.Close()
	c, err := Open(ms, Options{Root: "/lg/iceberg/", Warehouse: "s3://bucket/warehouse", Props: s3Props(store.URL)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	if err := c.CreateNamespace(ctx, table.Identifier{"a"}, nil); err != nil {
		t.Fatal(err)
	}
	sc := ice.NewSchema(0, ice.NestedField{ID: 1, Name: "x", Type: ice.PrimitiveTypes.Int64, Required: true})
	props := s3Props(evil.URL)
	props[iceio.S3AccessKeyID], props[iceio.S3SecretAccessKey] = "client-key", "client-secret"
	tbl, err := c.CreateTable(ctx, table.Identifier{"a", "t"}, sc, catalog.WithProperties(props))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.CommitTable(ctx, tbl.Identifier(), nil, []table.Update{table.NewSetPropertiesUpdate(ice.Properties{"k": "v"})}); err != nil {
		t.Fatal(err)
	}
	if n := evil.count(); n != 0 {
		t.Fatalf("the endpoint of the table's properties got %d requests, want 0", n)
	}
	if n := store.count(); n < 2 {
		t.Fatalf("the store got %d requests, want the two metadata files", n)
	}
}

func TestRegisterOnlyInsideTheWarehouse(t *testing.T) {
	ms := meta.NewMem(meta.MemOptions{})
	defer ms.Close()
	wh := t.TempDir()
	c, err := Open(ms, Options{Root: "/lg/iceberg/", Warehouse: "file://" + filepath.ToSlash(wh)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	if err := c.CreateNamespace(ctx, table.Identifier{"a"}, nil); err != nil {
		t.Fatal(err)
	}
	sc := ice.NewSchema(0, ice.NestedField{ID: 1, Name: "x", Type: ice.PrimitiveTypes.Int64, Required: true})
	tbl, err := c.CreateTable(ctx, table.Identifier{"a", "t"}, sc)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(strings.TrimPrefix(tbl.MetadataLocation(), "file://"))
	if err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "00000-x.metadata.json")
	os.WriteFile(outside, b, 0o644)
	for _, loc := range []string{"file://" + filepath.ToSlash(outside), "file://" + filepath.ToSlash(wh) + "/../x.metadata.json", "s3://other/x.metadata.json"} {
		if _, err := c.RegisterTable(ctx, table.Identifier{"a", "r"}, loc); err == nil || !strings.Contains(err.Error(), "outside the warehouse") {
			t.Fatalf("register %s: %v, want refused", loc, err)
		}
	}
	if _, err := c.RegisterTable(ctx, table.Identifier{"a", "r"}, tbl.MetadataLocation()); err != nil {
		t.Fatalf("register a file of the warehouse: %v", err)
	}
}

// TestOldMetadataDeletedInsideTheTableOnly: a registered table whose
// metadata log lists files elsewhere (another table's, anything) has only
// its own old metadata files deleted after commits.
func TestOldMetadataDeletedInsideTheTableOnly(t *testing.T) {
	ms := meta.NewMem(meta.MemOptions{})
	defer ms.Close()
	wh := t.TempDir()
	c, err := Open(ms, Options{Root: "/lg/iceberg/", Warehouse: "file://" + filepath.ToSlash(wh)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	if err := c.CreateNamespace(ctx, table.Identifier{"a"}, nil); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(wh, "a", "victim", "metadata", "00000-v.metadata.json")
	os.MkdirAll(filepath.Dir(victim), 0o755)
	os.WriteFile(victim, []byte("{}"), 0o644)
	sc := ice.NewSchema(0, ice.NestedField{ID: 1, Name: "x", Type: ice.PrimitiveTypes.Int64, Required: true})
	tbl, err := c.CreateTable(ctx, table.Identifier{"a", "t"}, sc, catalog.WithProperties(ice.Properties{
		table.MetadataDeleteAfterCommitEnabledKey: "true", table.MetadataPreviousVersionsMaxKey: "1"}))
	if err != nil {
		t.Fatal(err)
	}
	// A metadata file whose log names the victim, registered as a.r.
	b, _ := os.ReadFile(strings.TrimPrefix(tbl.MetadataLocation(), "file://"))
	doctored := strings.Replace(string(b), `"metadata-log":[]`, `"metadata-log":[{"metadata-file":"file://`+filepath.ToSlash(victim)+`","timestamp-ms":1}]`, 1)
	if !strings.Contains(doctored, "victim") {
		doctored = strings.Replace(string(b), `{`, `{"metadata-log":[{"metadata-file":"file://`+filepath.ToSlash(victim)+`","timestamp-ms":1}],`, 1)
	}
	reg := filepath.Join(wh, "a", "t", "metadata", "00001-r.metadata.json")
	os.WriteFile(reg, []byte(doctored), 0o644)
	if _, err := c.RegisterTable(ctx, table.Identifier{"a", "r"}, "file://"+filepath.ToSlash(reg)); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, _, err := c.CommitTable(ctx, table.Identifier{"a", "r"}, nil, []table.Update{table.NewSetPropertiesUpdate(ice.Properties{"n": strconv.Itoa(i)})}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(victim); err != nil {
		t.Fatalf("a file outside the table's metadata directory was deleted: %v", err)
	}
}
