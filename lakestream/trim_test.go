package lakestream

import "testing"

func TestTrimFloor(t *testing.T) {
	sub := NoHolds()
	sub.AddCursor("s", 40, 9, nil)                            // persisted 9: keeps 10 on
	sub.AddCursor(InternalCursorPrefix+"dedup", 0, -1, nil)   // the broker's own: nothing
	sub.AddCursor(CompactionCursor, 4, 4, map[string]int64{}) // generation 0: nothing
	compacted := NoHolds()
	compacted.AddCursor(CompactionCursor, 4, 2, map[string]int64{"generation": 1}) // keeps 5 on
	for _, c := range []struct {
		name  string
		want  int64
		holds TrimHolds
		floor int64
	}{
		{"none", 100, NoHolds(), 100},
		{"subscription", 100, sub, 10},
		{"key compaction", 100, compacted, 5},
		{"unfinished claim", 100, TrimHolds{KeyCompaction: NoHold, UnfinishedClaim: 30, TableEnd: 50}, 30},
		{"table end", 100, TrimHolds{KeyCompaction: NoHold, UnfinishedClaim: NoHold, TableEnd: 50}, 50},
		{"want lowest", 3, sub, 3},
	} {
		if got := TrimFloor(c.want, c.holds); got != c.floor {
			t.Errorf("%s: TrimFloor(%d) = %d, want %d", c.name, c.want, got, c.floor)
		}
	}
}
