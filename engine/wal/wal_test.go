// Tests of the WAL object format (docs/wal-format.md).
//
//	go test -race ./engine/wal/                               # everything, fuzz seeds included
//	go test ./engine/wal/ -run TestGolden -update              # rewrite testdata/tiny.golden after an intended format change
//	go test ./engine/wal/ -run '^$' -fuzz=FuzzDecodeChunk -fuzztime=30s
//	go test ./engine/wal/ -run '^$' -fuzz=FuzzDecodeObject -fuzztime=30s
//	go test ./engine/wal/ -run '^$' -bench . -benchmem
package wal

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// model is what a test appended: per log, its entries in append order.
type model map[int64][]Entry

// randomObject fills b (after Reset) with random entries of random logs,
// payloads mostly under 64 bytes and sometimes up to bigPayload, respecting
// Fits, and returns what it added.
func randomObject(t testing.TB, rnd *rand.Rand, b *Builder, maxLogs, maxEntries, bigPayload int) model {
	t.Helper()
	b.Reset()
	logs := make([]int64, 1+rnd.IntN(maxLogs))
	for i := range logs {
		switch rnd.IntN(8) {
		case 0:
			logs[i] = math.MinInt64 + int64(rnd.IntN(3))
		case 1:
			logs[i] = math.MaxInt64 - int64(rnd.IntN(3))
		default:
			logs[i] = rnd.Int64N(1000) - 100
		}
	}
	m := model{}
	n := 1 + rnd.IntN(maxEntries)
	for range n {
		log := logs[rnd.IntN(len(logs))]
		e := Entry{Records: 1 + rnd.Int32N(100), PublishTimeMs: 1_700_000_000_000 + rnd.Int64N(100_000)}
		switch rnd.IntN(20) {
		case 0:
			e.Records = math.MaxInt32 - rnd.Int32N(2) // exercises the records limit
		case 1:
			e.PublishTimeMs = math.MinInt64
		case 2:
			e.PublishTimeMs = math.MaxInt64
		case 3:
			e.PublishTimeMs = -rnd.Int64N(1000)
		}
		size := rnd.IntN(64)
		if rnd.IntN(10) == 0 {
			size = rnd.IntN(bigPayload + 1)
		}
		e.Payload = make([]byte, size)
		for i := range e.Payload {
			e.Payload[i] = byte(rnd.Uint32())
		}
		if err := ValidateEntry(e); err != nil {
			t.Fatalf("ValidateEntry(%+v) = %v", e, err)
		}
		if !b.Fits(log, e) {
			continue // the writer would flush here; here we just skip it
		}
		got, err := b.Add(log, e)
		if err != nil {
			t.Fatalf("Add(%d) after Fits: %v", log, err)
		}
		if want := len(m[log]); got != want {
			t.Fatalf("Add(%d) = index %d, want %d", log, got, want)
		}
		m[log] = append(m[log], e)
	}
	return m
}

func checkEntries(t testing.TB, log int64, got []DecodedEntry, want []Entry, payloads bool) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("log %d: %d entries, want %d", log, len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Records != w.Records || g.PublishTimeMs != w.PublishTimeMs || g.PayloadSize != len(w.Payload) {
			t.Fatalf("log %d entry %d: got {%d %d size %d}, want {%d %d size %d}", log, i,
				g.Records, g.PublishTimeMs, g.PayloadSize, w.Records, w.PublishTimeMs, len(w.Payload))
		}
		if payloads && !bytes.Equal(g.Payload, w.Payload) {
			t.Fatalf("log %d entry %d: payload differs", log, i)
		}
		if !payloads && g.Payload != nil {
			t.Fatalf("log %d entry %d: DecodeChunkHeaders returned a payload", log, i)
		}
	}
}

