package engine

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/lakegate/lakegate/engine/wal"
	"github.com/lakegate/lakegate/lakestream"
)

// The writer caches each chunk of a flush from the appended entries, not by
// decoding the object it stored: every cached chunk must be what a reader
// decoding that object gets.
func TestWriterCachesWhatItStored(t *testing.T) {
	env := newMemEnv(t)
	e := env.engine(t, Options{})
	ctx := ctxT(t)
	done := make(chan error, 300)
	for i := range 300 {
		id := lakestream.LogID(1 + i%3)
		l, err := e.Log(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		p := bytes.Repeat(fmt.Appendf(nil, "%d/%d;", id, i), i%7)
		if err := l.AppendAsync(ctx, 1+i%4, p, func(_ lakestream.EntryHeader, err error) { done <- err }, lakestream.WithPublishTime(int64(5000+i))); err != nil {
			t.Fatal(err)
		}
	}
	for range 300 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	e.cache.mu.Lock()
	items := map[chunkLoc]*loadedChunk{}
	for loc, el := range e.cache.mu.items {
		items[loc] = el.Value.(*cacheItem).chunk
	}
	e.cache.mu.Unlock()
	if len(items) < 3 {
		t.Fatalf("%d chunks cached after appends to 3 logs", len(items))
	}
	entries := 0
	for loc, got := range items {
		obj, err := env.store.Get(ctx, loc.object)
		if err != nil {
			t.Fatal(err)
		}
		refs := objectRefs(t, obj)
		ref, ok := refs[loc.offset]
		if !ok {
			t.Fatalf("%s: no chunk at offset %d", loc.object, loc.offset)
		}
		want, err := chunkFromObject(obj, ref)
		if err != nil {
			t.Fatal(err)
		}
		if got.size != want.size+int64(len(want.entries))*cachedEntryOverhead || got.writeMs != want.writeMs || len(got.entries) != len(want.entries) {
			t.Fatalf("%v: cached size %d writeMs %d entries %d, decoded %d (+%d per entry) %d %d", loc, got.size, got.writeMs, len(got.entries), want.size, cachedEntryOverhead, want.writeMs, len(want.entries))
		}
		for i, g := range got.entries {
			w := want.entries[i]
			if g.Records != w.Records || g.PublishTimeMs != w.PublishTimeMs || g.PayloadSize != w.PayloadSize || !bytes.Equal(g.Payload, w.Payload) || cap(g.Payload) != len(g.Payload) {
				t.Fatalf("%v entry %d: cached %+v, decoded %+v", loc, i, g, w)
			}
		}
		entries += len(got.entries)
	}
	if entries != 300 {
		t.Fatalf("%d entries cached, want 300", entries)
	}
}

// objectRefs decodes a WAL object's chunk directory, by chunk offset.
func objectRefs(t *testing.T, obj []byte) map[int64]wal.ChunkRef {
	t.Helper()
	o, err := wal.DecodeObject(obj)
	if err != nil {
		t.Fatal(err)
	}
	refs := map[int64]wal.ChunkRef{}
	for _, r := range o.Chunks {
		refs[r.Offset] = r
	}
	return refs
}
