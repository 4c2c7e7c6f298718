package iceberg

// Tests of the Iceberg commit (docs/iceberg.md): Parquet files written by
// lakehouse.WriteParquet into a file:// store are committed through an
// embedded sqlite catalog and scanned back with iceberg-go.
// Run: go test -p 1 -count=1 ./lakehouse/iceberg/

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/lakegate/lakegate/lakehouse"
)

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// testEnv is a file:// store directory and a sqlite catalog file.
type testEnv struct {
	dir string // the store's directory
	db  string // the sqlite file
}

func newEnv(t testing.TB) testEnv {
	d := t.TempDir()
	return testEnv{dir: filepath.Join(d, "objects"), db: filepath.Join(d, "iceberg", "catalog.db")}
}

func (e testEnv) open(t testing.TB) *Catalog {
	t.Helper()
	c, err := Open(ctxT(t), CatalogConfig{URI: e.db, StoreURL: "file://" + e.dir + "?fsync=false"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

const root = "tables/public/default/orders"

var ident = []string{"public", "default", "orders"}

// writeFile writes a Parquet file of n rows at offsets [first, first+n) of
// topic partition part, published at pubMs, and returns its path relative
// to the table root and the rows' payloads.
func writeFile(t testing.TB, e testEnv, part int32, first int64, n int, pubMs int64) (string, [][]byte) {
	t.Helper()
	var msgs []lakehouse.Message
	var payloads [][]byte
	for i := range n {
		off := first + int64(i)
		p := fmt.Appendf(nil, "payload p%d o%d %s", part, off, bytes.Repeat([]byte{byte(off)}, int(off%7)))
		payloads = append(payloads, p)
		msgs = append(msgs, lakehouse.Message{
			Offset: off, Partition: part, LedgerID: 9, EntryID: off, BatchIndex: -1, BatchSize: 1,
			Payload: p, PublishTimeMs: pubMs, ProducerName: "prod", SequenceID: off,
			EntryMetadata: []byte{1, 2, 3},
		})
	}
	rb := lakehouse.NewRecordBuilder(nil, nil, lakehouse.RecordLimits{})
	defer rb.Release()
	recs := rb.AppendAll(msgs)
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	var buf bytes.Buffer
	if _, err := lakehouse.WriteParquet(&buf, rb.Schema(), recs, lakehouse.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	rel := fmt.Sprintf("data/%s=%d/%s=%s/f-%d-%d.parquet", lakehouse.ColPartition, part,
		lakehouse.ColPublishDate, lakehouse.PublishDate(pubMs), part, first)
	full := filepath.Join(e.dir, filepath.FromSlash(root+"/"+rel))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return rel, payloads
}

// scanned is what a full scan of the table returns.
type scanned struct {
	rows    int64
	bytes   int64
	offsets map[[2]int64]int // (partition, offset) → times seen
	sum     [32]byte         // sha256 over payloads in (partition, offset) order
}

// scan reads the whole table back through iceberg-go.
func scan(t testing.TB, c *Catalog) scanned {
	t.Helper()
	ctx := ctxT(t)
	tbl, err := c.Catalog().LoadTable(ctx, table.Identifier(ident))
	if err != nil {
		t.Fatal(err)
	}
	_, recs, err := tbl.Scan().ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := scanned{offsets: map[[2]int64]int{}}
	payload := map[[2]int64][]byte{}
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		cols := map[string]arrow.Array{}
		for i, f := range rec.Schema().Fields() {
			cols[f.Name] = rec.Column(i)
		}
		parts := cols[lakehouse.ColPartition].(*array.Int32)
		offs := cols[lakehouse.ColOffset].(*array.Int64)
		pays := cols[lakehouse.ColPayload].(*array.Binary)
		for i := range int(rec.NumRows()) {
			k := [2]int64{int64(parts.Value(i)), offs.Value(i)}
			s.offsets[k]++
			payload[k] = bytes.Clone(pays.Value(i))
			s.rows++
			s.bytes += int64(len(pays.Value(i)))
		}
		rec.Release()
	}
	h := sha256.New()
	for p := int64(-1); p < 4; p++ {
		for o := int64(0); o < 1000; o++ {
			h.Write(payload[[2]int64{p, o}])
		}
	}
	copy(s.sum[:], h.Sum(nil))
	return s
}

func sumOf(payloads map[[2]int64][]byte) (rows, n int64, sum [32]byte) {
	h := sha256.New()
	for p := int64(-1); p < 4; p++ {
		for o := int64(0); o < 1000; o++ {
			if b, ok := payloads[[2]int64{p, o}]; ok {
				rows++
				n += int64(len(b))
				h.Write(b)
			}
		}
	}
	copy(sum[:], h.Sum(nil))
	return rows, n, sum
}

func checkScan(t testing.TB, c *Catalog, want map[[2]int64][]byte) {
	t.Helper()
	got := scan(t, c)
	rows, n, sum := sumOf(want)
	if got.rows != rows || got.bytes != n || got.sum != sum {
		t.Fatalf("scan: %d rows, %d payload bytes, sum %x; want %d, %d, %x", got.rows, got.bytes, got.sum[:4], rows, n, sum[:4])
	}
	for k, v := range got.offsets {
		if v != 1 {
			t.Fatalf("partition %d offset %d seen %d times", k[0], k[1], v)
		}
	}
}

func TestCommitScanIdempotent(t *testing.T) {
	env := newEnv(t)
	c := env.open(t)
	ctx := ctxT(t)
	day := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC).UnixMilli()
	want := map[[2]int64][]byte{}
	add := func(part int32, first int64, n int, pub int64) string {
		rel, ps := writeFile(t, env, part, first, n, pub)
		for i, p := range ps {
			want[[2]int64{int64(part), first + int64(i)}] = p
		}
		return rel
	}
	// Log 7 = partition 3: a range across midnight (two files).
	f1 := add(3, 0, 20, day-11*3600_000)
	f2 := add(3, 20, 15, day)
	req := CommitRequest{Ident: ident, Root: root, LogID: 7, End: 35, Files: []string{f1, f2}}
	ok, err := c.Commit(ctx, req)
	if err != nil || !ok {
		t.Fatalf("commit: %v, %v", ok, err)
	}
	checkScan(t, c, want)

	// Re-committing the range (a crash resume) is a no-op, also from a
	// reopened catalog.
	c.Close()
	c = env.open(t)
	if ok, err := c.Commit(ctx, req); err != nil || ok {
		t.Fatalf("re-commit: %v, %v", ok, err)
	}
	checkScan(t, c, want)

	// The next range, and another log of the same table.
	f3 := add(3, 35, 10, day+60_000)
	if ok, err := c.Commit(ctx, CommitRequest{Ident: ident, Root: root, LogID: 7, End: 45, Files: []string{f3}}); err != nil || !ok {
		t.Fatalf("commit 2: %v, %v", ok, err)
	}
	f4 := add(0, 0, 12, day+60_000)
	if ok, err := c.Commit(ctx, CommitRequest{Ident: ident, Root: root, LogID: 8, End: 12, Files: []string{f4}}); err != nil || !ok {
		t.Fatalf("commit log 8: %v, %v", ok, err)
	}
	// An older range of log 7 is a no-op too.
	if ok, err := c.Commit(ctx, req); err != nil || ok {
		t.Fatalf("old re-commit: %v, %v", ok, err)
	}
	checkScan(t, c, want)
	for id, end := range map[int64]int64{7: 45, 8: 12, 99: -1} {
		if got, err := c.RecordedEnd(ctx, ident, id); err != nil || got != end {
			t.Fatalf("log %d end %d, %v; want %d", id, got, err, end)
		}
	}

	// The table: location beside _delta_log and data/, our field ids, the
	// partition spec, the partition values AddFiles inferred.
	tbl, err := c.Catalog().LoadTable(ctx, table.Identifier(ident))
	if err != nil {
		t.Fatal(err)
	}
	if want := "file://" + filepath.ToSlash(env.dir) + "/" + root; tbl.Location() != want {
		t.Fatalf("location %s, want %s", tbl.Location(), want)
	}
	if _, err := os.Stat(filepath.Join(env.dir, filepath.FromSlash(root), "metadata")); err != nil {
		t.Fatal(err)
	}
	sc := tbl.Schema()
	for name, id := range map[string]int{lakehouse.ColOffset: 1, lakehouse.ColPublishTime: 14, lakehouse.ColEntryMetadata: 30, lakehouse.ColEntryPayload: 32} {
		if f, ok := sc.FindFieldByName(name); !ok || f.ID != id {
			t.Fatalf("field %s: id %d, want %d", name, f.ID, id)
		}
	}
	if f, ok := sc.FindFieldByName(lakehouse.ColProperties + ".key"); !ok || f.ID != lakehouse.PropertiesKeyFieldID {
		t.Fatalf("properties key id %d", f.ID)
	}
	if f, _ := sc.FindFieldByName(lakehouse.ColPublishTime); f.Type.String() != "timestamptz" {
		t.Fatalf("publish time type %s", f.Type)
	}
	spec := tbl.Spec()
	if spec.NumFields() != 2 || spec.Field(0).Transform.String() != "identity" || spec.Field(1).Transform.String() != "day" {
		t.Fatalf("spec %s", spec)
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nfiles := len(tasks)
	for _, task := range tasks {
		if pv := task.File.Partition(); len(pv) != 2 || pv[1000] == nil || pv[1001] == nil {
			t.Fatalf("file %s partition %v", task.File.FilePath(), pv)
		}
	}
	if nfiles != 4 {
		t.Fatalf("%d data files, want 4", nfiles)
	}
	// ToArrowTable (one Arrow table over all batches) works on the whole
	// schema, the __properties map included.
	at, err := tbl.Scan().ToArrowTable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if at.NumRows() != int64(len(want)) {
		t.Fatalf("ToArrowTable: %d rows, want %d", at.NumRows(), len(want))
	}
	at.Release()
	if s := tbl.CurrentSnapshot().Summary; s == nil || s.Properties["lakegate.log"] != "8" || s.Properties["lakegate.end"] != "12" {
		t.Fatalf("snapshot summary %+v", s)
	}
}

// TestCommitMore: one commit records the ends of several logs (More) with
// all their files in one snapshot; re-committed it is left alone, a
// commit whose logs are partly recorded fails ErrTableMismatch and one
// naming a log twice ErrInvalid, neither adding a file.
func TestCommitMore(t *testing.T) {
	env := newEnv(t)
	c := env.open(t)
	ctx := ctxT(t)
	day := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC).UnixMilli()
	want := map[[2]int64][]byte{}
	add := func(part int32, first int64, n int) string {
		rel, ps := writeFile(t, env, part, first, n, day)
		for i, p := range ps {
			want[[2]int64{int64(part), first + int64(i)}] = p
		}
		return rel
	}
	f0, f1, f2 := add(0, 0, 5), add(1, 0, 7), add(2, 0, 3)
	req := CommitRequest{Ident: ident, Root: root, LogID: 10, End: 5, More: []LogEnd{{LogID: 11, End: 7}, {LogID: 12, End: 3}},
		Files: []string{f0, f1, f2}}
	if ok, err := c.Commit(ctx, req); err != nil || !ok {
		t.Fatalf("commit: %v, %v", ok, err)
	}
	checkScan(t, c, want)
	tbl, err := c.Catalog().LoadTable(ctx, table.Identifier(ident))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(tbl.Metadata().Snapshots()); n != 1 {
		t.Fatalf("%d snapshots, want 1", n)
	}
	if ok, err := c.Commit(ctx, req); err != nil || ok {
		t.Fatalf("re-commit: %v, %v", ok, err)
	}
	f3 := add(3, 0, 4) // never committed below
	for i := range 4 {
		delete(want, [2]int64{3, int64(i)})
	}
	partly := CommitRequest{Ident: ident, Root: root, LogID: 13, End: 4, More: []LogEnd{{LogID: 11, End: 7}}, Files: []string{f3}}
	if _, err := c.Commit(ctx, partly); !errors.Is(err, ErrTableMismatch) {
		t.Fatalf("partly recorded: %v, want ErrTableMismatch", err)
	}
	twice := CommitRequest{Ident: ident, Root: root, LogID: 13, End: 4, More: []LogEnd{{LogID: 13, End: 5}}, Files: []string{f3}}
	if _, err := c.Commit(ctx, twice); !errors.Is(err, ErrInvalid) {
		t.Fatalf("log twice: %v, want ErrInvalid", err)
	}
	checkScan(t, c, want)
	for id, end := range map[int64]int64{10: 5, 11: 7, 12: 3, 13: -1} {
		if got, err := c.RecordedEnd(ctx, ident, id); err != nil || got != end {
			t.Fatalf("log %d end %d, %v; want %d", id, got, err, end)
		}
	}
}

func TestCommitConcurrent(t *testing.T) {
	env := newEnv(t)
	cats := []*Catalog{env.open(t), env.open(t)} // two nodes sharing the catalog file
	ctx := ctxT(t)
	day := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC).UnixMilli()
	want := map[[2]int64][]byte{}
	type rng struct {
		log   int64
		end   int64
		files []string
	}
	// Logs 1 and 2 (partitions 1, 2), five ranges each.
	var ranges [][]rng
	for part := int32(1); part <= 2; part++ {
		var rs []rng
		for i := range 5 {
			first := int64(i * 10)
			rel, ps := writeFile(t, env, part, first, 10, day)
			for j, p := range ps {
				want[[2]int64{int64(part), first + int64(j)}] = p
			}
			rs = append(rs, rng{int64(part), first + 10, []string{rel}})
		}
		ranges = append(ranges, rs)
	}
	// Both nodes commit every range of both logs, concurrently: each range
	// must land exactly once.
	var wg sync.WaitGroup
	var mu sync.Mutex
	committed := map[[2]int64]int{}
	errs := make(chan error, 8)
	for ci, c := range cats {
		for _, rs := range ranges {
			wg.Go(func() {
				for _, r := range rs {
					ok, err := c.Commit(ctx, CommitRequest{Ident: ident, Root: root, LogID: r.log, End: r.end, Files: r.files})
					if err != nil {
						errs <- fmt.Errorf("catalog %d log %d end %d: %w", ci, r.log, r.end, err)
						return
					}
					if ok {
						mu.Lock()
						committed[[2]int64{r.log, r.end}]++
						mu.Unlock()
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, rs := range ranges {
		for _, r := range rs {
			if n := committed[[2]int64{r.log, r.end}]; n != 1 {
				t.Fatalf("log %d range to %d committed %d times", r.log, r.end, n)
			}
		}
	}
	checkScan(t, cats[0], want)
	checkScan(t, cats[1], want)
}

func TestCommitErrors(t *testing.T) {
	env := newEnv(t)
	c := env.open(t)
	ctx := ctxT(t)
	for _, req := range []CommitRequest{
		{Ident: []string{"orders"}, Root: root, Files: []string{"data/x.parquet"}},
		{Ident: ident, Root: "/" + root, Files: []string{"data/x.parquet"}},
		{Ident: ident, Root: root},
		{Ident: ident, Root: root, Files: []string{"../x.parquet"}},
	} {
		if _, err := c.Commit(ctx, req); !errors.Is(err, ErrInvalid) {
			t.Fatalf("%+v: %v", req, err)
		}
	}
	// A missing file fails without recording the range.
	if _, err := c.Commit(ctx, CommitRequest{Ident: ident, Root: root, LogID: 1, End: 5, Files: []string{"data/missing.parquet"}}); err == nil {
		t.Fatal("missing file committed")
	}
	if end, err := c.RecordedEnd(ctx, ident, 1); err != nil || end != -1 {
		t.Fatalf("end %d, %v", end, err)
	}
	// The same identifier at another location is refused.
	rel, _ := writeFile(t, env, 0, 0, 3, time.Now().UnixMilli())
	if _, err := c.Commit(ctx, CommitRequest{Ident: ident, Root: root, LogID: 1, End: 3, Files: []string{rel}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Commit(ctx, CommitRequest{Ident: ident, Root: "tables/x/y/z", LogID: 1, End: 9, Files: []string{rel}}); !errors.Is(err, ErrTableMismatch) {
		t.Fatalf("other location: %v", err)
	}
	if _, err := Open(ctx, CatalogConfig{URI: env.db, StoreURL: "mem://"}); !errors.Is(err, ErrUnsupportedStore) {
		t.Fatalf("mem store: %v", err)
	}
	if _, err := Open(ctx, CatalogConfig{Kind: "hive", URI: env.db, StoreURL: "file://" + env.dir}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("kind: %v", err)
	}
}

func TestStoreLocation(t *testing.T) {
	cwd, _ := os.Getwd()
	for _, tc := range []struct {
		url, loc string
		props    map[string]string
	}{
		{"file:///var/lib/lg/objects?fsync=false", "file:///var/lib/lg/objects", nil},
		{"file:///var/lib/lg/objects/?prefix=a/b/", "file:///var/lib/lg/objects/a/b", nil},
		{"file://./objs", "file://" + filepath.ToSlash(filepath.Join(cwd, "objs")), nil},
		{"s3://bkt?region=us-east-1&endpoint=http://127.0.0.1:8333&use_path_style=true&prefix=p/",
			"s3://bkt/p", map[string]string{"s3.region": "us-east-1", "s3.endpoint": "http://127.0.0.1:8333", "s3.force-virtual-addressing": "false"}},
		{"gs://bkt", "gs://bkt", nil},
	} {
		loc, props, err := StoreLocation(tc.url)
		if err != nil || loc != tc.loc {
			t.Fatalf("%s: %s, %v; want %s", tc.url, loc, err, tc.loc)
		}
		for k, v := range tc.props {
			if props[k] != v {
				t.Fatalf("%s: props %v", tc.url, props)
			}
		}
	}
	for _, bad := range []string{"mem://", "ftp://x", "s3://", "file://host/x", "%zz"} {
		if _, _, err := StoreLocation(bad); err == nil {
			t.Fatalf("%s: no error", bad)
		}
	}
}

// TestCommitManyRanges: 130 ranges of one log stay readable and bounded:
// manifests are merged (commit.manifest-merge.enabled) and old metadata
// files deleted (write.metadata.delete-after-commit.enabled).
func TestCommitManyRanges(t *testing.T) {
	env := newEnv(t)
	c := env.open(t)
	ctx := ctxT(t)
	day := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC).UnixMilli()
	want := map[[2]int64][]byte{}
	const ranges = 130
	for i := range ranges {
		rel, ps := writeFile(t, env, 1, int64(i*2), 2, day)
		for j, p := range ps {
			want[[2]int64{1, int64(i*2 + j)}] = p
		}
		if ok, err := c.Commit(ctx, CommitRequest{Ident: ident, Root: root, LogID: 1, End: int64(i*2 + 2), Files: []string{rel}}); err != nil || !ok {
			t.Fatalf("range %d: %v, %v", i, ok, err)
		}
	}
	checkScan(t, c, want)
	tbl, err := c.Catalog().LoadTable(ctx, table.Identifier(ident))
	if err != nil {
		t.Fatal(err)
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mfs, err := tbl.CurrentSnapshot().Manifests(fs)
	if err != nil {
		t.Fatal(err)
	}
	metas, err := filepath.Glob(filepath.Join(env.dir, filepath.FromSlash(root), "metadata", "*.metadata.json"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d manifests, %d metadata files after %d commits", len(mfs), len(metas), ranges)
	if len(mfs) >= ranges/2 || len(metas) > 102 {
		t.Fatalf("%d manifests, %d metadata files after %d commits", len(mfs), len(metas), ranges)
	}
}

// TestMergeType: nested fields missing (by id) at any depth are added as
// optional; existing ones stay.
func TestMergeType(t *testing.T) {
	addr := func(extra ...ice.NestedField) *ice.StructType {
		return &ice.StructType{FieldList: append([]ice.NestedField{{ID: 2, Name: "city", Type: ice.PrimitiveTypes.String}}, extra...)}
	}
	zip := ice.NestedField{ID: 9, Name: "zip", Type: ice.PrimitiveTypes.Int32, Required: true}
	cur := &ice.ListType{ElementID: 1, Element: &ice.MapType{KeyID: 3, KeyType: ice.PrimitiveTypes.String, ValueID: 4, ValueType: addr()}}
	add := &ice.ListType{ElementID: 1, Element: &ice.MapType{KeyID: 3, KeyType: ice.PrimitiveTypes.String, ValueID: 4, ValueType: addr(zip)}}
	got, grown := mergeType(cur, add)
	if !grown {
		t.Fatal("nothing added")
	}
	st := got.(*ice.ListType).Element.(*ice.MapType).ValueType.(*ice.StructType)
	if len(st.FieldList) != 2 || st.FieldList[1].ID != 9 || st.FieldList[1].Required {
		t.Fatalf("merged %s", got)
	}
	if len(addr().FieldList) != 1 || len(cur.Element.(*ice.MapType).ValueType.(*ice.StructType).FieldList) != 1 {
		t.Fatal("merge changed its input")
	}
	if _, grown := mergeType(add, cur); grown {
		t.Fatal("older type grew the newer")
	}
}