// checkObject decodes obj every way there is and compares with m.
func checkObject(t testing.TB, obj []byte, refs []ChunkRef, m model, writeTimeMs int64) {
	t.Helper()
	o, err := DecodeObject(obj)
	if err != nil {
		t.Fatalf("DecodeObject: %v", err)
	}
	if o.Version != Version || o.Flags != 0 || o.WriteTimeMs != writeTimeMs || o.Size != int64(len(obj)) {
		t.Fatalf("object header %+v", o)
	}
	if !slices.Equal(o.Chunks, refs) {
		t.Fatalf("directory %+v\nBuild returned %+v", o.Chunks, refs)
	}
	if len(refs) != len(m) {
		t.Fatalf("%d chunks for %d logs", len(refs), len(m))
	}
	dir, err := DecodeObjectDirectory(obj[:ObjectPrefixLen(len(refs))])
	if err != nil || !slices.Equal(dir.Chunks, refs) || dir.Size != o.Size || dir.WriteTimeMs != writeTimeMs {
		t.Fatalf("DecodeObjectDirectory = %+v, %v", dir, err)
	}
	for i, r := range refs {
		if i > 0 && refs[i-1].Log >= r.Log {
			t.Fatalf("chunks not in ascending log order: %d then %d", refs[i-1].Log, r.Log)
		}
		want := m[r.Log]
		var records, payload int64
		minPub, maxPub := int64(math.MaxInt64), int64(math.MinInt64)
		for _, e := range want {
			records += int64(e.Records)
			payload += int64(len(e.Payload))
			minPub, maxPub = min(minPub, e.PublishTimeMs), max(maxPub, e.PublishTimeMs)
		}
		if int(r.Entries) != len(want) || int64(r.Records) != records || r.PayloadBytes != payload ||
			r.MinPublishTimeMs != minPub || r.MaxPublishTimeMs != maxPub {
			t.Fatalf("ref %+v disagrees with the %d entries appended", r, len(want))
		}
		if j, ok := o.Find(r.Log); !ok || j != i {
			t.Fatalf("Find(%d) = %d, %v; want %d", r.Log, j, ok, i)
		}

		raw := obj[r.Offset : r.Offset+r.Length] // what a ranged GET returns
		c, err := r.Decode(raw)
		if err != nil {
			t.Fatalf("ChunkRef.Decode(log %d): %v", r.Log, err)
		}
		if c.Log != r.Log || c.WriteTimeMs != writeTimeMs || c.Records != r.Records || c.CRC != r.CRC {
			t.Fatalf("chunk %+v, ref %+v", c, r)
		}
		checkEntries(t, r.Log, c.Entries, want, true)

		c2, err := ObjectChunk(obj, i)
		if err != nil {
			t.Fatalf("ObjectChunk(%d): %v", i, err)
		}
		checkEntries(t, r.Log, c2.Entries, want, true)

		h, err := DecodeChunkHeaders(raw[:ChunkPrefixLen(r.Entries)])
		if err != nil {
			t.Fatalf("DecodeChunkHeaders(log %d): %v", r.Log, err)
		}
		if h.Log != r.Log || h.Records != r.Records || h.WriteTimeMs != writeTimeMs || h.CRC != 0 {
			t.Fatalf("headers %+v, ref %+v", h, r)
		}
		checkEntries(t, r.Log, h.Entries, want, false)
		if _, err := DecodeChunkHeaders(raw); err != nil { // the whole chunk is a prefix too
			t.Fatalf("DecodeChunkHeaders(whole chunk): %v", err)
		}
	}
	for _, missing := range []int64{-101, 1000, 12345} {
		if _, ok := m[missing]; !ok {
			if _, found := o.Find(missing); found {
				t.Fatalf("Find(%d) found a chunk", missing)
			}
		}
	}
	for _, i := range []int{-1, len(refs)} {
		if _, err := ObjectChunk(obj, i); err == nil {
			t.Fatalf("ObjectChunk(%d) of %d chunks succeeded", i, len(refs))
		}
	}
}

// TestRoundTrip is a property test: random logs and entries, one reused
// Builder, every decoder.
func TestRoundTrip(t *testing.T) {
	b := NewBuilder()
	var prev, prevCopy []byte
	for seed := range uint64(300) {
		rnd := rand.New(rand.NewPCG(seed, 0x5eed))
		m := randomObject(t, rnd, b, 1+rnd.IntN(40), 300, 4096)
		wt := rnd.Int64() - math.MaxInt64/2
		if b.Logs() != len(m) {
			t.Fatalf("seed %d: Logs() = %d, want %d", seed, b.Logs(), len(m))
		}
		obj, refs := b.Build(wt)
		if b.Len() != len(obj) {
			t.Fatalf("seed %d: Len() = %d, object is %d bytes", seed, b.Len(), len(obj))
		}
		again, refs2 := b.Build(wt)
		if !bytes.Equal(obj, again) || !slices.Equal(refs, refs2) {
			t.Fatalf("seed %d: Build is not repeatable", seed)
		}
		checkObject(t, obj, refs, m, wt)
		// Reset and reuse must not touch objects already returned.
		if prev != nil && !bytes.Equal(prev, prevCopy) {
			t.Fatalf("seed %d: previous object changed after Reset and reuse", seed)
		}
		prev, prevCopy = obj, bytes.Clone(obj)
	}
}

