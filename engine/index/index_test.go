package index

import (
	"encoding/hex"
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

// sampleJoint is sampleEntry marked as a chunk of a joint record.
func sampleJoint() Entry {
	e := sampleEntry()
	e.Joint = &Joint{Rev: 81234, Logs: []int64{3, 7, 1 << 40}}
	return e
}

// sampleJointRun is sampleRun marked as chunks of a joint record.
func sampleJointRun() Entry {
	e := sampleRun()
	e.Joint = &Joint{Rev: 5, Logs: []int64{0, 2}}
	return e
}

// TestEntryJoint: entries with a Joint encode as versions 3 (one chunk)
// and 4 (a run), round-trip, and reject truncation, trailing bytes and
// malformed marks; entries without one keep versions 1 and 2, byte for
// byte as the encoder before Joint wrote them (so old entries decode).
func TestEntryJoint(t *testing.T) {
	for _, tc := range []struct {
		e       Entry
		version byte
	}{{sampleJoint(), 3}, {sampleJointRun(), 4}} {
		b := tc.e.Encode()
		if b[0] != tc.version {
			t.Fatalf("version %d, want %d", b[0], tc.version)
		}
		got, err := DecodeEntry(b)
		if err != nil || !reflect.DeepEqual(got, tc.e) {
			t.Fatalf("got %+v %v, want %+v", got, err, tc.e)
		}
		for n := 0; n < len(b); n++ {
			if _, err := DecodeEntry(b[:n]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("v%d truncated to %d: %v", tc.version, n, err)
			}
		}
		if _, err := DecodeEntry(append(b, 0)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("v%d: trailing byte accepted: %v", tc.version, err)
		}
	}
	for _, j := range []*Joint{{Rev: 0, Logs: []int64{1, 2}}, {Rev: 1, Logs: []int64{1}}, {Rev: 1, Logs: []int64{2, 1}}, {Rev: 1, Logs: []int64{2, 2}}} {
		e := sampleEntry()
		e.Joint = j
		if _, err := DecodeEntry(e.Encode()); !errors.Is(err, ErrCorrupt) {
			t.Errorf("joint %+v accepted: %v", j, err)
		}
	}
	// Written by the encoder before Joint existed (versions 1 and 2).
	for _, tc := range []struct {
		hex  string
		want Entry
	}{
		{"01016407038827bc050980a0899fc56882a0899fc5680d77616c2f6e6f64652f30303031408407efbeadde", sampleEntry()},
		{"02010a05038407ac02020406020577616c2f610864070000000201640103030577616c2f6200fa01090000000302c801000101", sampleRun()},
	} {
		b, _ := hex.DecodeString(tc.hex)
		got, err := DecodeEntry(b)
		if err != nil || !reflect.DeepEqual(got, tc.want) || got.Joint != nil {
			t.Fatalf("old v%d entry: %+v %v", b[0], got, err)
		}
		if again := hex.EncodeToString(got.Encode()); again != tc.hex {
			t.Fatalf("old v%d entry re-encodes as %s", b[0], again)
		}
	}
}

func FuzzDecodeEntry(f *testing.F) {
	b := sampleEntry().Encode()
	f.Add(b)
	f.Add(b[:len(b)/2])
	f.Add([]byte{1, 2})
	f.Add(sampleRun().Encode())
	f.Add(sampleJoint().Encode())
	f.Add(sampleJointRun().Encode())
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
