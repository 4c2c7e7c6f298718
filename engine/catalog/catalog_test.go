package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
)

var fixedNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

type fixture struct {
	store meta.Store
	logs  *fakeLogs
	cat   *Catalog
}

func newFixture(t *testing.T, mk storeFactory) *fixture {
	t.Helper()
	st := mk(t)
	logs := newFakeLogs()
	return &fixture{store: st, logs: logs, cat: New(st, logs, Options{Now: func() time.Time { return fixedNow }})}
}

func mustNS(t *testing.T, c *Catalog, ns string) {
	t.Helper()
	if _, err := c.CreateNamespace(context.Background(), ns, nil); err != nil {
		t.Fatalf("CreateNamespace(%q): %v", ns, err)
	}
}

func mustStream(t *testing.T, c *Catalog, id string, partitions int) lakestream.StreamMetadata {
	t.Helper()
	md, err := c.CreateStream(context.Background(), lakestream.MustParseStreamID(id), lakestream.StreamConfig{},
		lakestream.Partitioning{NumPartitions: partitions}, lakestream.SchemaConfig{}, nil, nil)
	if err != nil {
		t.Fatalf("CreateStream(%q): %v", id, err)
	}
	return md
}

func wantErr(t *testing.T, err error, targets ...error) {
	t.Helper()
	if err == nil {
		t.Fatalf("got nil error, want %v", targets)
	}
	for _, target := range targets {
		if !errors.Is(err, target) {
			t.Fatalf("error %q is not %v", err, target)
		}
	}
}

func testNamespaceCRUD(t *testing.T, mk storeFactory) {
	ctx := context.Background()
	c := newFixture(t, mk).cat

	ns, err := c.CreateNamespace(ctx, "public/default", map[string]string{"a": "1"})
	if err != nil {
		t.Fatal(err)
	}
	if ns.Name != "public/default" || ns.Properties["a"] != "1" {
		t.Fatalf("created %+v", ns)
	}
	_, err = c.CreateNamespace(ctx, "public/default", nil)
	wantErr(t, err, lakestream.ErrAlreadyExists)
	mustNS(t, c, "solo")

	if ok, err := c.NamespaceExists(ctx, "public/default"); err != nil || !ok {
		t.Fatalf("exists = %v, %v", ok, err)
	}
	if ok, err := c.NamespaceExists(ctx, "public/other"); err != nil || ok {
		t.Fatalf("exists(other) = %v, %v", ok, err)
	}
	names, err := c.ListNamespaces(ctx)
	if err != nil || !slices.Equal(names, []string{"public/default", "solo"}) {
		t.Fatalf("list = %v, %v", names, err)
	}

	if err := c.SetNamespaceProperties(ctx, "public/default", map[string]string{"b": "2", "a": "x"}); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveNamespaceProperties(ctx, "public/default", []string{"a", "absent"}); err != nil {
		t.Fatal(err)
	}
	ns, err = c.LoadNamespace(ctx, "public/default")
	if err != nil || !maps.Equal(ns.Properties, map[string]string{"b": "2"}) {
		t.Fatalf("load = %+v, %v", ns, err)
	}

	on := true
	if err := c.SetNamespaceMaterialization(ctx, "public/default", &lakestream.TableMaterializationPolicy{Enabled: &on}); err != nil {
		t.Fatal(err)
	}
	ns, _ = c.LoadNamespace(ctx, "public/default")
	if ns.Materialization == nil || !*ns.Materialization.Enabled {
		t.Fatalf("materialization = %+v", ns.Materialization)
	}
	if err := c.SetNamespaceMaterialization(ctx, "public/default", nil); err != nil {
		t.Fatal(err)
	}
	ns, _ = c.LoadNamespace(ctx, "public/default")
	if ns.Materialization != nil {
		t.Fatalf("cleared materialization = %+v", ns.Materialization)
	}

	if err := c.DropNamespace(ctx, "public/default"); err != nil {
		t.Fatal(err)
	}
	_, err = c.LoadNamespace(ctx, "public/default")
	wantErr(t, err, lakestream.ErrNoSuchNamespace)
	wantErr(t, c.DropNamespace(ctx, "public/default"), lakestream.ErrNoSuchNamespace)
	wantErr(t, c.SetNamespaceProperties(ctx, "public/default", nil), lakestream.ErrNoSuchNamespace)

	for _, bad := range []string{"", "a/b/c", "/a", "a/", "a\x00b", string(make([]byte, 300))} {
		_, err := c.CreateNamespace(ctx, bad, nil)
		wantErr(t, err, lakestream.ErrInvalidArgument)
	}
}

func testDropNamespaceNotEmpty(t *testing.T, mk storeFactory) {
	ctx := context.Background()
	c := newFixture(t, mk).cat
	mustNS(t, c, "t/ns")
	mustStream(t, c, "t/ns/s", 0)
	wantErr(t, c.DropNamespace(ctx, "t/ns"), lakestream.ErrNamespaceNotEmpty)
	if err := c.DropStream(ctx, lakestream.MustParseStreamID("t/ns/s"), false); err != nil {
		t.Fatal(err)
	}
	if err := c.DropNamespace(ctx, "t/ns"); err != nil {
		t.Fatal(err)
	}
}

// A stream created between DropNamespace's emptiness check and its commit
// must make the drop fail, not leave an orphan stream.
func testDropNamespaceRacesCreateStream(t *testing.T, mk storeFactory) {
	ctx := context.Background()
	base := mk(t)
	logs := newFakeLogs()
	setup := New(base, logs, Options{})
	mustNS(t, setup, "t/ns")

	hs := &hookStore{Store: base}
	hs.beforeTxn = func() { mustStream(t, setup, "t/ns/late", 1) }
	dropper := New(hs, logs, Options{})
	wantErr(t, dropper.DropNamespace(ctx, "t/ns"), lakestream.ErrNamespaceNotEmpty)
	if ok, _ := setup.NamespaceExists(ctx, "t/ns"); !ok {
		t.Fatal("namespace dropped under a new stream")
	}
}