// TestAddOrderIndependent: the bytes are a function of per-log entry order
// only, not of how logs interleave.
func TestAddOrderIndependent(t *testing.T) {
	e := func(p string) Entry { return Entry{Records: 1, PublishTimeMs: 5, Payload: []byte(p)} }
	a, b := NewBuilder(), NewBuilder()
	a.Add(2, e("x"))
	a.Add(1, e("y"))
	a.Add(2, e("z"))
	b.Add(1, e("y"))
	b.Add(2, e("x"))
	b.Add(2, e("z"))
	oa, _ := a.Build(9)
	ob, _ := b.Build(9)
	if !bytes.Equal(oa, ob) {
		t.Fatal("objects differ with interleaving")
	}
}

func TestEmptyObject(t *testing.T) {
	b := NewBuilder()
	obj, refs := b.Build(42)
	if len(obj) != b.Len() || len(obj) != 28 || len(refs) != 0 || b.Logs() != 0 {
		t.Fatalf("empty object: %d bytes, %d refs, Len %d", len(obj), len(refs), b.Len())
	}
	o, err := DecodeObject(obj)
	if err != nil || len(o.Chunks) != 0 || o.WriteTimeMs != 42 {
		t.Fatalf("DecodeObject(empty) = %+v, %v", o, err)
	}
}

// tinyObject is the object of testdata/tiny.golden: two logs, appended out of
// id order, one of them with an empty payload.
func tinyObject() (obj []byte, refs []ChunkRef) {
	b := NewBuilder()
	b.Add(7, Entry{Records: 3, PublishTimeMs: 1_700_000_000_001, Payload: []byte("hello")})
	b.Add(3, Entry{Records: 1, PublishTimeMs: 1_700_000_000_000, Payload: []byte("pulsar!")})
	b.Add(7, Entry{Records: 1, PublishTimeMs: 1_699_999_999_999, Payload: nil})
	return b.Build(1_700_000_000_123)
}

// TestByteFlips flips every byte of a small object (three ways) and expects
// every decoder that reads that byte to notice.
func TestByteFlips(t *testing.T) {
	obj, refs := tinyObject()
	dirLen := int(ObjectPrefixLen(len(refs)))
	for i := range obj {
		for _, mask := range []byte{0x01, 0x80, 0xff} {
			bad := bytes.Clone(obj)
			bad[i] ^= mask
			if _, err := DecodeObject(bad); !isSentinel(err) {
				t.Fatalf("DecodeObject with byte %d ^ %#x: %v", i, mask, err)
			}
			if i < dirLen {
				if _, err := DecodeObjectDirectory(bad[:dirLen]); !isSentinel(err) {
					t.Fatalf("DecodeObjectDirectory with byte %d ^ %#x: %v", i, mask, err)
				}
			}
			for j, r := range refs {
				if int64(i) < r.Offset || int64(i) >= r.Offset+r.Length {
					continue
				}
				raw := bad[r.Offset : r.Offset+r.Length]
				if _, err := DecodeChunk(raw); !isSentinel(err) {
					t.Fatalf("DecodeChunk(chunk %d) with byte %d ^ %#x: %v", j, i, mask, err)
				}
				if _, err := r.Decode(raw); !isSentinel(err) {
					t.Fatalf("ChunkRef.Decode(chunk %d) with byte %d ^ %#x: %v", j, i, mask, err)
				}
				if _, err := ObjectChunk(bad, j); !isSentinel(err) {
					t.Fatalf("ObjectChunk(%d) with byte %d ^ %#x: %v", j, i, mask, err)
				}
				if pl := ChunkPrefixLen(r.Entries); int64(i) < r.Offset+pl {
					if _, err := DecodeChunkHeaders(raw[:pl]); !isSentinel(err) {
						t.Fatalf("DecodeChunkHeaders(chunk %d) with byte %d ^ %#x: %v", j, i, mask, err)
					}
				}
			}
		}
	}
}

