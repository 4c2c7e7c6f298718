package delta

import (
	"bytes"
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/schema"
)

// statsStringMaxChars: string columns whose min or max is longer are left
// out of min/max stats (a truncated max would not be an upper bound).
const statsStringMaxChars = 32

// StatsFromParquet builds add.stats from a Parquet file's footer: numRecords,
// and min/max/nullCount of top-level primitive columns (columns inside
// lists, maps or structs are left out; stats are optional per column).
// Timestamps become ISO-8601 UTC strings at ms precision, min rounded down
// and max up (FormatStatsTimestamp).
func StatsFromParquet(data []byte) (*Stats, error) {
	r, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%w: parquet: %v", ErrInvalid, err)
	}
	defer r.Close()
	return statsFromMetadata(r.MetaData())
}

func statsFromMetadata(md *metadata.FileMetaData) (*Stats, error) {
	st := &Stats{NumRecords: md.GetNumRows(), MinValues: map[string]any{}, MaxValues: map[string]any{}, NullCount: map[string]any{}}
	for c := 0; c < md.NumColumns(); c++ {
		col := md.Schema.Column(c)
		if len(col.ColumnPath()) != 1 || col.MaxRepetitionLevel() > 0 {
			continue
		}
		name := col.Name()
		var nulls int64
		var lo, hi any
		complete := true
		for g := 0; g < md.NumRowGroups(); g++ {
			cc, err := md.RowGroup(g).ColumnChunk(c)
			if err != nil {
				return nil, fmt.Errorf("%w: parquet column %s: %v", ErrInvalid, name, err)
			}
			if ok, _ := cc.StatsSet(); !ok {
				complete = false
				break
			}
			ts, err := cc.Statistics()
			if err != nil || ts == nil {
				complete = false
				break
			}
			if !ts.HasNullCount() {
				complete = false
				break
			}
			nulls += ts.NullCount()
			if !ts.HasMinMax() {
				if ts.NullCount() == cc.NumValues() {
					continue // all null in this group
				}
				lo, hi = nil, nil
				complete = false
				break
			}
			mn, mx, ok := minMax(ts, col.LogicalType())
			if !ok {
				complete = false
				break
			}
			lo, hi = lesser(lo, mn), greater(hi, mx)
		}
		if !complete {
			continue
		}
		st.NullCount[name] = nulls
		if lo != nil && hi != nil {
			st.MinValues[name], st.MaxValues[name] = statsValue(lo, col.LogicalType(), false), statsValue(hi, col.LogicalType(), true)
		}
	}
	return st, nil
}

// minMax returns comparable Go values: int64, float64, string, bool.
func minMax(ts metadata.TypedStatistics, lt schema.LogicalType) (mn, mx any, ok bool) {
	switch s := ts.(type) {
	case *metadata.Int32Statistics:
		if _, isDate := lt.(schema.DateLogicalType); isDate {
			return nil, nil, false // dates: not needed yet
		}
		return int64(s.Min()), int64(s.Max()), true
	case *metadata.Int64Statistics:
		return s.Min(), s.Max(), true
	case *metadata.Float64Statistics:
		if math.IsNaN(s.Min()) || math.IsNaN(s.Max()) {
			return nil, nil, false
		}
		return s.Min(), s.Max(), true
	case *metadata.Float32Statistics:
		if math.IsNaN(float64(s.Min())) || math.IsNaN(float64(s.Max())) {
			return nil, nil, false
		}
		return float64(s.Min()), float64(s.Max()), true
	case *metadata.BooleanStatistics:
		return s.Min(), s.Max(), true
	case *metadata.ByteArrayStatistics:
		if _, isStr := lt.(schema.StringLogicalType); !isStr {
			return nil, nil, false // binary: Delta keeps no min/max
		}
		a, b := string(s.Min()), string(s.Max())
		if utf8.RuneCountInString(a) > statsStringMaxChars || utf8.RuneCountInString(b) > statsStringMaxChars {
			return nil, nil, false
		}
		return a, b, true
	}
	return nil, nil, false
}

func cmpAny(a, b any) int {
	switch x := a.(type) {
	case int64:
		y := b.(int64)
		return cmpOrdered(x, y)
	case float64:
		return cmpOrdered(x, b.(float64))
	case string:
		return cmpOrdered(x, b.(string))
	case bool:
		y := b.(bool)
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		}
		return 1
	}
	return 0
}

func cmpOrdered[T int64 | float64 | string](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func lesser(cur, v any) any {
	if cur == nil || cmpAny(v, cur) < 0 {
		return v
	}
	return cur
}

func greater(cur, v any) any {
	if cur == nil || cmpAny(v, cur) > 0 {
		return v
	}
	return cur
}

// statsValue converts timestamps to their ms ISO form; other values pass.
func statsValue(v any, lt schema.LogicalType, isMax bool) any {
	tl, ok := lt.(schema.TimestampLogicalType)
	if !ok {
		return v
	}
	n := v.(int64)
	var t time.Time
	switch tl.TimeUnit() {
	case schema.TimeUnitMillis:
		t = time.UnixMilli(n)
	case schema.TimeUnitMicros:
		t = time.UnixMicro(n)
	default:
		t = time.Unix(0, n)
	}
	return FormatStatsTimestamp(t, isMax)
}

// FormatStatsTimestamp formats t for stats at ms precision in UTC:
// "2026-11-30T01:02:03.123Z". A max is rounded up to the next ms when t has
// sub-ms digits, a min truncated, so both stay true bounds.
func FormatStatsTimestamp(t time.Time, isMax bool) string {
	tr := t.Truncate(time.Millisecond)
	if isMax && tr.Before(t) {
		tr = tr.Add(time.Millisecond)
	}
	return tr.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}
