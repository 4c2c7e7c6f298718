package index

import (
	"errors"
	"reflect"
	"testing"
)

func sampleEntry() Entry {
	return Entry{
		Kind: KindWAL, First: 100, Records: 7, Entries: 3, BytesEnd: 5000, PayloadBytes: 700,
		MinPublishMs: -5, MaxPublishMs: 1796000000000, WriteMs: 1796000000001,
		Object: "wal/node/0001", Offset: 64, Length: 900, CRC: 0xdeadbeef,
	}
}

func TestEntryRoundTrip(t *testing.T) {
	e := sampleEntry()
	got, err := DecodeEntry(e.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, e) {
		t.Fatalf("got %+v, want %+v", got, e)
	}
	if e.Last() != 106 || e.End() != 107 {
		t.Fatalf("last %d end %d", e.Last(), e.End())
	}
}

func TestEntryRejectsTruncation(t *testing.T) {
	b := sampleEntry().Encode()
	for n := 0; n < len(b); n++ {
		if _, err := DecodeEntry(b[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d: %v", n, err)
		}
	}
	if _, err := DecodeEntry(append(b, 0)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("trailing byte accepted: %v", err)
	}
}

func TestHeadRoundTripAndChecks(t *testing.T) {
	h := Head{Next: 10, First: 4, Bytes: 99, Fenced: true}
	got, err := DecodeHead(h.Encode())
	if err != nil || got != h {
		t.Fatalf("got %+v %v", got, err)
	}
	for _, bad := range []string{`{`, `{"next":1,"first":2}`, `{"next":-1}`, `{"bytes":-3}`} {
		if _, err := DecodeHead([]byte(bad)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s accepted: %v", bad, err)
		}
	}
}

func FuzzDecodeEntry(f *testing.F) {
	b := sampleEntry().Encode()
	f.Add(b)
	f.Add(b[:len(b)/2])
	f.Add([]byte{1, 2})
	f.Add(sampleRun().Encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := DecodeEntry(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error without ErrCorrupt: %v", err)
			}
			return
		}
		if e.Records < 1 || e.Entries < 1 || e.Entries > e.Records || e.First < 0 {
			t.Fatalf("accepted out-of-range entry %+v", e)
		}
		again, err := DecodeEntry(e.Encode())
		if err != nil || !reflect.DeepEqual(again, e) {
			t.Fatalf("re-encode: %+v %v", again, err)
		}
	})
}

func FuzzDecodeHead(f *testing.F) {
	f.Add(Head{Next: 3, First: 1, Bytes: 10}.Encode())
	f.Add([]byte(`{"next":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeHead(b)
		if err != nil {
			return
		}
		if h.First > h.Next || h.First < 0 || h.Bytes < 0 {
			t.Fatalf("accepted %+v", h)
		}
	})
}
