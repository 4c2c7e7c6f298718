package wal

// Fuzz targets for the decoders (see the commands at the top of wal_test.go).
// Both check that decoding never panics, that every error wraps a sentinel,
// and that whatever decodes is canonical: rebuilding it with a Builder gives
// back exactly the input bytes.

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
)

// seedObjects returns valid objects of various shapes for the corpora.
func seedObjects(t testing.TB) [][]byte {
	tiny, _ := tinyObject()
	empty, _ := NewBuilder().Build(0)
	objs := [][]byte{tiny, empty}
	b := NewBuilder()
	for seed := range uint64(6) {
		rnd := rand.New(rand.NewPCG(seed, 0xf022))
		randomObject(t, rnd, b, 4, 12, 200)
		obj, _ := b.Build(rnd.Int64())
		objs = append(objs, obj)
	}
	return objs
}

func FuzzDecodeChunk(f *testing.F) {
	for _, obj := range seedObjects(f) {
		o, err := DecodeObject(obj)
		if err != nil {
			f.Fatal(err)
		}
		for _, r := range o.Chunks {
			raw := obj[r.Offset : r.Offset+r.Length]
			f.Add(raw)
			f.Add(raw[:ChunkPrefixLen(r.Entries)])
			f.Add(raw[:len(raw)/2])
			f.Add(raw[:len(raw)-1])
		}
	}
	f.Add([]byte{})
	f.Add([]byte(chunkMagic))

	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeChunk(b)
		if err != nil && !isSentinel(err) {
			t.Fatalf("DecodeChunk error wraps no sentinel: %v", err)
		}
		h, herr := DecodeChunkHeaders(b)
		if herr != nil && !isSentinel(herr) {
			t.Fatalf("DecodeChunkHeaders error wraps no sentinel: %v", herr)
		}
		if herr == nil {
			var payload int
			for _, e := range h.Entries {
				payload += e.PayloadSize
			}
			if payload < 1<<20 { // rebuild the prefix with zero payloads
				bl := NewBuilder()
				for _, e := range h.Entries {
					if _, err := bl.Add(h.Log, Entry{Records: e.Records, PublishTimeMs: e.PublishTimeMs, Payload: make([]byte, e.PayloadSize)}); err != nil {
						t.Fatalf("re-encoding an accepted input: %v", err)
					}
				}
				obj, refs := bl.Build(h.WriteTimeMs)
				pl := ChunkPrefixLen(refs[0].Entries)
				if !bytes.Equal(obj[refs[0].Offset:refs[0].Offset+pl], b[:pl]) {
					t.Fatalf("accepted chunk prefix is not canonical")
				}
			}
		}
		if err != nil {
			return
		}
		if herr != nil {
			t.Fatalf("DecodeChunk accepts what DecodeChunkHeaders rejects: %v", herr)
		}
		bl := NewBuilder()
		for _, e := range c.Entries {
			if _, err := bl.Add(c.Log, Entry{Records: e.Records, PublishTimeMs: e.PublishTimeMs, Payload: e.Payload}); err != nil {
				t.Fatalf("re-encoding an accepted input: %v", err)
			}
		}
		obj, refs := bl.Build(c.WriteTimeMs)
		r := refs[0]
		if !bytes.Equal(obj[r.Offset:r.Offset+r.Length], b) {
			t.Fatalf("accepted chunk is not canonical")
		}
		if _, err := r.Decode(b); err != nil {
			t.Fatalf("ChunkRef.Decode of an accepted chunk: %v", err)
		}
	})
}

func FuzzDecodeObject(f *testing.F) {
	for _, obj := range seedObjects(f) {
		f.Add(obj)
		f.Add(obj[:len(obj)-1])
		f.Add(obj[:len(obj)/2])
		f.Add(obj[:min(len(obj), 28)])
	}
	f.Add([]byte{})
	f.Add([]byte(objectMagic))

	f.Fuzz(func(t *testing.T, b []byte) {
		dir, derr := DecodeObjectDirectory(b)
		if derr != nil && !isSentinel(derr) {
			t.Fatalf("DecodeObjectDirectory error wraps no sentinel: %v", derr)
		}
		o, err := DecodeObject(b)
		if err != nil && !isSentinel(err) {
			t.Fatalf("DecodeObject error wraps no sentinel: %v", err)
		}
		for i := -1; i <= min(len(dir.Chunks), 8); i++ {
			c, cerr := ObjectChunk(b, i)
			if err == nil && i >= 0 && i < len(o.Chunks) && (cerr != nil || c.Log != o.Chunks[i].Log) {
				t.Fatalf("ObjectChunk(%d) of a valid object: %v", i, cerr)
			}
		}
		if err != nil {
			return
		}
		if derr != nil || !slices.Equal(dir.Chunks, o.Chunks) || dir.Size != int64(len(b)) {
			t.Fatalf("DecodeObjectDirectory disagrees with DecodeObject: %v", derr)
		}
		bl := NewBuilder()
		for i := range o.Chunks {
			c, err := ObjectChunk(b, i)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range c.Entries {
				if _, err := bl.Add(c.Log, Entry{Records: e.Records, PublishTimeMs: e.PublishTimeMs, Payload: e.Payload}); err != nil {
					t.Fatalf("re-encoding an accepted input: %v", err)
				}
			}
		}
		obj, refs := bl.Build(o.WriteTimeMs)
		if !bytes.Equal(obj, b) || !slices.Equal(refs, o.Chunks) {
			t.Fatalf("accepted object is not canonical")
		}
	})
}