// TestTruncation cuts the object and each chunk at every length, and appends
// a byte.
func TestTruncation(t *testing.T) {
	obj, refs := tinyObject()
	for n := range len(obj) {
		if _, err := DecodeObject(obj[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("DecodeObject(first %d of %d bytes): %v", n, len(obj), err)
		}
		for j := range refs {
			if _, err := ObjectChunk(obj[:n], j); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("ObjectChunk(first %d bytes, %d): %v", n, j, err)
			}
		}
		_, err := DecodeObjectDirectory(obj[:n])
		if ok := int64(n) >= ObjectPrefixLen(len(refs)); ok != (err == nil) || (err != nil && !errors.Is(err, ErrCorrupt)) {
			t.Fatalf("DecodeObjectDirectory(first %d bytes): %v", n, err)
		}
	}
	if _, err := DecodeObject(append(bytes.Clone(obj), 0)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("DecodeObject with a trailing byte: %v", err)
	}
	for _, r := range refs {
		raw := obj[r.Offset : r.Offset+r.Length]
		for n := range len(raw) {
			if _, err := DecodeChunk(raw[:n]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("DecodeChunk(first %d of %d bytes): %v", n, len(raw), err)
			}
			if _, err := r.Decode(raw[:n]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("ChunkRef.Decode(first %d of %d bytes): %v", n, len(raw), err)
			}
			_, err := DecodeChunkHeaders(raw[:n])
			if ok := int64(n) >= ChunkPrefixLen(r.Entries); ok != (err == nil) || (err != nil && !errors.Is(err, ErrCorrupt)) {
				t.Fatalf("DecodeChunkHeaders(first %d of %d bytes): %v", n, len(raw), err)
			}
		}
		if _, err := DecodeChunk(append(bytes.Clone(raw), 0)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("DecodeChunk with a trailing byte: %v", err)
		}
	}
}

// resealChunk recomputes a chunk's prefix CRC and trailer, so that a test can
// reach the checks behind them.
func resealChunk(c []byte) []byte {
	m := uint64(le.Uint32(c[16:]))
	if p := chunkHeaderLen + m*entryRecordLen; p+prefixCRCLen <= uint64(len(c)) {
		le.PutUint32(c[p:], checksum(c[:p]))
	}
	if len(c) >= trailerLen {
		le.PutUint32(c[len(c)-trailerLen:], checksum(c[:len(c)-trailerLen]))
	}
	return c
}

// resealObject recomputes an object's directory CRC.
func resealObject(o []byte) []byte {
	n := uint64(le.Uint32(o[12:]))
	if p := objectHeaderLen + n*dirRecordLen; p+dirCRCLen <= uint64(len(o)) {
		le.PutUint32(o[p:], checksum(o[:p]))
	}
	return o
}

func isSentinel(err error) bool {
	return errors.Is(err, ErrCorrupt) || errors.Is(err, ErrUnsupportedVersion) || errors.Is(err, ErrTooLarge)
}

