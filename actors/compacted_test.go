package actors

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/lakegate/lakegate/protocol"
)

func TestKeyCompactor(t *testing.T) {
	k := NewKeyCompactor(3)
	key := func(s string) protocol.RecordKey { return protocol.RecordKey{Key: s, HasKey: true} }
	tomb := func(s string) protocol.RecordKey { return protocol.RecordKey{Key: s, HasKey: true, Tombstone: true} }
	steps := []struct {
		off  int64
		keys []protocol.RecordKey
		n    int32
	}{
		{0, []protocol.RecordKey{key("a"), key("b"), {}}, 3}, // a batch: a, b, a keyless record
		{3, []protocol.RecordKey{key("a")}, 1},
		{4, nil, 2}, // unreadable: kept whole
		{6, []protocol.RecordKey{tomb("b"), key("c")}, 2},
	}
	for _, s := range steps {
		if err := k.Add(s.off, s.n, s.keys); err != nil {
			t.Fatal(err)
		}
	}
	surv, removed := k.Survivors()
	if len(surv) != 3 || surv[3] == nil || !slices.Equal(surv[3], []int32{0}) || surv[4] != nil || !slices.Equal(surv[6], []int32{1}) {
		t.Fatalf("survivors %v", surv)
	}
	if _, ok := surv[0]; ok {
		t.Fatalf("entry 0 survives: %v", surv)
	}
	// 8 records fed; kept: a@3, c@6[1], entry 4 (2 records) = 4.
	if removed != 4 || k.Keys() != 2 || k.Records() != 8 {
		t.Fatalf("removed %d, keys %d, records %d", removed, k.Keys(), k.Records())
	}
	if err := k.Add(8, 2, []protocol.RecordKey{key("d"), key("e")}); !errors.Is(err, ErrCompactionTooManyKeys) {
		t.Fatalf("past the key bound: %v", err)
	}
}

func TestCompactedEntryCodec(t *testing.T) {
	e := CompactedEntry{Offset: 42, Records: 70, Entry: []byte("original entry")}
	b := EncodeCompactedEntry(nil, e)
	got, err := DecodeCompactedEntry(b)
	if err != nil || got.Offset != 42 || got.Records != 70 || !bytes.Equal(got.Entry, e.Entry) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for _, bad := range [][]byte{nil, []byte("LGC1"), b[:15], append([]byte("XXXX"), b[4:]...),
		EncodeCompactedEntry(nil, CompactedEntry{Offset: 1, Records: 0})} {
		if _, err := DecodeCompactedEntry(bad); err == nil {
			t.Fatalf("malformed %x decoded", bad)
		}
	}
}

func FuzzDecodeCompactedEntry(f *testing.F) {
	f.Add(EncodeCompactedEntry(nil, CompactedEntry{Offset: 1, Records: 3, Entry: []byte("x")}))
	f.Add(EncodeCompactedEntry(nil, CompactedEntry{Offset: 7, Records: 1, Entry: nil}))
	f.Add([]byte("LGC1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := DecodeCompactedEntry(b)
		if err != nil {
			return
		}
		again, err := DecodeCompactedEntry(EncodeCompactedEntry(nil, e))
		if err != nil || again.Offset != e.Offset || again.Records != e.Records || !bytes.Equal(again.Entry, e.Entry) {
			t.Fatalf("re-encoding changed %+v into %+v (%v)", e, again, err)
		}
	})
}
