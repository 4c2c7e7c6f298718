package actors

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCompactionRecordCodec(t *testing.T) {
	var r CompactionRecord
	r.Succeed(3, 100, 40, 60, 1_700_000_000_000, 250)
	r.Fail(1_700_000_001_000, 5, "compacted log: "+strings.Repeat("é", 300))
	if r.Tried != 5 || r.Generation != 3 {
		t.Fatalf("tried generation %d, generation %d", r.Tried, r.Generation)
	}
	if len(r.Error) > CompactionErrorBytesMax || !utf8.ValidString(r.Error) || !strings.HasSuffix(r.Error, "…") {
		t.Fatalf("reason not truncated at a rune boundary: %d bytes %q", len(r.Error), r.Error)
	}
	for _, want := range []CompactionRecord{
		{},
		{Generation: 0, Horizon: 0, Tried: 2, Outcome: CompactionFailed, FailedMs: 5, Error: "too many keys"},
		{Generation: 1, Horizon: 10, Tried: 1, Kept: 4, Removed: 6, Outcome: CompactionSucceeded, SucceededMs: 9, DurationMs: 2},
		r,
	} {
		props := want.Properties()
		if len(props) > 64 {
			t.Fatalf("%d properties", len(props))
		}
		for k := range props {
			if len(k) > 256 {
				t.Fatalf("key of %d bytes", len(k))
			}
		}
		got, err := DecodeCompactionRecord(want.MarkDelete(), props)
		if err != nil || got != want {
			t.Fatalf("round trip of %+v: %+v, %v", want, got, err)
		}
	}

	// A record written before the status properties: a view is a success.
	got, err := DecodeCompactionRecord(99, map[string]int64{"generation": 2, "kept": 1, "removed": 3})
	if err != nil || got.Outcome != CompactionSucceeded || got.Horizon != 100 || got.Generation != 2 || got.Tried != 2 {
		t.Fatalf("old record: %+v, %v", got, err)
	}
	if got, _ := DecodeCompactionRecord(-1, nil); got.Outcome != CompactionNotRun || got.Outcome.String() != "NOT_RUN" {
		t.Fatalf("no record: %+v", got)
	}
	// A status from a newer version reads as NOT_RUN; a reason only with ERROR.
	if got, _ := DecodeCompactionRecord(4, map[string]int64{"generation": 1, "status": 9, "error:x": 0}); got.Outcome != CompactionNotRun || got.Error != "" {
		t.Fatalf("unknown status: %+v", got)
	}
	for name, props := range map[string]map[string]int64{
		"negative generation": {"generation": -1},
		"negative time":       {"failedMs": -5},
		"negative tried":      {"triedGeneration": -1},
		"two reasons":         {"status": 2, "error:a": 0, "error:b": 0},
	} {
		if _, err := DecodeCompactionRecord(0, props); !errors.Is(err, ErrCompactionRecord) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := DecodeCompactionRecord(-2, nil); !errors.Is(err, ErrCompactionRecord) {
		t.Errorf("mark-delete −2: %v", err)
	}
}

// FuzzDecodeCompactionRecord: properties read from etcd either fail to
// decode or re-encode to the same record, within the cursor format's
// bounds.
func FuzzDecodeCompactionRecord(f *testing.F) {
	f.Add(int64(99), int64(2), int64(1), int64(3), int64(1), int64(10), int64(2), int64(0), "", "")
	f.Add(int64(-1), int64(0), int64(0), int64(0), int64(2), int64(0), int64(0), int64(7), "error:too many keys", "")
	f.Add(int64(5), int64(1), int64(0), int64(0), int64(-1), int64(0), int64(0), int64(0), "error:a", "error:b")
	f.Fuzz(func(t *testing.T, md, gen, kept, removed, status, succ, dur int64, failed int64, k1, k2 string) {
		props := map[string]int64{"generation": gen, "triedGeneration": kept ^ gen, "kept": kept, "removed": removed, "succeededMs": succ, "durationMs": dur, "failedMs": failed}
		if status >= 0 {
			props["status"] = status
		}
		for _, k := range []string{k1, k2} {
			if k != "" && len(k) <= 256 {
				props[k] = 0
			}
		}
		r, err := DecodeCompactionRecord(md, props)
		if err != nil {
			return
		}
		again := r.Properties()
		for k := range again {
			if len(k) > 256 {
				t.Fatalf("key of %d bytes", len(k))
			}
		}
		r2, err := DecodeCompactionRecord(r.MarkDelete(), again)
		if err != nil || r2 != r {
			t.Fatalf("re-encoding changed %+v into %+v (%v)", r, r2, err)
		}
	})
}
