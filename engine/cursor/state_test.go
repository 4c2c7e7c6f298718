package cursor

// Tests of the State machine.
//
//	go test ./engine/cursor/                        # everything below + encode tests
//	go test -run TestModel -v ./engine/cursor/      # model-based property test
//	go test -run TestModel ./engine/cursor/ -model.seed=42 -model.ops=200000
//
// TestModel replays seeded random operation sequences against State and a
// naive map[int64]bool model and compares every query after every op.

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

var (
	modelSeed = flag.Uint64("model.seed", 0, "run TestModel with this seed only (0 = the fixed seed set)")
	modelOps  = flag.Int("model.ops", 5000, "operations per TestModel sequence")
)

// op is one step of a table-driven case.
type op struct {
	ack     bool  // Ack(off, n) when true, MarkDelete(off, props) otherwise
	off, n  int64 // n: records for Ack
	props   map[string]int64
	wantErr error // Ack only
	changed bool  // expected Version bump
}

func ack(off, n int64) op { return op{ack: true, off: off, n: n, changed: true} }
func reack(off, n int64) op {
	o := ack(off, n)
	o.changed = false
	return o
}
func md(off int64) op { return op{off: off, changed: true} }
func mdp(off int64, props map[string]int64, changed bool) op {
	return op{off: off, props: props, changed: changed}
}
func (o op) fails(err error) op { o.wantErr, o.changed = err, false; return o }

func (o op) String() string {
	if o.ack {
		return fmt.Sprintf("Ack(%d,%d)", o.off, o.n)
	}
	return fmt.Sprintf("MarkDelete(%d,%v)", o.off, o.props)
}

