package txncheck

// Check on hand-made histories: one that passes, and for each invariant
// histories that must fail it (the checker is shown able to fail), with
// the evidence it reports. Run: go test ./e2e/txncheck/

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// txns of the base history: writer 0 commits t0 (partitions 0 and 1)
// and t1 (partition 0), aborts t2; writer 1's t0 has an unknown outcome
// and committed (it is read), its t1 an unknown outcome and aborted (not
// read), its t2 failed before its commit was asked. The inputs i0 and i2
// are acknowledged by committed transactions (w0-t0, w1-t0), i1 and i3 by
// aborted ones (w0-t2, w1-t1): i1 and i3 are left.
func baseTxns() []Txn {
	return []Txn{
		{Name: "w0-t0", Writer: 0, Seq: 0, CommitAsked: true, Outcome: Committed, Acks: []string{"i0"},
			Writes: map[int][]string{0: {"a0", "a1"}, 1: {"a2"}}},
		{Name: "w0-t1", Writer: 0, Seq: 1, CommitAsked: true, Outcome: Committed,
			Writes: map[int][]string{0: {"b0"}}},
		{Name: "w0-t2", Writer: 0, Seq: 2, CommitAsked: false, Outcome: Aborted, Acks: []string{"i1"},
			Writes: map[int][]string{0: {"c0"}, 1: {"c1"}}},
		{Name: "w1-t0", Writer: 1, Seq: 0, CommitAsked: true, Outcome: Unknown, Acks: []string{"i2"},
			Writes: map[int][]string{0: {"d0"}, 1: {"d1"}}},
		{Name: "w1-t1", Writer: 1, Seq: 1, CommitAsked: true, Outcome: Unknown, Acks: []string{"i3"},
			Writes: map[int][]string{1: {"e0"}}},
		{Name: "w1-t2", Writer: 1, Seq: 2, CommitAsked: false, Outcome: Unknown,
			Writes: map[int][]string{0: {"f0"}}},
	}
}

// reads makes reads from "partition:value" items; a read's id (its
// position) is the item itself.
func reads(items ...string) []Read {
	var rs []Read
	for _, it := range items {
		var p int
		var v string
		if _, err := fmt.Sscanf(it, "%d:%s", &p, &v); err != nil {
			panic(it)
		}
		rs = append(rs, Read{Partition: p, Value: v, ID: it})
	}
	return rs
}

// baseReads is what a correct system shows for baseTxns.
func baseReads() []Read {
	return reads("0:a0", "0:a1", "1:a2", "0:d0", "1:d1", "0:b0")
}

var inputs = []string{"i0", "i1", "i2", "i3"}

func history(rs []Read) History {
	return History{Txns: baseTxns(), Views: []View{{Name: "final", Complete: true, Ordered: true, Reads: rs}},
		Inputs: inputs, Left: reads("0:i1", "0:i3")}
}

func TestCheckPasses(t *testing.T) {
	r := Check(history(baseReads()))
	if !r.OK() {
		t.Fatalf("violations: %v", r.Violations)
	}
	want := Stats{Txns: 6, Committed: 2, Aborted: 1, Unknown: 3, UnknownSeen: 1, UnknownUnseen: 2, Values: 10, Reads: 6, Acked: 2, Left: 2}
	if r.Stats != want {
		t.Fatalf("stats %+v, want %+v", r.Stats, want)
	}
	if left := LeftExpected(history(baseReads())); fmt.Sprint(left) != "[i1 i3]" {
		t.Fatalf("LeftExpected = %v, want [i1 i3]", left)
	}
	// A consumer redelivers what it had not acknowledged (same ids): not a
	// duplicate; an incomplete, unordered view need not hold everything.
	live := View{Name: "live", Reads: append(baseReads()[:3], baseReads()[:2]...)}
	h := history(baseReads())
	h.Views = append(h.Views, live)
	if r := Check(h); !r.OK() {
		t.Fatalf("redelivery: %v", r.Violations)
	}
}

