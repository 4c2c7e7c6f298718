package index

import (
	"errors"
	"reflect"
	"testing"
)

func sampleRecord() Record {
	return Record{Kind: RecordChunks, WriteMs: 1796000000000, Object: "wal/node/1796000000000-00000001-abcd", Chunks: []RecordChunk{
		{Log: 7, Records: 100, Entries: 1, PayloadBytes: 1024, Offset: 0, Length: 1100, CRC: 0xdeadbeef, MinPublishMs: 1795999999990, MaxPublishMs: 1796000000000},
		{Log: 1 << 40, Records: 3, Entries: 3, PayloadBytes: 0, Offset: 1100, Length: 60, CRC: 1, MinPublishMs: 5, MaxPublishMs: 1796000000100},
	}}
}

func sampleControl() Record {
	return Record{Kind: RecordControl, Controls: []Control{{Op: OpFence, Log: 3}, {Op: OpTrim, Log: 4, First: 99}, {Op: OpDelete, Log: 5}}}
}

func sampleStaged() Record {
	return Record{Kind: RecordStaged, Chunks: []RecordChunk{
		{Object: "wal/a", WriteMs: 1796000000000, Log: 7, Records: 2, Entries: 1, PayloadBytes: 10, Offset: 8, Length: 40, CRC: 3, MinPublishMs: 1795999999000, MaxPublishMs: 1796000000000},
		{Object: "wal/b", WriteMs: 1796000000500, Log: 9, Records: 1, Entries: 1, PayloadBytes: 0, Offset: 0, Length: 30, CRC: 4, MinPublishMs: 5, MaxPublishMs: 1796000000500},
		{Object: "wal/b", WriteMs: 1796000000500, Log: 7, Records: 5, Entries: 5, PayloadBytes: 99, Offset: 30, Length: 160, CRC: 5, MinPublishMs: 1796000000400, MaxPublishMs: 1796000000500},
	}}
}

func sampleRun() Entry {
	return Entry{Kind: KindWAL, First: 10, Records: 5, Entries: 3, BytesEnd: 900, PayloadBytes: 300,
		MinPublishMs: 1, MaxPublishMs: 2, WriteMs: 3, Object: "wal/a", Offset: 8, Length: 100, CRC: 7,
		Segments: []Segment{
			{Object: "wal/a", Offset: 8, Length: 100, CRC: 7, Records: 2, Entries: 1, PayloadBytes: 100, WriteMs: 2, MinPublishMs: 1, MaxPublishMs: 1},
			{Object: "wal/b", Offset: 0, Length: 250, CRC: 9, Records: 3, Entries: 2, PayloadBytes: 200, WriteMs: 3, MinPublishMs: 2, MaxPublishMs: 2},
		}}
}

func TestRecordRoundTrip(t *testing.T) {
	for _, r := range []Record{sampleRecord(), sampleControl(), sampleStaged()} {
		got, err := DecodeRecord(r.Encode())
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("got %+v, want %+v", got, r)
		}
	}
	if !IsVoid(VoidRecord) || IsVoid(sampleRecord().Encode()) {
		t.Fatal("void marker")
	}
	if _, err := DecodeRecord(VoidRecord); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("void decoded as a record: %v", err)
	}
}

func TestRecordRejectsTruncationAndNonsense(t *testing.T) {
	for _, r := range []Record{sampleRecord(), sampleControl(), sampleStaged()} {
		b := r.Encode()
		for n := 0; n < len(b); n++ {
			if _, err := DecodeRecord(b[:n]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("truncated to %d: %v", n, err)
			}
		}
		if _, err := DecodeRecord(append(b, 0)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("trailing byte accepted: %v", err)
		}
	}
	dup := sampleRecord()
	dup.Chunks[1].Log = dup.Chunks[0].Log
	if _, err := DecodeRecord(dup.Encode()); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("two chunks of one log accepted: %v", err)
	}
	bad := sampleRecord()
	bad.Chunks[0].Entries = bad.Chunks[0].Records + 1
	if _, err := DecodeRecord(bad.Encode()); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("more entries than records accepted: %v", err)
	}
}

func TestRunEntryRoundTrip(t *testing.T) {
	e := sampleRun()
	b := e.Encode()
	if b[0] != 2 {
		t.Fatalf("a run of two chunks encodes as version %d", b[0])
	}
	got, err := DecodeEntry(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, e) {
		t.Fatalf("got %+v, want %+v", got, e)
	}
	if segs := got.Segs(); len(segs) != 2 || segs[1].Object != "wal/b" {
		t.Fatalf("segments %+v", segs)
	}
	one := sampleEntry()
	if segs := one.Segs(); len(segs) != 1 || segs[0].Object != one.Object || segs[0].Records != one.Records {
		t.Fatalf("version-1 entry's segments %+v", segs)
	}
	for n := 0; n < len(b); n++ {
		if _, err := DecodeEntry(b[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d: %v", n, err)
		}
	}
	// Shares that do not add up to the entry are corrupt.
	e.Segments[1].Records++
	if _, err := DecodeEntry(e.Encode()); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("segments not summing to the entry accepted: %v", err)
	}
}

func TestHeadRev(t *testing.T) {
	h := Head{Next: 10, Rev: 77}
	got, err := DecodeHead(h.Encode())
	if err != nil || got != h {
		t.Fatalf("got %+v %v", got, err)
	}
	// A format-1 head has no rev: 0.
	got, err = DecodeHead([]byte(`{"next":3,"first":0,"bytes":9}`))
	if err != nil || got.Rev != 0 || got.Next != 3 {
		t.Fatalf("format-1 head: %+v %v", got, err)
	}
}

func FuzzDecodeRecord(f *testing.F) {
	for _, r := range []Record{sampleRecord(), sampleControl(), sampleStaged()} {
		b := r.Encode()
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add(VoidRecord)
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRecord(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not ErrCorrupt: %v", err)
			}
			return
		}
		again, err := DecodeRecord(r.Encode())
		if err != nil || !reflect.DeepEqual(again, r) {
			t.Fatalf("re-encoding %+v: %+v %v", r, again, err)
		}
	})
}