func TestStateTable(t *testing.T) {
	type R = [2]int64
	cases := []struct {
		name      string
		start     int64
		ops       []op
		md        int64
		ranges    []R
		props     map[string]int64
		maxRanges int
	}{
		{name: "empty", start: -1, md: -1},
		{name: "in order", start: -1, ops: []op{ack(0, 1), ack(1, 1), ack(2, 3)}, md: 4},
		{name: "out of order", start: -1, ops: []op{ack(3, 1), ack(1, 1), ack(2, 1)}, md: -1,
			ranges: []R{{1, 4}}},
		{name: "out of order then gap filled", start: -1,
			ops: []op{ack(3, 1), ack(1, 1), ack(6, 2), ack(0, 1), ack(2, 1)}, md: 3, ranges: []R{{6, 8}}},
		{name: "batch partial acks", start: 9, // entry [10,15): batch indexes 1, 3, 4 acked
			ops: []op{ack(11, 1), ack(13, 1), ack(14, 1)}, md: 9, ranges: []R{{11, 12}, {13, 15}}},
		{name: "batch completed by index 0 then 2", start: 9,
			ops: []op{ack(11, 1), ack(13, 2), ack(10, 1), ack(12, 1)}, md: 14},
		{name: "whole entry ack over partial acks", start: 9,
			ops: []op{ack(11, 1), ack(13, 1), ack(10, 5)}, md: 14},
		{name: "re-acks idempotent", start: -1,
			ops: []op{ack(5, 3), reack(5, 3), reack(6, 1), reack(5, 1), reack(7, 1)}, md: -1, ranges: []R{{5, 8}}},
		{name: "re-ack below mark-delete", start: -1,
			ops: []op{ack(0, 4), reack(0, 4), reack(2, 1)}, md: 3},
		{name: "below mark-delete ignored", start: 100,
			ops: []op{reack(0, 1), reack(50, 51), ack(99, 3)}, md: 101},
		{name: "ack straddling mark-delete", start: 100, ops: []op{ack(95, 10)}, md: 104},
		{name: "ack straddling mark-delete absorbs ranges", start: 100,
			ops: []op{ack(110, 5), ack(106, 2), ack(95, 11)}, md: 107, ranges: []R{{110, 115}}},
		{name: "merge adjacent both sides", start: -1,
			ops: []op{ack(2, 2), ack(6, 2), ack(4, 2)}, md: -1, ranges: []R{{2, 8}}},
		{name: "merge spanning many", start: -1,
			ops: []op{ack(2, 1), ack(4, 1), ack(6, 1), ack(8, 1), ack(3, 6)}, md: -1, ranges: []R{{2, 9}}},
		{name: "extend left and right", start: -1,
			ops: []op{ack(5, 2), ack(4, 2), ack(6, 3)}, md: -1, ranges: []R{{4, 9}}},
		{name: "mark-delete absorbs contiguous", start: -1,
			ops: []op{ack(3, 2), ack(5, 1), ack(8, 1), md(2)}, md: 5, ranges: []R{{8, 9}}},
		{name: "mark-delete drops covered and absorbs straddling", start: -1,
			ops: []op{ack(3, 2), ack(8, 4), md(9)}, md: 11},
		{name: "mark-delete never moves back", start: 50,
			ops: []op{mdp(40, map[string]int64{"a": 1}, false), mdp(49, nil, false)}, md: 50},
		{name: "mark-delete same offset updates props", start: 50,
			ops: []op{mdp(50, map[string]int64{"a": 1}, true), mdp(50, map[string]int64{"a": 1}, false)},
			md:  50, props: map[string]int64{"a": 1}},
		{name: "props replaced, empty clears", start: -1,
			ops: []op{mdp(3, map[string]int64{"a": 1, "b": -2}, true), mdp(4, map[string]int64{"c": 3}, true),
				mdp(4, map[string]int64{}, true), mdp(4, nil, false)},
			md: 4},
		{name: "props kept when ignored", start: -1,
			ops: []op{mdp(5, map[string]int64{"x": 7}, true), mdp(2, map[string]int64{"y": 1}, false)},
			md:  5, props: map[string]int64{"x": 7}},
		{name: "invalid acks", start: -1,
			ops: []op{ack(0, 0).fails(ErrInvalidRange), ack(0, -1).fails(ErrInvalidRange),
				ack(-1, 2).fails(ErrInvalidRange), ack(math.MaxInt64-1, 2).fails(ErrInvalidRange)},
			md: -1},
		{name: "largest offsets", start: -1,
			ops: []op{ack(math.MaxInt64-1, 1), ack(math.MaxInt64-3, 1)}, md: -1,
			ranges: []R{{math.MaxInt64 - 3, math.MaxInt64 - 2}, {math.MaxInt64 - 1, math.MaxInt64}}},
		{name: "mark-delete clamped to MaxOffset", start: -1,
			ops: []op{md(math.MaxInt64), reack(math.MaxInt64-1, 1)}, md: MaxOffset},
		{name: "bound: new range refused, merges allowed", start: -1, maxRanges: 3,
			ops: []op{ack(1, 1), ack(3, 1), ack(5, 1), ack(7, 1).fails(ErrStateTooLarge),
				ack(6, 1), ack(7, 2), ack(10, 1).fails(ErrStateTooLarge), ack(2, 1), ack(10, 1)},
			md: -1, ranges: []R{{1, 4}, {5, 9}, {10, 11}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var opts []Option
			if tc.maxRanges > 0 {
				opts = append(opts, WithMaxAckedRanges(tc.maxRanges))
			}
			s := New(tc.start, opts...)
			for _, o := range tc.ops {
				v, before := s.Version(), s.Clone()
				if o.ack {
					err := s.Ack(o.off, o.n)
					if !errors.Is(err, o.wantErr) || (err == nil) != (o.wantErr == nil) {
						t.Fatalf("%v: err %v, want %v", o, err, o.wantErr)
					}
					if err != nil && !s.Equal(before) {
						t.Fatalf("%v failed but changed the state: %v → %v", o, before, s)
					}
				} else if got := s.MarkDelete(o.off, o.props); got != o.changed {
					t.Fatalf("%v: changed %v, want %v", o, got, o.changed)
				}
				if bumped := s.Version() != v; bumped != o.changed {
					t.Fatalf("%v: version %d → %d, want changed=%v", o, v, s.Version(), o.changed)
				}
				if o.changed == s.Equal(before) {
					t.Fatalf("%v: changed=%v but Equal(before)=%v", o, o.changed, s.Equal(before))
				}
				checkInvariants(t, s)
			}
			if s.MarkDeleteOffset() != tc.md || !slices.Equal(s.Ranges(), tc.ranges) ||
				!maps.Equal(s.Properties(), tc.props) {
				t.Fatalf("got md=%d ranges=%v props=%v, want md=%d ranges=%v props=%v",
					s.MarkDeleteOffset(), s.Ranges(), s.Properties(), tc.md, tc.ranges, tc.props)
			}
			roundTrip(t, s)
		})
	}
}