// TestChunkChecks reaches each check behind the CRCs.
func TestChunkChecks(t *testing.T) {
	obj, refs := tinyObject()
	r := refs[1] // log 7: two entries, 5 + 0 payload bytes
	good := obj[r.Offset : r.Offset+r.Length]
	entry := func(i int) int { return chunkHeaderLen + i*entryRecordLen }
	for _, tc := range []struct {
		name   string
		mutate func(c []byte) []byte
		want   error
	}{
		{"magic", func(c []byte) []byte { c[0] = 'X'; return c }, ErrCorrupt},
		{"version 2", func(c []byte) []byte { le.PutUint16(c[4:], 2); return c }, ErrUnsupportedVersion},
		{"version 0", func(c []byte) []byte { le.PutUint16(c[4:], 0); return c }, ErrUnsupportedVersion},
		{"unknown flag", func(c []byte) []byte { le.PutUint16(c[6:], 1); return resealChunk(c) }, ErrUnsupportedVersion},
		{"no crc reseal", func(c []byte) []byte { c[9]++; return c }, ErrCorrupt},
		{"prefix crc", func(c []byte) []byte {
			c[entry(2)] ^= 1 // the prefix CRC itself; the trailer is resealed
			le.PutUint32(c[len(c)-trailerLen:], checksum(c[:len(c)-trailerLen]))
			return c
		}, ErrCorrupt},
		{"zero entries", func(c []byte) []byte { le.PutUint32(c[16:], 0); return resealChunk(c) }, ErrCorrupt},
		{"more entries than bytes", func(c []byte) []byte { le.PutUint32(c[16:], math.MaxUint32); return resealChunk(c) }, ErrCorrupt},
		{"three entries", func(c []byte) []byte { le.PutUint32(c[16:], 3); return resealChunk(c) }, ErrCorrupt},
		{"record count", func(c []byte) []byte { le.PutUint32(c[20:], 5); return resealChunk(c) }, ErrCorrupt},
		{"record count over int32", func(c []byte) []byte { le.PutUint32(c[20:], math.MaxInt32+1); return resealChunk(c) }, ErrTooLarge},
		{"entry records 0", func(c []byte) []byte {
			le.PutUint32(c[entry(0):], 0)
			le.PutUint32(c[entry(1):], 4)
			return resealChunk(c)
		}, ErrCorrupt},
		{"entry records wrap", func(c []byte) []byte {
			le.PutUint32(c[20:], 4)
			le.PutUint32(c[entry(0):], math.MaxUint32) // 2^32-1 + 5 wraps in u32, not in u64
			le.PutUint32(c[entry(1):], 5)
			return resealChunk(c)
		}, ErrCorrupt},
		{"payload overrun", func(c []byte) []byte { le.PutUint32(c[entry(0)+4:], 6); return resealChunk(c) }, ErrCorrupt},
		{"payload short", func(c []byte) []byte { le.PutUint32(c[entry(0)+4:], 4); return resealChunk(c) }, ErrCorrupt},
		{"payload over limit", func(c []byte) []byte { le.PutUint32(c[entry(1)+4:], MaxEntryBytes+1); return resealChunk(c) }, ErrTooLarge},
		{"trailing byte", func(c []byte) []byte { return resealChunk(append(c, 0)) }, ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := tc.mutate(bytes.Clone(good))
			_, err := DecodeChunk(bad)
			if !errors.Is(err, tc.want) {
				t.Fatalf("DecodeChunk: %v, want %v", err, tc.want)
			}
			t.Log(err)
		})
	}

	// A ref that does not describe the bytes is caught.
	for _, mutate := range []func(*ChunkRef){
		func(r *ChunkRef) { r.Log++ },
		func(r *ChunkRef) { r.Entries++ },
		func(r *ChunkRef) { r.Records++ },
		func(r *ChunkRef) { r.PayloadBytes++ },
		func(r *ChunkRef) { r.MinPublishTimeMs-- },
		func(r *ChunkRef) { r.MaxPublishTimeMs++ },
		func(r *ChunkRef) { r.CRC++ },
		func(r *ChunkRef) { r.Length++ },
	} {
		bad := r
		mutate(&bad)
		if _, err := bad.Decode(good); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("ChunkRef.Decode with ref %+v (true %+v): %v", bad, r, err)
		}
	}
}

// TestChunkEntryLimit: a CRC-valid chunk with too many entries is refused
// before anything proportional to the count is allocated beyond the input.
func TestChunkEntryLimit(t *testing.T) {
	m := MaxEntriesPerChunk + 1
	c := make([]byte, chunkOverhead+m*entryRecordLen)
	copy(c, chunkMagic)
	le.PutUint16(c[4:], Version)
	le.PutUint32(c[16:], uint32(m))
	le.PutUint32(c[20:], uint32(m))
	for i := range m {
		le.PutUint32(c[chunkHeaderLen+i*entryRecordLen:], 1)
	}
	if _, err := DecodeChunk(resealChunk(c)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("DecodeChunk: %v", err)
	}
}

