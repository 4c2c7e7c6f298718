package cursor

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
)

// Bounds of a cursor state. They make the persisted encoding small enough for
// one etcd value (see MaxEncodedSize and docs/cursor-format.md).
const (
	// MaxAckedRanges is the default and largest number of disjoint
	// acknowledged ranges above mark-delete a State keeps (Pulsar's
	// managedLedgerMaxUnackedRangesToPersist). WithMaxAckedRanges lowers it.
	MaxAckedRanges = 10_000
	// MaxProperties is the largest number of mark-delete properties.
	MaxProperties = 64
	// MaxPropertyKeyBytes is the longest mark-delete property key, in bytes.
	MaxPropertyKeyBytes = 256
	// MaxOffset is the largest record offset a State tracks, so that every
	// half-open end (offset+1) fits in an int64.
	MaxOffset = math.MaxInt64 - 1
)

// Errors returned by State methods and CheckProperties. Compare with
// errors.Is.
var (
	// ErrStateTooLarge is returned by Ack when acknowledging would create more
	// than the State's range limit of disjoint ranges, and by
	// CheckProperties. The engine maps it to lakestream.ErrCursorStateTooLarge.
	ErrStateTooLarge = errors.New("cursor: state too large")
	// ErrInvalidRange is returned by Ack for records < 1, a negative offset
	// or an end beyond MaxOffset+1. The engine maps it to
	// lakestream.ErrInvalidArgument.
	ErrInvalidRange = errors.New("cursor: invalid ack range")
)

// Option adjusts a State made by New or Decode.
type Option func(*State)

// WithMaxAckedRanges sets the range limit (default and maximum
// MaxAckedRanges; values < 1 or above MaxAckedRanges are clamped).
func WithMaxAckedRanges(n int) Option {
	return func(s *State) { s.maxRanges = min(max(n, 1), MaxAckedRanges) }
}

// State is the acknowledgement state of one cursor: a mark-delete offset,
// the acknowledged records above it as disjoint half-open ranges, and the
// properties of the last MarkDelete. It is a pure, deterministic state
// machine: no I/O, no clock, no goroutines. It is not safe for concurrent
// use; the owner (one subscription) serializes calls.
//
// Invariants, kept by every method and checked by Decode:
//   - -1 ≤ markDelete ≤ MaxOffset;
//   - ranges are ascending, non-empty and never adjacent (at least one
//     unacknowledged record between two ranges);
//   - the first range starts at markDelete+2 or later: record markDelete+1
//     is never acknowledged (it would have been absorbed);
//   - len(ranges) ≤ the range limit, except for a decoded state that was
//     already above a lowered limit (acks that add ranges then fail).
//
// Why a sorted range list rather than a bitmap: see doc.go.
type State struct {
	markDelete int64
	// ranges are the acknowledged records above markDelete, half-open.
	// Removing a prefix may reslice (see dropPrefix); append compacts when
	// it reallocates.
	ranges [][2]int64
	// acked is the number of records in ranges.
	acked     int64
	props     map[string]int64 // nil when empty; never shared with callers
	version   uint64
	maxRanges int
}

// New returns the state of a cursor whose records ≤ markDelete are all
// acknowledged (-1 = none). markDelete is clamped to [-1, MaxOffset].
func New(markDelete int64, opts ...Option) *State {
	s := &State{markDelete: min(max(markDelete, -1), MaxOffset), maxRanges: MaxAckedRanges}
	for _, o := range opts {
		o(s)
	}
	return s
}

// CheckProperties reports whether props fit the bounds (MaxProperties keys,
// keys of at most MaxPropertyKeyBytes bytes); it returns an error wrapping
// ErrStateTooLarge otherwise. Callers must check client-supplied properties
// with it before MarkDelete.
func CheckProperties(props map[string]int64) error {
	if len(props) > MaxProperties {
		return fmt.Errorf("%w: %d mark-delete properties (max %d)", ErrStateTooLarge, len(props), MaxProperties)
	}
	for k := range props {
		if len(k) > MaxPropertyKeyBytes {
			return fmt.Errorf("%w: mark-delete property key of %d bytes (max %d)", ErrStateTooLarge, len(k), MaxPropertyKeyBytes)
		}
	}
	return nil
}