func TestQueries(t *testing.T) {
	s := New(9)
	for _, r := range [][2]int64{{12, 15}, {20, 21}, {23, 30}} {
		if err := s.Ack(r[0], r[1]-r[0]); err != nil {
			t.Fatal(err)
		}
	}
	// md=9, acked: 12 13 14, 20, 23..29
	if got := s.FirstUnacked(); got != 10 {
		t.Errorf("FirstUnacked = %d", got)
	}
	if got := s.AckedCount(); got != 11 {
		t.Errorf("AckedCount = %d", got)
	}
	if got := s.RangeCount(); got != 3 {
		t.Errorf("RangeCount = %d", got)
	}
	for _, c := range []struct{ o, want int64 }{
		{0, 10}, {9, 10}, {10, 10}, {11, 11}, {12, 15}, {14, 15}, {15, 15}, {20, 21}, {22, 22}, {25, 30}, {30, 30},
	} {
		if got := s.NextUnackedFrom(c.o); got != c.want {
			t.Errorf("NextUnackedFrom(%d) = %d, want %d", c.o, got, c.want)
		}
	}
	for _, c := range []struct{ start, end, want int64 }{
		{0, 10, 0}, {0, 11, 1}, {10, 12, 2}, {12, 15, 0}, {11, 16, 2}, {10, 30, 9}, {0, 40, 19}, {25, 24, 0}, {24, 26, 0},
	} {
		if got := s.UnackedIn(c.start, c.end); got != c.want {
			t.Errorf("UnackedIn(%d, %d) = %d, want %d", c.start, c.end, got, c.want)
		}
	}
	for o, want := range map[int64]bool{-5: true, 9: true, 10: false, 12: true, 15: false, 20: true, 21: false, 29: true, 30: false} {
		if got := s.IsAcked(o); got != want {
			t.Errorf("IsAcked(%d) = %v", o, got)
		}
	}
	// Ranges and Properties return copies.
	rs := s.Ranges()
	rs[0][0] = 0
	p := map[string]int64{"k": 1}
	s.MarkDelete(9, p)
	p["k"] = 2
	s.Properties()["k"] = 3
	if s.Ranges()[0][0] != 12 || s.Properties()["k"] != 1 {
		t.Fatal("caller mutation leaked into the state")
	}
	// NextUnackedFrom past everything.
	full := New(-1)
	if err := full.Ack(5, math.MaxInt64-5); err != nil {
		t.Fatal(err)
	}
	if got := full.NextUnackedFrom(7); got != math.MaxInt64 {
		t.Errorf("NextUnackedFrom at the end = %d", got)
	}
}

func TestCheckProperties(t *testing.T) {
	big := map[string]int64{}
	for i := range MaxProperties + 1 {
		big[fmt.Sprint(i)] = int64(i)
	}
	longKey := map[string]int64{string(make([]byte, MaxPropertyKeyBytes+1)): 1}
	for _, p := range []map[string]int64{big, longKey} {
		if err := CheckProperties(p); !errors.Is(err, ErrStateTooLarge) {
			t.Errorf("CheckProperties: %v", err)
		}
	}
	delete(big, "0")
	if err := CheckProperties(big); err != nil {
		t.Error(err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("MarkDelete with oversized properties did not panic")
			}
		}()
		New(-1).MarkDelete(3, longKey)
	}()
}