// TestHostileCountsDoNotAllocate: huge counts in tiny inputs are rejected
// without allocating from them.
func TestHostileCountsDoNotAllocate(t *testing.T) {
	chunk := make([]byte, 64)
	copy(chunk, chunkMagic)
	le.PutUint16(chunk[4:], Version)
	le.PutUint32(chunk[16:], math.MaxUint32)
	obj := make([]byte, 64)
	copy(obj, objectMagic)
	le.PutUint16(obj[8:], Version)
	le.PutUint32(obj[12:], math.MaxUint32)

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 100 {
		if _, err := DecodeChunk(chunk); !errors.Is(err, ErrCorrupt) {
			t.Fatal(err)
		}
		if _, err := DecodeChunkHeaders(chunk); !errors.Is(err, ErrCorrupt) {
			t.Fatal(err)
		}
		if _, err := DecodeObject(obj); !errors.Is(err, ErrCorrupt) {
			t.Fatal(err)
		}
		if _, err := DecodeObjectDirectory(obj); !errors.Is(err, ErrCorrupt) {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if d := after.TotalAlloc - before.TotalAlloc; d > 1<<20 {
		t.Fatalf("400 rejected decodes allocated %d bytes", d)
	}
}

// TestObjectChecks reaches each directory check behind the directory CRC.
func TestObjectChecks(t *testing.T) {
	good, _ := tinyObject()
	dir := func(i int) int { return objectHeaderLen + i*dirRecordLen }
	for _, tc := range []struct {
		name   string
		mutate func(o []byte) []byte
		want   error
	}{
		{"magic", func(o []byte) []byte { o[7] = 'X'; return o }, ErrCorrupt},
		{"version 2", func(o []byte) []byte { le.PutUint16(o[8:], 2); return o }, ErrUnsupportedVersion},
		{"unknown flag", func(o []byte) []byte { le.PutUint16(o[10:], 0x8000); return resealObject(o) }, ErrUnsupportedVersion},
		{"no crc reseal", func(o []byte) []byte { o[16]++; return o }, ErrCorrupt},
		{"write time", func(o []byte) []byte { o[16]++; return resealObject(o) }, ErrCorrupt},
		{"zero chunks", func(o []byte) []byte { le.PutUint32(o[12:], 0); return resealObject(o) }, ErrCorrupt},
		{"one chunk", func(o []byte) []byte { le.PutUint32(o[12:], 1); return resealObject(o) }, ErrCorrupt},
		{"logs not ascending", func(o []byte) []byte { le.PutUint64(o[dir(1):], 3); return resealObject(o) }, ErrCorrupt},
		{"log mismatch", func(o []byte) []byte { le.PutUint64(o[dir(1):], 8); return resealObject(o) }, ErrCorrupt},
		{"offset", func(o []byte) []byte { le.PutUint64(o[dir(0)+8:], le.Uint64(o[dir(0)+8:])+1); return resealObject(o) }, ErrCorrupt},
		{"length", func(o []byte) []byte { le.PutUint64(o[dir(1)+16:], le.Uint64(o[dir(1)+16:])-1); return resealObject(o) }, ErrCorrupt},
		{"length huge", func(o []byte) []byte { le.PutUint64(o[dir(1)+16:], math.MaxUint64); return resealObject(o) }, ErrTooLarge},
		{"entries 0", func(o []byte) []byte { le.PutUint32(o[dir(0)+24:], 0); return resealObject(o) }, ErrCorrupt},
		{"records", func(o []byte) []byte { le.PutUint32(o[dir(1)+28:], 5); return resealObject(o) }, ErrCorrupt},
		{"records below entries", func(o []byte) []byte { le.PutUint32(o[dir(1)+28:], 1); return resealObject(o) }, ErrCorrupt},
		{"payload bytes", func(o []byte) []byte { le.PutUint64(o[dir(1)+32:], 4); return resealObject(o) }, ErrCorrupt},
		{"min publish", func(o []byte) []byte { le.PutUint64(o[dir(1)+40:], 1); return resealObject(o) }, ErrCorrupt},
		{"min above max", func(o []byte) []byte { le.PutUint64(o[dir(1)+40:], math.MaxInt64); return resealObject(o) }, ErrCorrupt},
		{"max publish", func(o []byte) []byte { le.PutUint64(o[dir(1)+48:], math.MaxInt64); return resealObject(o) }, ErrCorrupt},
		{"crc", func(o []byte) []byte { o[dir(0)+56]++; return resealObject(o) }, ErrCorrupt},
		{"reserved", func(o []byte) []byte { o[dir(1)+63] = 1; return resealObject(o) }, ErrCorrupt},
		{"trailing byte", func(o []byte) []byte { return append(o, 0) }, ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := tc.mutate(bytes.Clone(good))
			_, err := DecodeObject(bad)
			if !errors.Is(err, tc.want) {
				t.Fatalf("DecodeObject: %v, want %v", err, tc.want)
			}
			t.Log(err)
		})
	}
}

func TestObjectChunkLimit(t *testing.T) {
	n := MaxChunksPerObject + 1
	o := make([]byte, ObjectPrefixLen(0)+int64(n)*dirRecordLen)
	copy(o, objectMagic)
	le.PutUint16(o[8:], Version)
	le.PutUint32(o[12:], uint32(n))
	for _, decode := range []func([]byte) (Object, error){DecodeObject, DecodeObjectDirectory} {
		if _, err := decode(resealObject(o)); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("decode: %v", err)
		}
	}
}