func testStreamCRUD(t *testing.T, mk storeFactory) {
	ctx := context.Background()
	f := newFixture(t, mk)
	c := f.cat
	id := lakestream.MustParseStreamID("public/default/orders")

	_, err := c.CreateStream(ctx, id, lakestream.StreamConfig{}, lakestream.Partitioning{}, lakestream.SchemaConfig{}, nil, nil)
	wantErr(t, err, lakestream.ErrNoSuchNamespace)
	mustNS(t, c, "public/default")

	schema := lakestream.SchemaConfig{Type: lakestream.SchemaAvro, Definition: []byte(`{"type":"string"}`)}
	md, err := c.CreateStream(ctx, id, lakestream.StreamConfig{Properties: map[string]string{"retention": "1d"}},
		lakestream.Partitioning{NumPartitions: 3}, schema, map[string]string{"p": "v"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if md.ID != id || md.Partitioning.NumPartitions != 3 || len(md.LogIDs) != 3 || md.MetadataVersion != 1 ||
		md.State != lakestream.StreamActive || md.CreatedAtMs != fixedNow.UnixMilli() || md.Config.Properties["retention"] != "1d" {
		t.Fatalf("created %+v", md)
	}
	loaded, err := c.LoadStream(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if loaded.Schema.Type != lakestream.SchemaAvro || string(loaded.Schema.Definition) != `{"type":"string"}` ||
		!slices.Equal(loaded.LogIDs, md.LogIDs) || loaded.Properties["p"] != "v" {
		t.Fatalf("loaded %+v", loaded)
	}
	_, err = c.CreateStream(ctx, id, lakestream.StreamConfig{}, lakestream.Partitioning{}, lakestream.SchemaConfig{}, nil, nil)
	wantErr(t, err, lakestream.ErrAlreadyExists)

	single := mustStream(t, c, "public/default/single", 0)
	if single.Partitioning.NumPartitions != 0 || len(single.LogIDs) != 1 || single.Schema.Type != lakestream.SchemaNone {
		t.Fatalf("non-partitioned %+v", single)
	}
	ids, err := c.ListStreams(ctx, "public/default")
	if err != nil || len(ids) != 2 || ids[0].Name != "orders" || ids[1].Name != "single" {
		t.Fatalf("list = %v, %v", ids, err)
	}
	_, err = c.ListStreams(ctx, "public/none")
	wantErr(t, err, lakestream.ErrNoSuchNamespace)

	md, err = c.SetStreamSchema(ctx, id, lakestream.SchemaConfig{Type: lakestream.SchemaJSON})
	if err != nil || md.Schema.Type != lakestream.SchemaJSON || md.MetadataVersion != 2 {
		t.Fatalf("set schema = %+v, %v", md, err)
	}

	_, err = c.LoadStream(ctx, lakestream.MustParseStreamID("public/default/none"))
	wantErr(t, err, lakestream.ErrNoSuchStream)
	if errors.Is(err, lakestream.ErrStreamDeleted) {
		t.Fatal("never-created stream reported deleted")
	}

	for _, bad := range []lakestream.StreamIdentifier{{Namespace: "public/default", Name: "a/b"}, {Namespace: "public/default"}, {Name: "x"}} {
		_, err := c.CreateStream(ctx, bad, lakestream.StreamConfig{}, lakestream.Partitioning{}, lakestream.SchemaConfig{}, nil, nil)
		wantErr(t, err, lakestream.ErrInvalidArgument)
	}
	_, err = c.CreateStream(ctx, lakestream.MustParseStreamID("public/default/neg"), lakestream.StreamConfig{},
		lakestream.Partitioning{NumPartitions: -1}, lakestream.SchemaConfig{}, nil, nil)
	wantErr(t, err, lakestream.ErrInvalidArgument)
}

func testDropStreamTombstone(t *testing.T, mk storeFactory) {
	ctx := context.Background()
	f := newFixture(t, mk)
	c := f.cat
	mustNS(t, c, "public/default")
	id := lakestream.MustParseStreamID("public/default/orders")
	md := mustStream(t, c, id.String(), 2)
	if _, err := f.logs.Append(ctx, md.LogIDs[0], 1, []byte("x")); err != nil {
		t.Fatal(err)
	}

	if err := c.DropStream(ctx, id, true); err != nil {
		t.Fatal(err)
	}
	for _, l := range md.LogIDs {
		if !f.logs.isDeleted(l) {
			t.Fatalf("log %d not purged", l)
		}
	}
	if ok, err := c.StreamExists(ctx, id); err != nil || ok {
		t.Fatalf("exists after drop = %v, %v", ok, err)
	}
	_, err := c.LoadStream(ctx, id)
	wantErr(t, err, lakestream.ErrNoSuchStream, lakestream.ErrStreamDeleted)
	var de *StreamDeletedError
	if !errors.As(err, &de) || de.ID != id || de.DroppedAtMs != fixedNow.UnixMilli() {
		t.Fatalf("error %v is not a StreamDeletedError for %s", err, id)
	}
	_, err = c.Stream(ctx, id)
	wantErr(t, err, lakestream.ErrStreamDeleted)
	wantErr(t, c.DropStream(ctx, id, false), lakestream.ErrStreamDeleted)
	_, err = c.IncreasePartitions(ctx, id, 5)
	wantErr(t, err, lakestream.ErrStreamDeleted)

	_, err = c.CreateStream(ctx, id, lakestream.StreamConfig{}, lakestream.Partitioning{}, lakestream.SchemaConfig{}, nil, nil)
	wantErr(t, err, lakestream.ErrAlreadyExists, lakestream.ErrStreamDeleted)
	if errors.Is(err, lakestream.ErrNoSuchStream) {
		t.Fatalf("create on tombstone says no such stream: %v", err)
	}

	// Dropping without purge keeps the logs.
	keep := mustStream(t, c, "public/default/keep", 0)
	if err := c.DropStream(ctx, keep.ID, false); err != nil {
		t.Fatal(err)
	}
	if f.logs.isDeleted(keep.LogIDs[0]) {
		t.Fatal("drop without purge deleted the log")
	}

	// The tombstone survives dropping and recreating the namespace.
	if err := c.DropNamespace(ctx, "public/default"); err != nil {
		t.Fatal(err)
	}
	mustNS(t, c, "public/default")
	_, err = c.CreateStream(ctx, id, lakestream.StreamConfig{}, lakestream.Partitioning{}, lakestream.SchemaConfig{}, nil, nil)
	wantErr(t, err, lakestream.ErrStreamDeleted)
}

func testConcurrentCreateStreamOneWinner(t *testing.T, mk storeFactory) {
	ctx := context.Background()
	c := newFixture(t, mk).cat
	mustNS(t, c, "t/ns")
	id := lakestream.MustParseStreamID("t/ns/race")

	const n = 16
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			_, errs[i] = c.CreateStream(ctx, id, lakestream.StreamConfig{}, lakestream.Partitioning{NumPartitions: 4},
				lakestream.SchemaConfig{}, nil, nil)
		})
	}
	close(start)
	wg.Wait()
	wins := 0
	for _, err := range errs {
		switch {
		case err == nil:
			wins++
		case errors.Is(err, lakestream.ErrAlreadyExists):
		default:
			t.Fatalf("unexpected error: %v", err)
		}
	}
	if wins != 1 {
		t.Fatalf("%d winners, want 1", wins)
	}
}