func TestCheckFails(t *testing.T) {
	withID := func(rs []Read, i int, id string) []Read { rs[i].ID = id; return rs }
	for _, tc := range []struct {
		name string
		h    History
		want []string // substrings of the violations, one each, in order
	}{
		{"aborted read", history(append(baseReads(), reads("1:c1")...)),
			[]string{"aborted-read in view final, transaction w0-t2, partition 1: [c1]"}},
		{"commit never asked", history(append(baseReads(), reads("0:f0")...)),
			[]string{"aborted-read in view final, transaction w1-t2, partition 0: [f0]", "commit asked: false"}},
		{"lost committed write", history(slices.Delete(baseReads(), 2, 3)),
			[]string{"lost-write in view final, transaction w0-t0, partition 1: [a2]"}},
		{"lost in one view only", History{Txns: baseTxns(), Views: []View{
			{Name: "final", Complete: true, Ordered: true, Reads: baseReads()},
			{Name: "live", Complete: true, Reads: slices.Delete(baseReads(), 5, 6)}}},
			[]string{"lost-write in view live, transaction w0-t1, partition 0: [b0]"}},
		{"views disagree on an unknown outcome", History{Txns: baseTxns(), Views: []View{
			{Name: "final", Complete: true, Ordered: true, Reads: baseReads()},
			{Name: "live", Complete: true, Reads: slices.Delete(baseReads(), 3, 5)}}},
			[]string{"atomicity in view live, transaction w1-t0, partition 0: [d0]", "views [final] read it"}},
		{"atomicity", history(slices.Delete(baseReads(), 4, 5)),
			[]string{"atomicity in view final, transaction w1-t0, partition 1: [d1]", "read [d0]"}},
		{"order across transactions", history(reads("0:b0", "0:a0", "0:a1", "1:a2", "0:d0", "1:d1")),
			[]string{"order in view final, transaction w0-t0, partition 0: [b0 a0]", "transaction w0-t0 read after its later transaction w0-t1"}},
		{"order within a transaction", history(reads("0:a1", "0:a0", "1:a2", "0:d0", "1:d1", "0:b0")),
			[]string{"order in view final, transaction w0-t0, partition 0: [a1 a0]", "out of send order"}},
		{"never written", history(append(baseReads(), reads("1:zz")...)),
			[]string{"unknown-value in view final, partition 1: [zz]", "never written"}},
		{"wrong partition", history(append(baseReads(), reads("1:b0")...)),
			[]string{"unknown-value in view final, transaction w0-t1, partition 1: [b0]", "written to partition 0"}},
	} {
		t.Run(tc.name, func(t *testing.T) { wantViolations(t, Check(tc.h), tc.want) })
	}
	t.Run("duplicate by value", func(t *testing.T) {
		rs := append(baseReads(), Read{Partition: 0, Value: "b0", ID: "0:9"})
		wantViolations(t, Check(history(rs)), []string{"duplicate in view final, transaction w0-t1, partition 0: [b0]", "read at 2 positions [0:b0 0:9]"})
	})
	t.Run("duplicate by id", func(t *testing.T) {
		rs := withID(baseReads(), 5, "0:a0") // b0 at a0's position
		wantViolations(t, Check(history(rs)), []string{"duplicate in view final, partition 0: [a0 b0]", "one position 0:a0 holds two values"})
	})
	t.Run("input acknowledged twice", func(t *testing.T) {
		h := history(baseReads())
		h.Txns[1].Acks = []string{"i0"}
		wantViolations(t, Check(h), []string{"ack-twice in view inputs, transaction w0-t0, partition 0: [i0]", "[w0-t0 w0-t1]"})
	})
	t.Run("committed acknowledgement lost", func(t *testing.T) {
		h := history(baseReads())
		h.Left = append(h.Left, reads("0:i0")...)
		wantViolations(t, Check(h), []string{"ack-lost in view inputs, transaction w0-t0, partition 0: [i0]", "delivered again at 0:i0"})
	})
	t.Run("acknowledgement of an unknown outcome that committed lost", func(t *testing.T) {
		h := history(baseReads())
		h.Left = append(h.Left, reads("0:i2")...)
		wantViolations(t, Check(h), []string{"ack-lost in view inputs, transaction w1-t0, partition 0: [i2]"})
	})
	t.Run("aborted acknowledgement kept", func(t *testing.T) {
		h := history(baseReads())
		h.Left = reads("0:i1")
		wantViolations(t, Check(h), []string{"input-lost in view inputs, partition 0: [i3]"})
	})
	t.Run("bounded", func(t *testing.T) {
		rs := baseReads()
		for i := range ViolationsMax + 5 {
			rs = append(rs, Read{Partition: 1, Value: fmt.Sprintf("zz%d", i), ID: fmt.Sprintf("1:x%d", i)})
		}
		r := Check(history(rs))
		if len(r.Violations) != ViolationsMax+1 || !strings.Contains(r.Violations[ViolationsMax].Detail, "5 more unknown-value violations") {
			t.Fatalf("%d violations, last %v", len(r.Violations), r.Violations[len(r.Violations)-1])
		}
	})
}

// wantViolations fails unless r holds exactly one violation per want, each
// containing its want (want[0] the violation's start; further items
// anywhere in it, for one violation).
func wantViolations(t *testing.T, r Result, want []string) {
	t.Helper()
	if len(r.Violations) != 1 {
		t.Fatalf("want 1 violation, got %d: %v", len(r.Violations), r.Violations)
	}
	s := r.Violations[0].String()
	if !strings.HasPrefix(s, want[0]) {
		t.Fatalf("violation %q, want it to start %q", s, want[0])
	}
	for _, w := range want[1:] {
		if !strings.Contains(s, w) {
			t.Fatalf("violation %q lacks %q", s, w)
		}
	}
	t.Logf("%s", s)
}

func TestCheckPanicsOnRewrittenValue(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	txns := baseTxns()
	txns[1].Writes[0] = []string{"a0"}
	Check(History{Txns: txns})
}