func TestValidateEntry(t *testing.T) {
	for _, tc := range []struct {
		e    Entry
		want error
	}{
		{Entry{Records: 1}, nil},
		{Entry{Records: math.MaxInt32, Payload: make([]byte, MaxEntryBytes)}, nil},
		{Entry{Records: 0}, ErrInvalidEntry},
		{Entry{Records: -1}, ErrInvalidEntry},
		{Entry{Records: 1, Payload: make([]byte, MaxEntryBytes+1)}, ErrTooLarge},
	} {
		if err := ValidateEntry(tc.e); !errors.Is(err, tc.want) {
			t.Errorf("ValidateEntry(records %d, %d bytes) = %v, want %v", tc.e.Records, len(tc.e.Payload), err, tc.want)
		}
	}
}

func mustAdd(t *testing.T, b *Builder, log int64, e Entry) {
	t.Helper()
	if _, err := b.Add(log, e); err != nil {
		t.Fatalf("Add(%d, %d records, %d bytes): %v", log, e.Records, len(e.Payload), err)
	}
}

func TestBuilderLimits(t *testing.T) {
	one := Entry{Records: 1}
	t.Run("invalid entry", func(t *testing.T) {
		if _, err := NewBuilder().Add(1, Entry{}); !errors.Is(err, ErrInvalidEntry) {
			t.Fatalf("Add(0 records) = %v, want ErrInvalidEntry", err)
		}
	})
	t.Run("entries per chunk", func(t *testing.T) {
		b := NewBuilder()
		for range MaxEntriesPerChunk {
			mustAdd(t, b, 1, one)
		}
		if b.Fits(1, one) || !b.Fits(2, one) {
			t.Fatal("Fits ignores MaxEntriesPerChunk")
		}
		if _, err := b.Add(1, one); !errors.Is(err, ErrFull) {
			t.Fatalf("Add over MaxEntriesPerChunk = %v, want ErrFull", err)
		}
		obj, refs := b.Build(0)
		if _, err := DecodeObject(obj); err != nil || refs[0].Entries != MaxEntriesPerChunk {
			t.Fatalf("full chunk: %v", err)
		}
	})
	t.Run("records per chunk", func(t *testing.T) {
		b := NewBuilder()
		mustAdd(t, b, 1, Entry{Records: math.MaxInt32 - 1})
		mustAdd(t, b, 1, one)
		if b.Fits(1, one) || !b.Fits(2, one) {
			t.Fatal("Fits ignores MaxRecordsPerChunk")
		}
		if _, err := b.Add(1, one); !errors.Is(err, ErrFull) {
			t.Fatalf("Add over MaxRecordsPerChunk = %v, want ErrFull", err)
		}
		obj, refs := b.Build(0)
		if _, err := DecodeObject(obj); err != nil || refs[0].Records != math.MaxInt32 {
			t.Fatalf("full chunk: %v", err)
		}
	})
	t.Run("chunks per object", func(t *testing.T) {
		b := NewBuilder()
		for log := range int64(MaxChunksPerObject) {
			mustAdd(t, b, log, one)
		}
		if b.Fits(MaxChunksPerObject, one) || !b.Fits(0, one) {
			t.Fatal("Fits ignores MaxChunksPerObject")
		}
		obj, _ := b.Build(0)
		if o, err := DecodeObject(obj); err != nil || len(o.Chunks) != MaxChunksPerObject {
			t.Fatalf("full object: %v", err)
		}
		b.Reset()
		if b.Logs() != 0 || b.Len() != 28 || !b.Fits(MaxChunksPerObject, one) {
			t.Fatal("Reset did not empty the builder")
		}
	})
	t.Run("object bytes", func(t *testing.T) {
		big := Entry{Records: 1, Payload: make([]byte, MaxEntryBytes)} // Add keeps a reference: no copy
		b := NewBuilder()
		for log := range int64(MaxObjectBytes/MaxEntryBytes - 1) {
			mustAdd(t, b, log, big)
		}
		if b.Fits(99, big) || b.Fits(0, big) || !b.Fits(0, Entry{Records: 1, Payload: make([]byte, 1<<20)}) {
			t.Fatal("Fits ignores MaxObjectBytes")
		}
		if _, err := b.Add(0, big); !errors.Is(err, ErrFull) {
			t.Fatalf("Add over MaxObjectBytes = %v, want ErrFull", err)
		}
	})
}

