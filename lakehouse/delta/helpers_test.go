package delta

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/lakegate/lakegate/objstore"
)

// The test table: id long, name string, ts timestamp, part string
// (partition column; not stored in the data files, as Delta requires).
var (
	dataArrowSchema = arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: false},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
	}, nil)
	testSchema = Schema{Fields: []Field{
		{Name: "id", Type: Primitive(TypeLong), Nullable: false},
		{Name: "name", Type: Primitive(TypeString), Nullable: true},
		{Name: "ts", Type: Primitive(TypeTimestamp), Nullable: true},
		{Name: "part", Type: Primitive(TypeString), Nullable: true},
	}}
	// baseTime is the ts of id 0; id i has ts baseTime + i ms + 1 µs.
	baseTime = time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
)

// fixedClock is a deterministic clock for WithClock.
func fixedClock() func() time.Time {
	return func() time.Time { return baseTime }
}

func ctxT(t *testing.T) context.Context { return t.Context() }

func openStore(t *testing.T, kind string) objstore.Store {
	t.Helper()
	var url string
	switch kind {
	case "mem":
		url = "mem://"
	case "file":
		url = "file://" + t.TempDir() + "?fsync=false"
	default:
		t.Fatalf("unknown store %q", kind)
	}
	s, err := objstore.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// encodeDataFile returns a zstd Parquet file of n rows with ids from first;
// extra, when set, adds a nullable string column "extra" (schema evolution).
func encodeDataFile(t testing.TB, first int64, n int, extra bool) []byte {
	t.Helper()
	sc := dataArrowSchema
	if extra {
		sc = arrow.NewSchema(append(sc.Fields(), arrow.Field{Name: "extra", Type: arrow.BinaryTypes.String, Nullable: true}), nil)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for i := 0; i < n; i++ {
		id := first + int64(i)
		b.Field(0).(*array.Int64Builder).Append(id)
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("name-%d", id))
		ts := baseTime.Add(time.Duration(id)*time.Millisecond + time.Microsecond)
		b.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(ts.UnixMicro()))
		if extra {
			b.Field(3).(*array.StringBuilder).Append(fmt.Sprintf("x%d", id))
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd))
	w, err := pqarrow.NewFileWriter(sc, &buf, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// putDataFile writes a data file under root/part=<part>/ and returns its add.
func putDataFile(t testing.TB, store objstore.Store, root, part, name string, first int64, n int, extra bool) AddFile {
	t.Helper()
	data := encodeDataFile(t, first, n, extra)
	rel := fmt.Sprintf("part=%s/%s.parquet", part, name)
	if err := store.PutIfAbsent(context.Background(), root+"/"+rel, data); err != nil {
		t.Fatal(err)
	}
	st, err := StatsFromParquet(data)
	if err != nil {
		t.Fatal(err)
	}
	return AddFile{
		Path:             rel,
		PartitionValues:  map[string]string{"part": part},
		Size:             int64(len(data)),
		ModificationTime: baseTime.UnixMilli(),
		Stats:            st,
	}
}

func mustOpen(t testing.TB, store objstore.Store, root string, opts ...Option) *Table {
	t.Helper()
	tb, err := Open(context.Background(), store, root, append([]Option{WithClock(fixedClock())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func mustCreate(t testing.TB, tb *Table) {
	t.Helper()
	if err := tb.Create(context.Background(), testSchema, []string{"part"}, map[string]string{"delta.appendOnly": "true"}); err != nil {
		t.Fatal(err)
	}
}

func mustSnapshot(t testing.TB, tb *Table) Snapshot {
	t.Helper()
	s, err := tb.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustCommit(t testing.TB, tb *Table, req CommitRequest) int64 {
	t.Helper()
	v, skipped, err := tb.Commit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if skipped {
		t.Fatalf("commit %+v skipped", req)
	}
	return v
}
