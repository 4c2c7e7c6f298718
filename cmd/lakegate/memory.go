package main

import (
	"fmt"
	"os"
	"runtime/debug"
)

// minMemoryLimit is the smallest memory.limit a node takes: below it the
// shares are smaller than one WAL object and one compaction need.
const minMemoryLimit = 256 << 20

// memoryBudget is memory.limit shared out (docs/memory.md): the Go
// runtime's soft limit and the size of every bounded part a setting left
// at 0. Zero fields mean "no budget": the parts keep their fixed defaults.
type memoryBudget struct {
	Limit      int64 // memory.limit
	GoLimit    int64 // the Go runtime's soft limit: all but the mapped program (fileBacked)
	Cache      int64 // engine.cacheBytes: 1/5
	Publish    int64 // the SEND payload held unanswered: 1/10
	Pending    int64 // engine.maxPendingBytes: 1/20
	Compaction int64 // tables.maxBytes: 1/64, at least 4 MiB
	Span       int64 // tables.repack.spanBytes: 1/64, at least 1 MiB
}

// fileBacked is what of a node's resident set is not the Go heap and
// grows little with load: the program's mapped code and data (80–100 MiB
// resident once every path ran, measured by TestMemoryBudget) and the
// embedded etcd's mapped database. The Go runtime's soft limit is
// memory.limit less this, or less 1/8 of it when that is more.
const fileBacked = 128 << 20

// budgetOf shares out c's memory.limit.
func budgetOf(c *Config) (memoryBudget, error) {
	l := c.Memory.Limit
	switch {
	case l == 0:
		return memoryBudget{}, nil
	case l < minMemoryLimit:
		return memoryBudget{}, fmt.Errorf("config memory.limit: %d bytes is below the least budget, %d (256 MiB); 0 turns the budget off", l, minMemoryLimit)
	}
	return memoryBudget{
		Limit:      l,
		GoLimit:    l - max(l/8, fileBacked),
		Cache:      l / 5,
		Publish:    l / 10,
		Pending:    l / 20,
		Compaction: max(l/64, 4<<20),
		Span:       max(l/64, 1<<20),
	}, nil
}

// or is v when set, else the budget's share (0 when there is no budget:
// the part's own default).
func or(v, share int64) int64 {
	if v != 0 {
		return v
	}
	return share
}

// apply sets the Go runtime's soft limit to the budget's, unless the
// environment set one (GOMEMLIMIT wins, as for any Go program) or there
// is no budget; it reports whether it did.
func (b memoryBudget) apply() bool {
	if b.GoLimit > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(b.GoLimit)
		return true
	}
	return false
}