func testConcurrentCreateStreamsUniqueLogIDs(t *testing.T, mk storeFactory) {
	ctx := context.Background()
	c := newFixture(t, mk).cat
	mustNS(t, c, "t/a")
	mustNS(t, c, "t/b")

	const n = 16
	mds := make([]lakestream.StreamMetadata, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			id := lakestream.StreamIdentifier{Namespace: []string{"t/a", "t/b"}[i%2], Name: fmt.Sprintf("s%d", i)}
			mds[i], errs[i] = c.CreateStream(ctx, id, lakestream.StreamConfig{}, lakestream.Partitioning{NumPartitions: i % 3},
				lakestream.SchemaConfig{}, nil, nil)
		})
	}
	wg.Wait()
	seen := map[lakestream.LogID]bool{}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("stream %d: %v", i, errs[i])
		}
		for _, l := range mds[i].LogIDs {
			if seen[l] || l < 1 {
				t.Fatalf("log id %d reused or invalid", l)
			}
			seen[l] = true
		}
	}
	for _, ns := range []string{"t/a", "t/b"} {
		ids, err := c.ListStreams(ctx, ns)
		if err != nil || len(ids) != n/2 {
			t.Fatalf("ListStreams(%s) = %d, %v", ns, len(ids), err)
		}
	}
}

func testIncreasePartitions(t *testing.T, mk storeFactory) {
	ctx := context.Background()
	c := newFixture(t, mk).cat
	mustNS(t, c, "t/ns")
	md := mustStream(t, c, "t/ns/p", 2)
	other := mustStream(t, c, "t/ns/other", 1)

	grown, err := c.IncreasePartitions(ctx, md.ID, 5)
	if err != nil {
		t.Fatal(err)
	}
	if grown.Partitioning.NumPartitions != 5 || len(grown.LogIDs) != 5 || !slices.Equal(grown.LogIDs[:2], md.LogIDs) ||
		grown.MetadataVersion != md.MetadataVersion+1 {
		t.Fatalf("grown %+v", grown)
	}
	seen := map[lakestream.LogID]bool{other.LogIDs[0]: true}
	for _, l := range grown.LogIDs {
		if seen[l] {
			t.Fatalf("log id %d not unique", l)
		}
		seen[l] = true
	}

	for _, target := range []int{5, 3, 0} {
		again, err := c.IncreasePartitions(ctx, md.ID, target)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(again.LogIDs, grown.LogIDs) || again.MetadataVersion != grown.MetadataVersion {
			t.Fatalf("IncreasePartitions(%d) changed the stream: %+v", target, again)
		}
	}

	single := mustStream(t, c, "t/ns/single", 0)
	_, err = c.IncreasePartitions(ctx, single.ID, 4)
	wantErr(t, err, lakestream.ErrInvalidArgument)
	_, err = c.IncreasePartitions(ctx, lakestream.MustParseStreamID("t/ns/none"), 4)
	wantErr(t, err, lakestream.ErrNoSuchStream)

	// Concurrent growers: all succeed, the result is the largest target.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if _, err := c.IncreasePartitions(ctx, md.ID, 6+i); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	final, err := c.LoadStream(ctx, md.ID)
	if err != nil || final.Partitioning.NumPartitions != 13 || len(final.LogIDs) != 13 {
		t.Fatalf("final %+v, %v", final, err)
	}
	clear(seen)
	for _, l := range final.LogIDs {
		if seen[l] {
			t.Fatalf("duplicate log id %d", l)
		}
		seen[l] = true
	}
}