// TestBound: 10 000 ranges, the hole-creating ack beyond fails and leaves
// the state unchanged; acks that extend or merge ranges still succeed.
func TestBound(t *testing.T) {
	s := New(-1)
	// Record 0 stays unacked; ack 1, 3, 5, … 19 999: 10 000 one-record ranges.
	for i := range int64(MaxAckedRanges) {
		if err := s.Ack(2*i+1, 1); err != nil {
			t.Fatalf("range %d: %v", i, err)
		}
	}
	if s.RangeCount() != MaxAckedRanges {
		t.Fatalf("RangeCount = %d", s.RangeCount())
	}
	before := s.Clone()
	for _, o := range []int64{20_001, 30_000, math.MaxInt64 - 1} {
		if err := s.Ack(o, 1); !errors.Is(err, ErrStateTooLarge) {
			t.Fatalf("Ack(%d) at the bound: %v", o, err)
		}
	}
	if !s.Equal(before) || s.Version() != before.Version() {
		t.Fatal("refused ack changed the state")
	}
	ok := func(off, n int64) {
		t.Helper()
		if err := s.Ack(off, n); err != nil {
			t.Fatalf("Ack(%d, %d): %v", off, n, err)
		}
	}
	ok(20_000, 1) // extends the last range
	ok(1, 1)      // re-ack
	ok(2, 1)      // merges [1,2) and [3,4)
	if s.RangeCount() != MaxAckedRanges-1 {
		t.Fatalf("RangeCount after merge = %d", s.RangeCount())
	}
	ok(30_000, 1) // the freed slot is usable
	if err := s.Ack(40_000, 1); !errors.Is(err, ErrStateTooLarge) {
		t.Fatalf("Ack beyond bound: %v", err)
	}
	ok(100, 9_000) // merges thousands: [99, 9100)
	ok(4, 96)      // joins [1, 4) … [99, 9100) into [1, 9100)
	if s.RangeCount() != MaxAckedRanges-4_548 {
		t.Fatalf("RangeCount after merges = %d", s.RangeCount())
	}
	ok(0, 1) // fills the gap above mark-delete: absorbs [1, 9100)
	if s.MarkDeleteOffset() != 9_099 {
		t.Fatalf("md = %d", s.MarkDeleteOffset())
	}
	checkInvariants(t, s)
	if n := len(Encode(s)); n > MaxEncodedSize {
		t.Fatalf("encoding %d bytes", n)
	}
}

// model is the naive reference: a set of acknowledged records.
type model struct {
	md    int64
	acked map[int64]bool // records > md
	props map[string]int64
}

// absorb applies a mark-delete move: drop records ≤ md, then advance.
func (m *model) absorb() {
	for o := range m.acked {
		if o <= m.md {
			delete(m.acked, o)
		}
	}
	m.advance()
}

// advance moves md over the acked records right above it.
func (m *model) advance() {
	for m.acked[m.md+1] {
		delete(m.acked, m.md+1)
		m.md++
	}
}

func (m *model) isAcked(o int64) bool { return o <= m.md || m.acked[o] }

func (m *model) ranges() [][2]int64 {
	keys := slices.Sorted(maps.Keys(m.acked))
	var rs [][2]int64
	for _, k := range keys {
		if n := len(rs); n > 0 && rs[n-1][1] == k {
			rs[n-1][1]++
		} else {
			rs = append(rs, [2]int64{k, k + 1})
		}
	}
	return rs
}

func (m *model) clone() *model {
	return &model{md: m.md, acked: maps.Clone(m.acked), props: maps.Clone(m.props)}
}

func (m *model) equal(o *model) bool {
	return m.md == o.md && maps.Equal(m.acked, o.acked) && maps.Equal(m.props, o.props)
}