// MarkDelete acknowledges every record ≤ inclusive (clamped to MaxOffset),
// drops the acknowledged ranges it covers, then advances over the records
// acknowledged contiguously right above it. It never moves back: a call with
// inclusive below the current mark-delete is ignored entirely (properties
// included). A call at or above it replaces the properties with a copy of
// props (nil or empty = none). It reports whether the state changed.
//
// props must pass CheckProperties; MarkDelete panics otherwise (the encoded
// state must stay bounded and decodable).
func (s *State) MarkDelete(inclusive int64, props map[string]int64) (changed bool) {
	if err := CheckProperties(props); err != nil {
		panic(err)
	}
	inclusive = min(inclusive, MaxOffset)
	if inclusive < s.markDelete {
		return false
	}
	if inclusive > s.markDelete {
		s.markDelete = inclusive
		s.absorb()
		changed = true
	}
	if !propsEqual(s.props, props) {
		s.props = nil
		if len(props) > 0 {
			s.props = maps.Clone(props)
		}
		changed = true
	}
	if changed {
		s.version++
	}
	return changed
}

// absorb drops the ranges at or below markDelete and advances markDelete over
// a range that starts at or below markDelete+1.
func (s *State) absorb() {
	k := 0
	for k < len(s.ranges) && s.ranges[k][0] <= s.markDelete+1 {
		r := s.ranges[k]
		s.acked -= r[1] - r[0]
		s.markDelete = max(s.markDelete, r[1]-1)
		k++
	}
	if k > 0 {
		s.dropPrefix(k)
	}
}

// dropPrefix removes ranges[:k] in time O(min(k, len-k)): it moves the
// survivors down when they are no more than the dropped ranges (keeping the
// backing array, e.g. when everything is absorbed), else reslices.
func (s *State) dropPrefix(k int) {
	if rest := len(s.ranges) - k; rest <= k {
		copy(s.ranges, s.ranges[k:])
		s.ranges = s.ranges[:rest]
		return
	}
	s.ranges = s.ranges[k:]
}

// Ack acknowledges the records [offset, offset+records). Records at or below
// mark-delete are ignored; re-acknowledging is a no-op. When the range
// reaches record markDelete+1, mark-delete advances over every contiguous
// acknowledged record.
//
// Errors: ErrInvalidRange (records < 1, offset < 0, offset+records >
// MaxOffset+1); ErrStateTooLarge (wrapped) when the ack would add a range
// beyond the limit — the state is then unchanged. An ack that merges with
// or extends existing ranges never fails on the bound.
func (s *State) Ack(offset, records int64) error {
	if records < 1 || offset < 0 || offset > math.MaxInt64-records {
		return fmt.Errorf("%w: offset %d, records %d", ErrInvalidRange, offset, records)
	}
	lo, hi := max(offset, s.markDelete+1), offset+records
	if hi <= lo {
		return nil // entirely at or below mark-delete
	}
	if lo == s.markDelete+1 {
		// Fills the gap right above mark-delete.
		s.markDelete = hi - 1
		s.absorb()
		s.version++
		return nil
	}
	// i: first range that overlaps or touches [lo, hi) from the left
	// (end ≥ lo). j: first range entirely beyond it (start > hi).
	rs := s.ranges
	i := sort.Search(len(rs), func(k int) bool { return rs[k][1] >= lo })
	j := i + sort.Search(len(rs)-i, func(k int) bool { return rs[i+k][0] > hi })
	if i == j {
		if len(rs) >= s.maxRanges {
			return fmt.Errorf("%w: acking [%d, %d) would make %d acknowledged ranges above mark-delete %d (max %d)",
				ErrStateTooLarge, lo, hi, len(rs)+1, s.markDelete, s.maxRanges)
		}
		s.ranges = slices.Insert(rs, i, [2]int64{lo, hi})
		s.acked += hi - lo
		s.version++
		return nil
	}
	merged := [2]int64{min(lo, rs[i][0]), max(hi, rs[j-1][1])}
	if j == i+1 && merged == rs[i] {
		return nil // already acknowledged
	}
	for _, r := range rs[i:j] {
		s.acked -= r[1] - r[0]
	}
	s.acked += merged[1] - merged[0]
	rs[i] = merged
	s.ranges = slices.Delete(rs, i+1, j)
	s.version++
	return nil
}

