package engine

// The table port (port.go) from the engine's side, with a fake layer above:
// a JSON "table file" format, a fake decoder and a fake attachment. The
// real layer (tables/) is tested against it in its own package. Run:
//
//	go test -run TestPort ./engine/

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/lakegate/lakegate/engine/index"
	"github.com/lakegate/lakegate/engine/wal"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
	"github.com/lakegate/lakegate/objstore"
)

// jsonDecoder reads a "table file" that is a JSON array of entries.
type jsonDecoder struct{}

func (jsonDecoder) DecodeChunk(ctx context.Context, read ReadRange, c index.Entry) ([]wal.DecodedEntry, error) {
	data, err := read(ctx, 0, -1)
	if err != nil {
		return nil, err
	}
	var es []wal.DecodedEntry
	if err := json.Unmarshal(data, &es); err != nil {
		return nil, errors.Join(wal.ErrCorrupt, err)
	}
	return es, nil
}

// holdAttachment holds the objects listed (JSON array) under logs/<id>/hold.
var holdAttachment = Attachment{Name: "hold", Objects: func(v []byte) ([]string, error) {
	var objs []string
	return objs, json.Unmarshal(v, &objs)
}}

func TestPortReplaceChunksAndRead(t *testing.T) {
	env := newMemEnv(t)
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	opts := Options{Now: clock, Logger: quietLogger, ChunkDecoder: jsonDecoder{}, Attachments: []Attachment{holdAttachment}}
	e := env.engine(t, opts)
	ctx := ctxT(t)
	const id = 1
	var want []lakestream.EntryHeader
	for i := range 3 {
		h, err := e.Append(ctx, id, 1+i, payload(id, i))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, h)
		// One fold per append: one index entry per chunk (a fold of
		// several would make them one run).
		if err := e.clog.foldNow(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := e.Chunks(ctx, id, 0, 10)
	if err != nil || len(cs) != 3 {
		t.Fatalf("Chunks: %d, %v", len(cs), err)
	}
	// The first two chunks become one "table file".
	var decoded []wal.DecodedEntry
	for i, c := range cs[:2] {
		es, err := e.ChunkEntries(ctx, id, c.Entry)
		if err != nil || len(es) != 1 || es[0].EntryHeader != want[i] || !bytes.Equal(es[0].Payload, payload(id, i)) {
			t.Fatalf("ChunkEntries(%d): %+v, %v", i, es, err)
		}
		decoded = append(decoded, wal.DecodedEntry{Records: es[0].Records, PublishTimeMs: es[0].PublishTimeMs, Payload: es[0].Payload, PayloadSize: len(es[0].Payload)})
	}
	data, _ := json.Marshal(decoded)
	const file = "tables/t/data/f1.json"
	intents, err := e.PutPending(ctx, []PendingObject{{Key: file, Data: data}})
	if err != nil || len(intents) != 1 {
		t.Fatal(intents, err)
	}
	ne := index.Entry{Kind: index.KindParquet, First: 0, Records: cs[1].End(), Entries: 2, BytesEnd: cs[1].BytesEnd,
		PayloadBytes: cs[0].PayloadBytes + cs[1].PayloadBytes, MinPublishMs: cs[0].MinPublishMs, MaxPublishMs: cs[1].MaxPublishMs,
		WriteMs: cs[1].WriteMs, Object: file, Length: int64(len(data))}
	marker := e.AttachmentKey(id, "hold")
	n, err := e.ReplaceChunks(ctx, id, 0, cs[1].End(), []NewChunk{{Entry: ne}}, nil, []meta.Op{meta.Put(marker, []byte(`["`+file+`"]`))})
	if err != nil || n != 2 {
		t.Fatalf("ReplaceChunks: %d, %v", n, err)
	}
	// A stale compare of the caller's: nothing is applied (the range, now a
	// table file, is no longer tiled by WAL chunks either).
	if _, err := e.ReplaceChunks(ctx, id, 0, cs[1].End(), []NewChunk{{Entry: ne}}, []meta.Cmp{{Key: marker, ModRevision: 1}}, nil); !errors.Is(err, lakestream.ErrConflict) {
		t.Fatalf("stale ReplaceChunks: %v", err)
	}

	// A cold engine with the decoder reads the log unchanged, across the
	// file and the WAL; one without fails rather than guess.
	check := func(e *Engine) error {
		got, err := e.ReadEntries(ctx, id, 0, 100, 1<<20)
		if err != nil {
			return err
		}
		for i, g := range got {
			if g.EntryHeader != want[i] || !bytes.Equal(g.Payload, payload(id, i)) {
				t.Fatalf("entry %d: %+v, want %+v", i, g.EntryHeader, want[i])
			}
		}
		if len(got) != 3 {
			t.Fatalf("read %d entries", len(got))
		}
		return nil
	}
	if err := check(env.engine(t, opts)); err != nil {
		t.Fatal(err)
	}
	if err := check(env.engine(t, Options{Logger: quietLogger})); err == nil {
		t.Fatal("an engine without a ChunkDecoder read a table file")
	}

	// GC: the file's intent dies; the attachment (and the index) hold it.
	// An unreferenced file under a dead intent is an orphan.
	const orphan = "tables/t/data/orphan.json"
	if _, err := e.PutPending(ctx, []PendingObject{{Key: orphan, Data: []byte("[]")}}); err != nil {
		t.Fatal(err)
	}
	e.DropIntent(ctx, intents[0])
	if _, err := e.PutPending(ctx, []PendingObject{{Key: file + ".2", Data: []byte("[]")}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := env.meta.Txn(ctx, nil, []meta.Op{meta.Put(marker, []byte(`["`+file+`","`+file+`.2"]`))}); err != nil {
		t.Fatal(err)
	}
	gcOpts := opts
	gcOpts.Now = func() time.Time { return now.Add(time.Hour) } // every intent is dead
	st, err := env.engine(t, gcOpts).CollectGarbage(ctx)
	if err != nil || st.TableOrphans != 1 {
		t.Fatalf("GC: %+v, %v", st, err)
	}
	for key, kept := range map[string]bool{file: true, file + ".2": true, orphan: false} {
		_, err := env.store.Get(ctx, key)
		if got := err == nil; got != kept || (err != nil && !errors.Is(err, objstore.ErrNotFound)) {
			t.Fatalf("%s kept %v (%v), want %v", key, got, err, kept)
		}
	}
}

// TestPortReplaceTableChunks: two table files of a log become one (the
// bin-packing of the tables layer); reads stay the same, a stale revision
// or a bad tiling applies nothing.
func TestPortReplaceTableChunks(t *testing.T) {
	env := newMemEnv(t)
	opts := Options{Logger: quietLogger, ChunkDecoder: jsonDecoder{}}
	e := env.engine(t, opts)
	ctx := ctxT(t)
	const id = 1
	for i := range 4 {
		if _, err := e.Append(ctx, id, 1+i, payload(id, i)); err != nil {
			t.Fatal(err)
		}
	}
	// The chunks in the index (ReplaceChunks replaces folded chunks only).
	if err := e.clog.foldNow(ctx); err != nil {
		t.Fatal(err)
	}
	want, err := e.ReadEntries(ctx, id, 0, 100, 1<<20)
	if err != nil || len(want) != 4 {
		t.Fatal(len(want), err)
	}
	// fileOf stores entries [a, b) of want as one "table file" and returns its index entry.
	fileOf := func(key string, a, b int) index.Entry {
		var des []wal.DecodedEntry
		ie := index.Entry{Kind: index.KindParquet, First: want[a].Offset, Entries: int64(b - a), BytesEnd: want[b-1].CumulativeSize, Object: key}
		for _, w := range want[a:b] {
			des = append(des, wal.DecodedEntry{Records: w.Records, PublishTimeMs: w.PublishTimeMs, Payload: w.Payload, PayloadSize: len(w.Payload)})
			ie.Records += int64(w.Records)
			ie.PayloadBytes += int64(len(w.Payload))
			ie.MaxPublishMs = max(ie.MaxPublishMs, w.PublishTimeMs)
			ie.WriteMs = max(ie.WriteMs, w.WriteTimeMs)
		}
		ie.MinPublishMs = want[a].PublishTimeMs
		data, _ := json.Marshal(des)
		if err := env.store.PutIfAbsent(ctx, key, data); err != nil {
			t.Fatal(err)
		}
		ie.Length = int64(len(data))
		return ie
	}
	// Two small files: [0,2) and [2,4) of the entries, by the WAL's ReplaceChunks.
	f1, f2 := fileOf("tables/t/data/a.json", 0, 2), fileOf("tables/t/data/b.json", 2, 4)
	if n, err := e.ReplaceChunks(ctx, id, f1.First, f2.End(), []NewChunk{{Entry: f1}, {Entry: f2}}, nil, nil); err != nil || n != 4 {
		t.Fatalf("ReplaceChunks: %d, %v", n, err)
	}
	olds, err := e.Chunks(ctx, id, 0, 10)
	if err != nil || len(olds) != 2 {
		t.Fatal(olds, err)
	}
	merged := fileOf("tables/t/data/ab.json", 0, 4)
	news := []NewChunk{{Entry: merged}}

	bad := merged
	bad.Records--
	for name, err := range map[string]error{
		"not tiled":   e.ReplaceTableChunks(ctx, id, olds, []NewChunk{{Entry: bad}}, nil, nil),
		"gap in olds": e.ReplaceTableChunks(ctx, id, []Chunk{olds[1], olds[0]}, news, nil, nil),
	} {
		if !errors.Is(err, lakestream.ErrInvalidArgument) {
			t.Fatalf("%s: %v", name, err)
		}
	}
	stale := slices.Clone(olds)
	stale[0].Revision--
	if err := e.ReplaceTableChunks(ctx, id, stale, news, nil, nil); !errors.Is(err, lakestream.ErrConflict) {
		t.Fatalf("stale revision: %v", err)
	}
	if err := e.ReplaceTableChunks(ctx, id, olds, news, nil, nil); err != nil {
		t.Fatal(err)
	}
	after, err := e.Chunks(ctx, id, 0, 10)
	if err != nil || len(after) != 1 || after[0].Object != merged.Object {
		t.Fatalf("index after: %+v, %v", after, err)
	}
	got, err := env.engine(t, opts).ReadEntries(ctx, id, 0, 100, 1<<20)
	if err != nil || len(got) != len(want) {
		t.Fatal(len(got), err)
	}
	for i := range want {
		// A table file has one write time (its entry's): the newest of its entries'.
		got[i].WriteTimeMs = want[i].WriteTimeMs
		if got[i].EntryHeader != want[i].EntryHeader || !bytes.Equal(got[i].Payload, want[i].Payload) {
			t.Fatalf("entry %d: %+v, want %+v", i, got[i].EntryHeader, want[i].EntryHeader)
		}
	}
	// The replaced files are the layer's: still there.
	for _, k := range []string{f1.Object, f2.Object} {
		if _, err := env.store.Get(ctx, k); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
	}
}