func TestModel(t *testing.T) {
	type config struct {
		universe  int64 // acks land in [markDelete-3, markDelete-3+universe)
		maxRecs   int64 // records per ack drawn from [1, maxRecs]
		maxRanges int
		mdPct     int // share of MarkDelete ops, in percent
	}
	configs := []config{
		{universe: 64, maxRecs: 4, maxRanges: MaxAckedRanges, mdPct: 12},
		{universe: 600, maxRecs: 3, maxRanges: MaxAckedRanges, mdPct: 12},
		{universe: 4000, maxRecs: 2, maxRanges: MaxAckedRanges, mdPct: 1}, // hundreds of ranges
		{universe: 2000, maxRecs: 40, maxRanges: 12, mdPct: 12},           // exercises the bound
		{universe: 300, maxRecs: 1, maxRanges: 5, mdPct: 12},
	}
	seeds := []uint64{1, 2, 3, 0xC0FFEE}
	if *modelSeed != 0 {
		seeds = []uint64{*modelSeed}
	}
	for ci, cfg := range configs {
		for _, seed := range seeds {
			t.Run(fmt.Sprintf("cfg%d/seed%d", ci, seed), func(t *testing.T) {
				t.Parallel()
				runModel(t, seed, *modelOps, cfg.universe, cfg.maxRecs, cfg.maxRanges, cfg.mdPct)
			})
		}
	}
}

func runModel(t *testing.T, seed uint64, ops int, universe, maxRecs int64, maxRanges, mdPct int) {
	rng := rand.New(rand.NewPCG(seed, 0x9E3779B97F4A7C15))
	start := int64(rng.IntN(5)) - 1
	s := New(start, WithMaxAckedRanges(maxRanges))
	m := &model{md: start, acked: map[int64]bool{}}
	var tooLarge, merges, maxSeen int
	for i := range ops {
		before, vBefore := m.clone(), s.Version()
		var desc string
		switch k := rng.IntN(100); {
		case k < 3: // invalid ack
			desc = "Ack(invalid)"
			if err := s.Ack(m.md+rng.Int64N(universe), -rng.Int64N(2)); !errors.Is(err, ErrInvalidRange) {
				t.Fatalf("op %d: invalid ack: %v", i, err)
			}
		case k >= 3+mdPct: // ack in a window above mark-delete; half of them close to it
			span := universe
			if rng.IntN(2) == 0 {
				span = min(universe, 3*maxRecs+4)
			}
			off := max(m.md-3+rng.Int64N(span), 0)
			n := 1 + rng.Int64N(maxRecs)
			desc = fmt.Sprintf("Ack(%d,%d)", off, n)
			cand := m.clone()
			for o := max(off, cand.md+1); o < off+n; o++ {
				cand.acked[o] = true
			}
			cand.advance()
			candRanges, rangesBefore := len(cand.ranges()), s.RangeCount() // = model's, checked last op
			wantErr := candRanges > maxRanges && candRanges > rangesBefore
			err := s.Ack(off, n)
			if wantErr {
				if !errors.Is(err, ErrStateTooLarge) {
					t.Fatalf("op %d %s: err %v, want ErrStateTooLarge (model ranges %d)", i, desc, err, candRanges)
				}
				tooLarge++
			} else {
				if err != nil {
					t.Fatalf("op %d %s: %v", i, desc, err)
				}
				if rangesBefore >= maxRanges && !cand.equal(m) {
					merges++
				}
				m = cand
			}
		default: // mark-delete, sometimes backwards, sometimes with properties
			to := m.md - 5 + rng.Int64N(max(universe/8, 8))
			var props map[string]int64
			if rng.IntN(3) == 0 {
				props = map[string]int64{fmt.Sprint("p", rng.IntN(3)): rng.Int64N(3) - 1}
			}
			desc = fmt.Sprintf("MarkDelete(%d,%v)", to, props)
			if to >= m.md {
				m.md = to
				m.props = nil
				if len(props) > 0 {
					m.props = maps.Clone(props)
				}
				m.absorb()
			}
			changed := s.MarkDelete(to, props)
			if changed != !m.equal(before) {
				t.Fatalf("op %d %s: changed=%v, model changed=%v", i, desc, changed, !m.equal(before))
			}
		}
		if changed := !m.equal(before); changed != (s.Version() != vBefore) {
			t.Fatalf("op %d %s: version %d→%d, model changed=%v", i, desc, vBefore, s.Version(), changed)
		}
		compareModel(t, rng, i, desc, s, m, universe, maxRecs)
		maxSeen = max(maxSeen, s.RangeCount())
	}
	t.Logf("%d ops: final %v; max %d ranges, %d acks refused by the bound, %d merges at the bound",
		ops, s, maxSeen, tooLarge, merges)
	if maxRanges < 20 && tooLarge == 0 {
		t.Errorf("bound never reached: the configuration does not test it")
	}
}