// IsAcked reports whether record o is acknowledged (true for every o ≤
// MarkDeleteOffset).
func (s *State) IsAcked(o int64) bool {
	if o <= s.markDelete {
		return true
	}
	i := s.rangeAtOrAfter(o)
	return i < len(s.ranges) && s.ranges[i][0] <= o
}

// rangeAtOrAfter returns the index of the first range whose end is > o: the
// range containing o, if any, else the first range above o.
func (s *State) rangeAtOrAfter(o int64) int {
	rs := s.ranges
	return sort.Search(len(rs), func(k int) bool { return rs[k][1] > o })
}

// AckedCount is the number of acknowledged records above mark-delete.
func (s *State) AckedCount() int64 { return s.acked }

// Ranges returns the acknowledged ranges above mark-delete as half-open
// [start, end) pairs, ascending, disjoint and non-adjacent. The slice is a
// copy owned by the caller.
func (s *State) Ranges() [][2]int64 { return slices.Clone(s.ranges) }

// RangeCount is len(Ranges()) without the copy.
func (s *State) RangeCount() int { return len(s.ranges) }

// MaxRanges is the State's range limit (see WithMaxAckedRanges).
func (s *State) MaxRanges() int { return s.maxRanges }

// FirstUnacked is the lowest unacknowledged record offset: always
// MarkDeleteOffset()+1, since a record acknowledged there is absorbed.
func (s *State) FirstUnacked() int64 { return s.markDelete + 1 }

// MarkDeleteOffset is the offset at or below which every record is
// acknowledged (-1 when none).
func (s *State) MarkDeleteOffset() int64 { return s.markDelete }

// Properties returns a copy of the properties of the last MarkDelete (nil
// when none). The map is owned by the caller.
func (s *State) Properties() map[string]int64 { return maps.Clone(s.props) }

// NextUnackedFrom returns the first unacknowledged record ≥ o. It is how a
// reader skips entries whose records are all acknowledged: an entry [e, e+n)
// is fully acknowledged iff NextUnackedFrom(e) ≥ e+n. The result can be
// math.MaxInt64 (past MaxOffset) when everything from o on is acknowledged.
func (s *State) NextUnackedFrom(o int64) int64 {
	if o <= s.markDelete {
		return s.markDelete + 1
	}
	i := s.rangeAtOrAfter(o)
	if i < len(s.ranges) && s.ranges[i][0] <= o {
		return s.ranges[i][1]
	}
	return o
}

// UnackedIn returns the number of unacknowledged records in [start, end)
// (0 when end ≤ start). Its cost is a binary search plus one step per
// acknowledged range inside the interval.
func (s *State) UnackedIn(start, end int64) int64 {
	start = max(start, s.markDelete+1)
	if end <= start {
		return 0
	}
	n := end - start
	for i := s.rangeAtOrAfter(start); i < len(s.ranges) && s.ranges[i][0] < end; i++ {
		r := s.ranges[i]
		n -= min(r[1], end) - max(r[0], start)
	}
	return n
}

// Version increases by one on every change of the state (mark-delete,
// ranges or properties); calls that change nothing leave it as is. A
// persister writes when Version differs from the version it last wrote.
// New and Decode start at 0; Clone copies it. It is not encoded.
func (s *State) Version() uint64 { return s.version }

// Clone returns a deep copy (including Version and the range limit).
func (s *State) Clone() *State {
	c := *s
	c.ranges = slices.Clone(s.ranges)
	c.props = maps.Clone(s.props)
	return &c
}

// Equal reports whether two states acknowledge the same records and carry
// the same properties. Version and the range limit are not compared.
func (s *State) Equal(o *State) bool {
	if s == nil || o == nil {
		return s == o
	}
	return s.markDelete == o.markDelete &&
		s.acked == o.acked &&
		slices.Equal(s.ranges, o.ranges) &&
		propsEqual(s.props, o.props)
}

// String is a short human-readable form for logs and test failures.
func (s *State) String() string {
	const show = 8
	rs := s.ranges
	more := ""
	if len(rs) > show {
		rs, more = rs[:show], fmt.Sprintf(" …+%d", len(s.ranges)-show)
	}
	return fmt.Sprintf("cursor.State{md=%d acked=%d ranges=%v%s props=%v v=%d}",
		s.markDelete, s.acked, rs, more, s.props, s.version)
}

func propsEqual(a, b map[string]int64) bool {
	return len(a) == len(b) && maps.Equal(a, b)
}