// TestBudgetAgreesWithBuilder: a Budget fed the same entries as a Builder
// answers Fits the same at every step, up to every limit, and reports the
// same size.
func TestBudgetAgreesWithBuilder(t *testing.T) {
	big := make([]byte, MaxEntryBytes)
	cases := map[string]func(i int) (int64, Entry){
		"entries per chunk": func(int) (int64, Entry) { return 1, Entry{Records: 1} },
		"records per chunk": func(i int) (int64, Entry) { return int64(i % 3), Entry{Records: math.MaxInt32/2 + 1} },
		"chunks per object": func(i int) (int64, Entry) { return int64(i), Entry{Records: 1} },
		"object bytes":      func(i int) (int64, Entry) { return int64(i % 2), Entry{Records: 1, Payload: big} },
	}
	for name, next := range cases {
		t.Run(name, func(t *testing.T) {
			b, g := NewBuilder(), &Budget{}
			for i := 0; ; i++ {
				log, e := next(i)
				fb, fg := b.Fits(log, e), g.Fits(log, e)
				if fb != fg {
					t.Fatalf("step %d: Builder.Fits %v, Budget.Fits %v", i, fb, fg)
				}
				if !fb {
					if err := g.Add(log, e); !errors.Is(err, ErrFull) {
						t.Fatalf("Budget.Add past a limit = %v, want ErrFull", err)
					}
					break
				}
				mustAdd(t, b, log, e)
				if err := g.Add(log, e); err != nil {
					t.Fatal(err)
				}
				if int64(b.Len()) != g.Len() || b.Logs() != g.Logs() {
					t.Fatalf("step %d: Builder %d bytes %d logs, Budget %d bytes %d logs", i, b.Len(), b.Logs(), g.Len(), g.Logs())
				}
				if i > 2*MaxChunksPerObject {
					t.Fatal("no limit reached")
				}
			}
		})
	}
}

func TestChunkPrefixLen(t *testing.T) {
	for _, tc := range []struct {
		entries int32
		want    int64
	}{{-1, 0}, {0, 0}, {1, 52}, {2, 68}, {MaxEntriesPerChunk, 36 + 16*MaxEntriesPerChunk}, {MaxEntriesPerChunk + 1, 0}} {
		if got := ChunkPrefixLen(tc.entries); got != tc.want {
			t.Errorf("ChunkPrefixLen(%d) = %d, want %d", tc.entries, got, tc.want)
		}
	}
	if ObjectPrefixLen(-1) != 0 || ObjectPrefixLen(0) != 28 || ObjectPrefixLen(2) != 156 || ObjectPrefixLen(MaxChunksPerObject+1) != 0 {
		t.Error("ObjectPrefixLen")
	}
}

// benchEntries returns n entries of size bytes each.
func benchEntries(n, size int) []Entry {
	rnd := rand.New(rand.NewPCG(1, 2))
	es := make([]Entry, n)
	for i := range es {
		p := make([]byte, size)
		for j := range p {
			p[j] = byte(rnd.Uint32())
		}
		es[i] = Entry{Records: 10, PublishTimeMs: 1_700_000_000_000 + int64(i), Payload: p}
	}
	return es
}

// BenchmarkBuild: 1000 entries of 1 KiB across 100 logs, a reused Builder.
// MB/s counts payload bytes.
func BenchmarkBuild(b *testing.B) {
	const entries, size, logs = 1000, 1024, 100
	es := benchEntries(entries, size)
	bl := NewBuilder()
	b.SetBytes(entries * size)
	b.ReportAllocs()
	for b.Loop() {
		bl.Reset()
		for i, e := range es {
			bl.Add(int64(i%logs), e)
		}
		bl.Build(1_700_000_000_000)
	}
}

// BenchmarkDecodeChunk: one log's chunk of 100 entries of 1 KiB.
func BenchmarkDecodeChunk(b *testing.B) {
	bl := NewBuilder()
	for _, e := range benchEntries(100, 1024) {
		bl.Add(1, e)
	}
	obj, refs := bl.Build(0)
	raw := obj[refs[0].Offset : refs[0].Offset+refs[0].Length]
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := refs[0].Decode(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// TestChecksumIsCastagnoli pins the CRC to CRC-32C's published check value.
func TestChecksumIsCastagnoli(t *testing.T) {
	if got := checksum([]byte("123456789")); got != 0xe3069283 {
		t.Fatalf("checksum = %08x, want e3069283", got)
	}
}