func testReplaceStreamProperties(t *testing.T, mk storeFactory) {
	ctx := context.Background()
	c := newFixture(t, mk).cat
	mustNS(t, c, "t/ns")
	md := mustStream(t, c, "t/ns/s", 0)

	next, ok, err := c.ReplaceStreamProperties(ctx, md.ID, map[string]string{"a": "1"}, md.MetadataVersion)
	if err != nil || !ok || next.Properties["a"] != "1" || next.MetadataVersion != md.MetadataVersion+1 {
		t.Fatalf("replace = %+v, %v, %v", next, ok, err)
	}
	stale, ok, err := c.ReplaceStreamProperties(ctx, md.ID, map[string]string{"b": "2"}, md.MetadataVersion)
	if err != nil || ok {
		t.Fatalf("stale replace = %v, %v", ok, err)
	}
	if !maps.Equal(stale.Properties, map[string]string{"a": "1"}) || stale.MetadataVersion != next.MetadataVersion {
		t.Fatalf("stale replace returned %+v", stale)
	}
	cur, _ := c.LoadStream(ctx, md.ID)
	if !maps.Equal(cur.Properties, next.Properties) || cur.MetadataVersion != next.MetadataVersion {
		t.Fatalf("stale replace changed the stream: %+v", cur)
	}

	// Racing replacers from one version: exactly one applies.
	const n = 8
	var wg sync.WaitGroup
	oks := make([]bool, n)
	for i := range n {
		wg.Go(func() {
			var err error
			_, oks[i], err = c.ReplaceStreamProperties(ctx, md.ID, map[string]string{"w": fmt.Sprint(i)}, cur.MetadataVersion)
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if wins := len(slices.DeleteFunc(oks, func(b bool) bool { return !b })); wins != 1 {
		t.Fatalf("%d replacers won, want 1", wins)
	}
}

func testTableCatalogs(t *testing.T, mk storeFactory) {
	ctx := context.Background()
	c := newFixture(t, mk).cat
	tc := lakestream.TableCatalog{Name: "lake/iceberg", Type: lakestream.TableIceberg, Connection: "http://rest", Properties: map[string]string{"w": "x"}}
	if err := c.RegisterTableCatalog(ctx, tc); err != nil {
		t.Fatal(err)
	}
	wantErr(t, c.RegisterTableCatalog(ctx, tc), lakestream.ErrAlreadyExists)
	wantErr(t, c.RegisterTableCatalog(ctx, lakestream.TableCatalog{Name: "x", Type: "HUDI"}), lakestream.ErrInvalidArgument)
	if err := c.RegisterTableCatalog(ctx, lakestream.TableCatalog{Name: "delta", Type: lakestream.TableDelta, Connection: "file:///t"}); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetTableCatalog(ctx, "lake/iceberg")
	if err != nil || got.Connection != "http://rest" || got.Properties["w"] != "x" || got.Type != lakestream.TableIceberg {
		t.Fatalf("get = %+v, %v", got, err)
	}
	all, err := c.ListTableCatalogs(ctx)
	if err != nil || len(all) != 2 {
		t.Fatalf("list = %+v, %v", all, err)
	}
	if err := c.UnregisterTableCatalog(ctx, "lake/iceberg"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, c.UnregisterTableCatalog(ctx, "lake/iceberg"), lakestream.ErrNoSuchTableCatalog)
	_, err = c.GetTableCatalog(ctx, "lake/iceberg")
	wantErr(t, err, lakestream.ErrNoSuchTableCatalog)
}

// Names with slashes and escapable bytes must not collide with each other in
// keys or in prefix listings.
func testNamesWithSlashesDoNotCollide(t *testing.T, mk storeFactory) {
	ctx := context.Background()
	c := newFixture(t, mk).cat
	namespaces := []string{"public/default", "public/default2", "public", "public%2Fdefault", "publ ic/def:ault", "a/b", "a%2Fb"}
	for _, ns := range namespaces {
		mustNS(t, c, ns)
		mustStream(t, c, ns+"/s", 0)
		mustStream(t, c, ns+"/only-"+escapeSegment(ns), 0)
	}
	for _, ns := range namespaces {
		ids, err := c.ListStreams(ctx, ns)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"only-" + escapeSegment(ns), "s"}
		slices.Sort(want)
		var got []string
		for _, id := range ids {
			if id.Namespace != ns {
				t.Fatalf("ListStreams(%q) returned %v", ns, id)
			}
			got = append(got, id.Name)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("ListStreams(%q) = %v, want %v", ns, got, want)
		}
	}
	all, err := c.ListNamespaces(ctx)
	sorted := slices.Sorted(slices.Values(namespaces))
	if err != nil || !slices.Equal(all, sorted) {
		t.Fatalf("ListNamespaces = %v, want %v (%v)", all, sorted, err)
	}
	// Dropping one namespace's stream leaves the look-alikes alone.
	if err := c.DropStream(ctx, lakestream.MustParseStreamID("public/default/s"), false); err != nil {
		t.Fatal(err)
	}
	for _, ns := range namespaces[1:] {
		if ok, _ := c.StreamExists(ctx, lakestream.StreamIdentifier{Namespace: ns, Name: "s"}); !ok {
			t.Fatalf("%s/s vanished", ns)
		}
	}
}

func TestEscapeSegment(t *testing.T) {
	for _, s := range []string{"", "plain-._AZaz09", "a/b", "%2F", "日本", "x y:z", "\xff\x00"} {
		e := escapeSegment(s)
		for i := 0; i < len(e); i++ {
			if e[i] != '%' && !segmentByteOK(e[i]) {
				t.Fatalf("escape(%q) = %q has byte %q", s, e, e[i])
			}
		}
		back, err := unescapeSegment(e)
		if err != nil || back != s {
			t.Fatalf("unescape(escape(%q)) = %q, %v", s, back, err)
		}
	}
	if escapeSegment("a/b") != "a%2Fb" {
		t.Fatalf("escape(a/b) = %q", escapeSegment("a/b"))
	}
	for _, bad := range []string{"%", "%2", "%zz"} {
		if _, err := unescapeSegment(bad); err == nil {
			t.Fatalf("unescape(%q) accepted", bad)
		}
	}
}

// The key layout and record encoding are those of docs/catalog.md.
func testKeyLayoutAndRecords(t *testing.T, mk storeFactory) {
	ctx := context.Background()
	st := mk(t)
	c := New(st, newFakeLogs(), Options{Root: "/custom", Now: func() time.Time { return fixedNow }})
	mustNS(t, c, "public/default")
	md := mustStream(t, c, "public/default/orders", 2)

	get := func(key string) map[string]any {
		t.Helper()
		kv, found, err := st.Get(ctx, key)
		if err != nil || !found {
			t.Fatalf("key %s: found=%v err=%v", key, found, err)
		}
		var m map[string]any
		if err := json.Unmarshal(kv.Value, &m); err != nil {
			t.Fatalf("key %s: %v", key, err)
		}
		return m
	}
	ns := get("/custom/catalog/ns/public%2Fdefault")
	if ns["v"] != 1.0 || ns["name"] != "public/default" || ns["version"] != 1.0 || ns["createdAtMs"] != float64(fixedNow.UnixMilli()) {
		t.Fatalf("namespace record %v", ns)
	}
	s := get("/custom/catalog/streams/public%2Fdefault/orders")
	if s["v"] != 1.0 || s["namespace"] != "public/default" || s["name"] != "orders" || s["state"] != "ACTIVE" ||
		s["version"] != 1.0 || fmt.Sprint(s["logIds"]) != "[1 2]" ||
		fmt.Sprint(s["partitioning"]) != "map[partitions:2 strategy:INDEXED]" {
		t.Fatalf("stream record %v", s)
	}
	kv, _, _ := st.Get(ctx, "/custom/catalog/next-log-id")
	if string(kv.Value) != "3" {
		t.Fatalf("next-log-id = %q", kv.Value)
	}
	if err := c.DropStream(ctx, md.ID, false); err != nil {
		t.Fatal(err)
	}
	ts := get("/custom/catalog/tombstones/public%2Fdefault/orders")
	if ts["v"] != 1.0 || fmt.Sprint(ts["logIds"]) != "[1 2]" || ts["purge"] != false || ts["droppedAtMs"] != float64(fixedNow.UnixMilli()) {
		t.Fatalf("tombstone record %v", ts)
	}
	if err := c.RegisterTableCatalog(ctx, lakestream.TableCatalog{Name: "lake", Type: lakestream.TableDelta}); err != nil {
		t.Fatal(err)
	}
	if tc := get("/custom/catalog/tablecatalogs/lake"); tc["type"] != "DELTA" {
		t.Fatalf("table catalog record %v", tc)
	}
	on := true
	if err := c.SetDefaultMaterialization(ctx, &lakestream.TableMaterializationPolicy{Enabled: &on, SortOrder: []string{}}); err != nil {
		t.Fatal(err)
	}
	def := get("/custom/catalog/default-materialization")
	p := def["policy"].(map[string]any)
	if def["v"] != 1.0 || p["enabled"] != true || p["catalogs"] != nil || fmt.Sprint(p["sortOrder"]) != "[]" {
		t.Fatalf("default policy record %v", def)
	}
	// Nothing outside the root.
	kvs, _ := st.Range(ctx, "\x00", "", 0)
	for _, kv := range kvs {
		if len(kv.Key) < len("/custom/catalog/") || kv.Key[:len("/custom/catalog/")] != "/custom/catalog/" {
			t.Fatalf("key %q outside the catalog root", kv.Key)
		}
	}
}

func testRejectsUnknownRecordVersion(t *testing.T, mk storeFactory) {
	ctx := context.Background()
	f := newFixture(t, mk)
	key := f.cat.keys.namespace("future")
	if _, _, err := f.store.Txn(ctx, nil, []meta.Op{meta.Put(key, []byte(`{"v":2,"name":"future"}`))}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.cat.LoadNamespace(ctx, "future"); err == nil {
		t.Fatal("loaded a record of an unknown version")
	}
}

func ptrTo[T any](v T) *T { return &v }

func TestResolvePolicy(t *testing.T) {
	type P = lakestream.TableMaterializationPolicy
	mode := func(m lakestream.WriteMode) *lakestream.WriteMode { return &m }
	tests := []struct {
		name             string
		def, ns, stream  *P
		enabled          bool
		catalogs         []string
		catalogsNil      bool
		writeMode        lakestream.WriteMode
		commitMs         int64
		compressionUnset bool
	}{
		{name: "nothing set", enabled: false, catalogsNil: true, compressionUnset: true},
		{name: "default only", def: &P{Enabled: ptrTo(true), Catalogs: []string{"a"}, WriteMode: mode(lakestream.WriteAppend), CommitIntervalMs: ptrTo[int64](1000)},
			enabled: true, catalogs: []string{"a"}, writeMode: lakestream.WriteAppend, commitMs: 1000, compressionUnset: true},
		{name: "namespace over default",
			def:     &P{Enabled: ptrTo(true), Catalogs: []string{"a"}, CommitIntervalMs: ptrTo[int64](1000)},
			ns:      &P{Catalogs: []string{"b"}, WriteMode: mode(lakestream.WriteUpsert)},
			enabled: true, catalogs: []string{"b"}, writeMode: lakestream.WriteUpsert, commitMs: 1000, compressionUnset: true},
		{name: "stream over namespace over default",
			def:     &P{Enabled: ptrTo(false), Compression: ptrTo("zstd"), CommitIntervalMs: ptrTo[int64](1000)},
			ns:      &P{Enabled: ptrTo(true), CommitIntervalMs: ptrTo[int64](2000)},
			stream:  &P{CommitIntervalMs: ptrTo[int64](3000), WriteMode: mode(lakestream.WriteCDC)},
			enabled: true, catalogsNil: true, writeMode: lakestream.WriteCDC, commitMs: 3000},
		{name: "stream disabled wins",
			def:     &P{Enabled: ptrTo(true)},
			ns:      &P{Enabled: ptrTo(true), Catalogs: []string{"a"}},
			stream:  &P{Enabled: ptrTo(false)},
			enabled: false, catalogs: []string{"a"}, compressionUnset: true},
		{name: "stream enables what namespace disables",
			ns:      &P{Enabled: ptrTo(false)},
			stream:  &P{Enabled: ptrTo(true)},
			enabled: true, catalogsNil: true, compressionUnset: true},
		{name: "empty list overrides, nil inherits",
			def:     &P{Catalogs: []string{"a"}},
			ns:      &P{Catalogs: []string{}},
			stream:  &P{Catalogs: nil},
			enabled: false, catalogs: []string{}, compressionUnset: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := resolvePolicy(tt.def, tt.ns, tt.stream)
			if got.Enabled == nil || *got.Enabled != tt.enabled {
				t.Fatalf("enabled = %v", got.Enabled)
			}
			if tt.catalogsNil != (got.Catalogs == nil) || (!tt.catalogsNil && !slices.Equal(got.Catalogs, tt.catalogs)) {
				t.Fatalf("catalogs = %#v", got.Catalogs)
			}
			if tt.writeMode != "" && (got.WriteMode == nil || *got.WriteMode != tt.writeMode) {
				t.Fatalf("write mode = %v", got.WriteMode)
			}
			if tt.commitMs != 0 && (got.CommitIntervalMs == nil || *got.CommitIntervalMs != tt.commitMs) {
				t.Fatalf("commit interval = %v", got.CommitIntervalMs)
			}
			if tt.compressionUnset != (got.Compression == nil) {
				t.Fatalf("compression = %v", got.Compression)
			}
		})
	}
}

func testResolveMaterializationThroughStore(t *testing.T, mk storeFactory) {
	ctx := context.Background()
	c := newFixture(t, mk).cat
	mustNS(t, c, "t/ns")
	id := lakestream.MustParseStreamID("t/ns/s")
	md, err := c.CreateStream(ctx, id, lakestream.StreamConfig{}, lakestream.Partitioning{}, lakestream.SchemaConfig{}, nil,
		&lakestream.TableMaterializationPolicy{PartitionSpec: []string{"__partition"}})
	if err != nil {
		t.Fatal(err)
	}
	if md.Materialization == nil || !slices.Equal(md.Materialization.PartitionSpec, []string{"__partition"}) {
		t.Fatalf("created with %+v", md.Materialization)
	}
	if err := c.SetDefaultMaterialization(ctx, &lakestream.TableMaterializationPolicy{Enabled: ptrTo(true), Compression: ptrTo("zstd")}); err != nil {
		t.Fatal(err)
	}
	if err := c.SetNamespaceMaterialization(ctx, "t/ns", &lakestream.TableMaterializationPolicy{Catalogs: []string{"lake"}, Compression: ptrTo("snappy")}); err != nil {
		t.Fatal(err)
	}
	got, err := c.ResolveMaterialization(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !*got.Enabled || *got.Compression != "snappy" || !slices.Equal(got.Catalogs, []string{"lake"}) || !slices.Equal(got.PartitionSpec, []string{"__partition"}) {
		t.Fatalf("resolved %+v", got)
	}
	if err := c.SetStreamMaterialization(ctx, id, &lakestream.TableMaterializationPolicy{Enabled: ptrTo(false)}); err != nil {
		t.Fatal(err)
	}
	got, _ = c.ResolveMaterialization(ctx, id)
	if *got.Enabled || got.PartitionSpec != nil {
		t.Fatalf("after stream disable: %+v", got)
	}
	if err := c.SetDefaultMaterialization(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if def, err := c.DefaultMaterialization(ctx); err != nil || def != nil {
		t.Fatalf("cleared default = %+v, %v", def, err)
	}
	bad := lakestream.WriteMode("MERGE")
	wantErr(t, c.SetStreamMaterialization(ctx, id, &lakestream.TableMaterializationPolicy{WriteMode: &bad}), lakestream.ErrInvalidArgument)
	wantErr(t, c.SetNamespaceMaterialization(ctx, "t/ns", &lakestream.TableMaterializationPolicy{StartPosition: ptrTo("middle")}), lakestream.ErrInvalidArgument)
	wantErr(t, c.SetDefaultMaterialization(ctx, &lakestream.TableMaterializationPolicy{CommitIntervalMs: ptrTo[int64](0)}), lakestream.ErrInvalidArgument)
	wantErr(t, c.SetStreamMaterialization(ctx, id, &lakestream.TableMaterializationPolicy{RetentionMs: ptrTo[int64](-1)}), lakestream.ErrInvalidArgument)
	wantErr(t, c.SetStreamMaterialization(ctx, id, &lakestream.TableMaterializationPolicy{RetentionBytes: ptrTo[int64](-1)}), lakestream.ErrInvalidArgument)
	// Retention limits are stored and inherited like the other numbers;
	// 0 (no limit) overrides an inherited limit.
	if err := c.SetNamespaceMaterialization(ctx, "t/ns", &lakestream.TableMaterializationPolicy{RetentionMs: ptrTo[int64](3600_000), RetentionBytes: ptrTo[int64](1 << 30)}); err != nil {
		t.Fatal(err)
	}
	if err := c.SetStreamMaterialization(ctx, id, &lakestream.TableMaterializationPolicy{RetentionBytes: ptrTo[int64](0)}); err != nil {
		t.Fatal(err)
	}
	got, err = c.ResolveMaterialization(ctx, id)
	if err != nil || got.RetentionMs == nil || *got.RetentionMs != 3600_000 || got.RetentionBytes == nil || *got.RetentionBytes != 0 {
		t.Fatalf("resolved retention: %+v, %v", got, err)
	}
}

func TestClosedAndUnavailable(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, memStore)
	mustNS(t, f.cat, "t/ns")
	s, err := f.cat.Stream(ctx, mustStream(t, f.cat, "t/ns/s", 0).ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.cat.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = f.cat.LoadNamespace(ctx, "t/ns")
	wantErr(t, err, lakestream.ErrClosed)
	_, err = f.cat.CreateNamespace(ctx, "x", nil)
	wantErr(t, err, lakestream.ErrClosed)
	_, err = s.NewWriter().Write(ctx, lakestream.RoutingKey{}, 1, []byte("x"))
	wantErr(t, err, lakestream.ErrClosed)

	down := meta.NewMem(meta.MemOptions{Fault: func(meta.Call) meta.Fault { return meta.FaultUnavailable }})
	c := New(down, newFakeLogs(), Options{})
	_, err = c.LoadNamespace(ctx, "t/ns")
	wantErr(t, err, lakestream.ErrUnavailable, meta.ErrUnavailable)
	_, err = c.CreateNamespace(ctx, "t/ns", nil)
	wantErr(t, err, lakestream.ErrUnavailable)
	_, err = c.ListNamespaces(ctx)
	wantErr(t, err, lakestream.ErrUnavailable)

	closedStore := meta.NewMem(meta.MemOptions{})
	closedStore.Close()
	_, err = New(closedStore, newFakeLogs(), Options{}).LoadStream(ctx, lakestream.MustParseStreamID("t/ns/s"))
	wantErr(t, err, lakestream.ErrClosed)
}

// A CreateStream whose commit applied but whose reply was lost reports
// ErrUnavailable (outcome unknown); retrying finds the stream.
func TestCreateStreamLostReply(t *testing.T) {
	ctx := context.Background()
	st := meta.NewMem(meta.MemOptions{})
	c := New(st, newFakeLogs(), Options{})
	mustNS(t, c, "t/ns")
	id := lakestream.MustParseStreamID("t/ns/s")
	st.InjectFault(meta.MethodTxn, meta.FaultLostReply)
	_, err := c.CreateStream(ctx, id, lakestream.StreamConfig{}, lakestream.Partitioning{NumPartitions: 2}, lakestream.SchemaConfig{}, nil, nil)
	wantErr(t, err, lakestream.ErrUnavailable)
	_, err = c.CreateStream(ctx, id, lakestream.StreamConfig{}, lakestream.Partitioning{NumPartitions: 2}, lakestream.SchemaConfig{}, nil, nil)
	wantErr(t, err, lakestream.ErrAlreadyExists)
	md, err := c.LoadStream(ctx, id)
	if err != nil || len(md.LogIDs) != 2 {
		t.Fatalf("after lost reply: %+v, %v", md, err)
	}
}

// Losing every race ends in ErrConflict after TxnAttemptsMax attempts.
func TestConflictAfterAttempts(t *testing.T) {
	ctx := context.Background()
	base := meta.NewMem(meta.MemOptions{})
	setup := New(base, newFakeLogs(), Options{})
	mustNS(t, setup, "t/ns")
	// Every Txn of the contender is preceded by a change of the namespace.
	n := 0
	contender := New(&racingStore{Store: base, before: func() {
		n++
		if err := setup.SetNamespaceProperties(ctx, "t/ns", map[string]string{"n": fmt.Sprint(n)}); err != nil {
			t.Error(err)
		}
	}}, newFakeLogs(), Options{TxnAttemptsMax: 3})
	err := contender.SetNamespaceProperties(ctx, "t/ns", map[string]string{"x": "y"})
	wantErr(t, err, lakestream.ErrConflict)
	if n != 3 {
		t.Fatalf("%d attempts, want 3", n)
	}
}

// Listings page through the store rangePageKeys keys at a time.
func TestListPaging(t *testing.T) {
	ctx := context.Background()
	c := newFixture(t, memStore).cat
	const n = rangePageKeys + 5
	for i := range n {
		mustNS(t, c, fmt.Sprintf("t/ns%04d", i))
	}
	names, err := c.ListNamespaces(ctx)
	if err != nil || len(names) != n || names[0] != "t/ns0000" || names[n-1] != fmt.Sprintf("t/ns%04d", n-1) {
		t.Fatalf("ListNamespaces: %d names, %v", len(names), err)
	}
}

func FuzzSegment(f *testing.F) {
	for _, s := range []string{"", "public/default", "a%2Fb", "%", "%zz", "日本", "\x00\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e := escapeSegment(s)
		if back, err := unescapeSegment(e); err != nil || back != s {
			t.Fatalf("round trip of %q: %q, %v", s, back, err)
		}
		if strings.Contains(e, "/") {
			t.Fatalf("escape(%q) = %q contains '/'", s, e)
		}
		// Arbitrary input never panics, and what decodes round-trips.
		if d, err := unescapeSegment(s); err == nil {
			if back, err := unescapeSegment(escapeSegment(d)); err != nil || back != d {
				t.Fatalf("unescape(%q) = %q does not round trip: %q, %v", s, d, back, err)
			}
		}
	})
}

// testLoadStreamSeesEveryWrite: the read-only loads reuse a decoded record
// while the stored one is unchanged, and never return it after a write —
// by this catalog or another one over the same store (another node).
func testLoadStreamSeesEveryWrite(t *testing.T, mk storeFactory) {
	ctx := context.Background()
	f := newFixture(t, mk)
	a, b := f.cat, New(f.store, f.logs, Options{Now: func() time.Time { return fixedNow }})
	mustNS(t, a, "t/ns")
	md := mustStream(t, a, "t/ns/s", 2)

	r1, err := a.loadStreamShared(ctx, "test", md.ID)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := a.loadStreamShared(ctx, "test", md.ID)
	if err != nil || r2 != r1 {
		t.Fatalf("unchanged record decoded again (%p, %p) or %v", r1, r2, err)
	}
	got, err := a.LoadStream(ctx, md.ID)
	if err != nil {
		t.Fatal(err)
	}
	got.Properties = map[string]string{"mutated": "by the caller"}
	got.LogIDs[0] = -1
	again, _ := a.LoadStream(ctx, md.ID)
	if len(again.Properties) != 0 || again.LogIDs[0] != md.LogIDs[0] {
		t.Fatalf("a caller's change to a loaded stream reached the next load: %+v", again)
	}

	next, ok, err := b.ReplaceStreamProperties(ctx, md.ID, map[string]string{"k": "v"}, md.MetadataVersion)
	if err != nil || !ok {
		t.Fatalf("replace on the other catalog: %v %v", ok, err)
	}
	cur, err := a.LoadStream(ctx, md.ID)
	if err != nil || !maps.Equal(cur.Properties, map[string]string{"k": "v"}) || cur.MetadataVersion != next.MetadataVersion {
		t.Fatalf("after another catalog's write: %+v, %v", cur, err)
	}
	s, err := a.Stream(ctx, md.ID)
	if err != nil || s.Metadata().Properties["k"] != "v" {
		t.Fatalf("stream handle after another catalog's write: %v", err)
	}

	if err := b.DropStream(ctx, md.ID, false); err != nil {
		t.Fatal(err)
	}
	_, err = a.LoadStream(ctx, md.ID)
	wantErr(t, err, lakestream.ErrNoSuchStream)
	_, err = a.Stream(ctx, md.ID)
	wantErr(t, err, lakestream.ErrNoSuchStream)
}

func TestRecordCacheBounds(t *testing.T) {
	var rc recordCache
	r := &streamRecord{}
	for i := range 3 * recordCacheMax {
		rc.put(fmt.Sprint("k", i), 1, r, 100)
		if len(rc.m) > recordCacheMax || rc.bytes > recordCacheBytes {
			t.Fatalf("after %d puts: %d entries, %d bytes", i+1, len(rc.m), rc.bytes)
		}
	}
	big := recordCacheBytes / 3
	for i := range 10 {
		rc.put(fmt.Sprint("big", i), 1, r, big)
		if rc.bytes > recordCacheBytes {
			t.Fatalf("after %d big puts: %d bytes", i+1, rc.bytes)
		}
		if rc.get(fmt.Sprint("big", i), 1) != r {
			t.Fatalf("the record just put is not there")
		}
	}
	rc.put("huge", 1, r, recordCacheBytes+1)
	if rc.get("huge", 1) != nil {
		t.Fatal("a record larger than the whole cache was kept")
	}
	// Putting a key again replaces its size, not adds to it.
	rc = recordCache{}
	rc.put("k", 1, r, 1000)
	rc.put("k", 2, r, 10)
	if rc.bytes != 10 || rc.get("k", 1) != nil || rc.get("k", 2) != r {
		t.Fatalf("re-put: %d bytes, entries %v", rc.bytes, rc.m)
	}
}

// testListStreamPoliciesMatchesResolve: the one-read listing answers,
// stream by stream, what LoadStream and ResolveMaterialization answer —
// a stream's own policy, its namespace's, the default — after each change.
func testListStreamPoliciesMatchesResolve(t *testing.T, mk storeFactory) {
	ctx := context.Background()
	c := newFixture(t, mk).cat
	mustNS(t, c, "t/ns")
	for _, name := range []string{"t/ns/b", "t/ns/a", "t/ns/c"} {
		mustStream(t, c, name, 0)
	}
	check := func(what string) {
		t.Helper()
		mds, pols, err := c.ListStreamPolicies(ctx, "t/ns")
		if err != nil {
			t.Fatal(err)
		}
		if len(mds) != 3 || len(pols) != 3 {
			t.Fatalf("%s: %d streams, %d policies", what, len(mds), len(pols))
		}
		for i, md := range mds {
			if want := []string{"a", "b", "c"}[i]; md.ID.Name != want {
				t.Fatalf("%s: stream %d is %s, want %s", what, i, md.ID, want)
			}
			one, err := c.LoadStream(ctx, md.ID)
			if err != nil {
				t.Fatal(err)
			}
			p, err := c.ResolveMaterialization(ctx, md.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(md, one) || !reflect.DeepEqual(pols[i], p) {
				t.Fatalf("%s: %s listed %+v %+v, loaded %+v %+v", what, md.ID, md, pols[i], one, p)
			}
		}
	}
	check("no policies")
	if err := c.SetDefaultMaterialization(ctx, &lakestream.TableMaterializationPolicy{Enabled: ptrTo(true), Compression: ptrTo("zstd")}); err != nil {
		t.Fatal(err)
	}
	check("a default")
	if err := c.SetNamespaceMaterialization(ctx, "t/ns", &lakestream.TableMaterializationPolicy{Catalogs: []string{"lake"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.SetStreamMaterialization(ctx, lakestream.MustParseStreamID("t/ns/b"), &lakestream.TableMaterializationPolicy{Enabled: ptrTo(false)}); err != nil {
		t.Fatal(err)
	}
	check("namespace and stream policies")
	_, _, err := c.ListStreamPolicies(ctx, "t/none")
	wantErr(t, err, lakestream.ErrNoSuchNamespace)
}
