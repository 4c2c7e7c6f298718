package engine

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/lakegate/lakegate/engine/wal"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
)

// TestFormat1DataReadable: data written by the format-1 commit (a head
// without rev, one version-1 index entry per flush, no commit records,
// per-object pending intents) is opened as it is: its entries read back,
// appends continue after its head, the fold leaves its index entries
// alone, and GC keeps its objects (docs/index-format.md, "Compatibility").
func TestFormat1DataReadable(t *testing.T) {
	env := newMemEnv(t)
	ctx := ctxT(t)
	k := keys{root: "/lakegate/"}
	const id = lakestream.LogID(4)

	// Two format-1 flushes of log 4: [0,3) and [3,5).
	var want [][]byte
	var next, bytesEnd int64
	var ops []meta.Op
	for f, sizes := range [][]int{{1, 2}, {2}} {
		b := wal.NewBuilder()
		for i, recs := range sizes {
			p := payload(id, len(want))
			want = append(want, p)
			if _, err := b.Add(int64(id), wal.Entry{Records: int32(recs), PublishTimeMs: int64(1000 + i), Payload: p}); err != nil {
				t.Fatal(err)
			}
		}
		data, refs := b.Build(2000)
		object := []string{"wal/old/0000000002000-00000001-aaaa", "wal/old/0000000002001-00000002-bbbb"}[f]
		if err := env.store.PutIfAbsent(ctx, object, data); err != nil {
			t.Fatal(err)
		}
		r := refs[0]
		bytesEnd += r.PayloadBytes
		ie := indexEntry{Kind: kindWAL, First: next, Records: int64(r.Records), Entries: int64(r.Entries), BytesEnd: bytesEnd,
			PayloadBytes: r.PayloadBytes, MinPublishMs: r.MinPublishTimeMs, MaxPublishMs: r.MaxPublishTimeMs, WriteMs: 2000,
			Object: object, Offset: r.Offset, Length: r.Length, CRC: r.CRC}
		next += int64(r.Records)
		ops = append(ops, meta.Put(k.idx(id, ie.Last()), ie.Encode()))
	}
	ops = append(ops, meta.Put(k.head(id), []byte(`{"next":5,"first":0,"bytes":`+itoa(bytesEnd)+`}`)))
	if _, _, err := env.meta.Txn(ctx, nil, ops); err != nil {
		t.Fatal(err)
	}

	e := env.engine(t, Options{})
	l, err := e.Log(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := l.NextOffset(ctx); err != nil || n != 5 {
		t.Fatalf("next offset %d %v", n, err)
	}
	h, err := l.Append(ctx, 1, []byte("format 2"))
	if err != nil || h.Offset != 5 || h.CumulativeSize != bytesEnd+8 {
		t.Fatalf("append after format-1 data: %+v %v", h, err)
	}
	want = append(want, []byte("format 2"))
	if err := e.clog.foldNow(ctx); err != nil {
		t.Fatal(err)
	}
	fresh := env.engine(t, Options{})
	got, err := fresh.ReadEntries(ctx, id, 0, 100, 1<<20)
	if err != nil || len(got) != len(want) {
		t.Fatalf("read %d entries, %v", len(got), err)
	}
	for i := range want {
		if !bytes.Equal(got[i].Payload, want[i]) {
			t.Fatalf("entry %d: %q, want %q", i, got[i].Payload, want[i])
		}
	}
	st, err := fresh.CollectGarbage(ctx)
	if err != nil || st.Deleted != 0 {
		t.Fatalf("gc over format-1 objects: %+v %v", st, err)
	}
}

func itoa(v int64) string { return string(fmt.Appendf(nil, "%d", v)) }