func compareModel(t *testing.T, rng *rand.Rand, i int, desc string, s *State, m *model, universe, maxRecs int64) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("op %d %s: %s\nstate %v\nmodel md=%d ranges=%v", i, desc, fmt.Sprintf(format, args...), s, m.md, m.ranges())
	}
	checkInvariants(t, s)
	if s.MarkDeleteOffset() != m.md {
		fail("MarkDeleteOffset %d, want %d", s.MarkDeleteOffset(), m.md)
	}
	if s.FirstUnacked() != m.md+1 || m.acked[m.md+1] {
		fail("FirstUnacked %d", s.FirstUnacked())
	}
	if s.AckedCount() != int64(len(m.acked)) {
		fail("AckedCount %d, want %d", s.AckedCount(), len(m.acked))
	}
	if rs := m.ranges(); !slices.Equal(s.Ranges(), rs) || s.RangeCount() != len(rs) {
		fail("Ranges %v (count %d), want %v", s.Ranges(), s.RangeCount(), rs)
	}
	if !maps.Equal(s.Properties(), m.props) {
		fail("Properties %v, want %v", s.Properties(), m.props)
	}
	lo, hi := m.md-2, m.md+universe+maxRecs+2
	// Every offset every 64 ops, a random sample otherwise.
	check := func(o int64) {
		if s.IsAcked(o) != m.isAcked(o) {
			fail("IsAcked(%d) = %v", o, s.IsAcked(o))
		}
		want := o
		for m.isAcked(want) {
			want++
		}
		if got := s.NextUnackedFrom(o); got != want {
			fail("NextUnackedFrom(%d) = %d, want %d", o, got, want)
		}
	}
	if i%64 == 0 {
		next := hi // first unacked ≥ o, computed right to left
		for o := hi - 1; o >= lo; o-- {
			if !m.isAcked(o) {
				next = o
			}
			if s.IsAcked(o) != m.isAcked(o) {
				fail("IsAcked(%d) = %v", o, s.IsAcked(o))
			}
			if got := s.NextUnackedFrom(o); got != next {
				fail("NextUnackedFrom(%d) = %d, want %d", o, got, next)
			}
		}
	} else {
		for range 16 {
			check(lo + rng.Int64N(hi-lo))
		}
	}
	for range 8 {
		a := lo + rng.Int64N(hi-lo)
		b := a + rng.Int64N(3*maxRecs+3) - 1
		var want int64
		for o := a; o < b; o++ {
			if !m.isAcked(o) {
				want++
			}
		}
		if got := s.UnackedIn(a, b); got != want {
			fail("UnackedIn(%d, %d) = %d, want %d", a, b, got, want)
		}
	}
	if i%97 == 0 {
		c := s.Clone()
		if !c.Equal(s) || c.Version() != s.Version() {
			fail("Clone differs")
		}
		roundTrip(t, s)
	}
}

// checkInvariants verifies the State invariants documented on the type.
func checkInvariants(t *testing.T, s *State) {
	t.Helper()
	if s.markDelete < -1 || s.markDelete > MaxOffset {
		t.Fatalf("markDelete %d out of range", s.markDelete)
	}
	if err := CheckProperties(s.props); err != nil || (s.props != nil && len(s.props) == 0) {
		t.Fatalf("properties %v: %v", s.props, err)
	}
	prev := s.markDelete + 1 // an unacked offset
	var n int64
	for i, r := range s.ranges {
		if r[0] <= prev || r[1] <= r[0] {
			t.Fatalf("range %d %v not canonical after %d: %v", i, r, prev, s)
		}
		n += r[1] - r[0]
		prev = r[1]
	}
	if n != s.acked {
		t.Fatalf("acked %d, ranges hold %d", s.acked, n)
	}
	if len(s.ranges) > MaxAckedRanges {
		t.Fatalf("%d ranges", len(s.ranges))
	}
}
