package main

import (
	"io"
	"log/slog"
	"strings"
	"testing"
)

func TestMemoryBudgetShares(t *testing.T) {
	c, err := loadConfig("standalone", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Memory.Limit != 768<<20 {
		t.Fatalf("default memory.limit %d, want 768 MiB", c.Memory.Limit)
	}
	b, err := budgetOf(c)
	if err != nil {
		t.Fatal(err)
	}
	want := memoryBudget{Limit: 768 << 20, GoLimit: 640 << 20, Cache: (768 << 20) / 5, Publish: (768 << 20) / 10,
		Pending: (768 << 20) / 20, Compaction: 12 << 20, Span: 12 << 20}
	if b != want {
		t.Fatalf("budget of 768 MiB:\n got %+v\nwant %+v", b, want)
	}
	// The shares reach the parts left at 0; a size set explicitly wins.
	c.Engine.CacheBytes = 1 << 30
	sc, err := storageConfig(c, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if sc.Engine.CacheBytes != 1<<30 || sc.Engine.MaxPendingBytes != want.Pending ||
		sc.Tables.CompactMaxBytes != want.Compaction || sc.Tables.BinpackSpanBytes != want.Span {
		t.Fatalf("storage config: cache %d pending %d compaction %d span %d", sc.Engine.CacheBytes,
			sc.Engine.MaxPendingBytes, sc.Tables.CompactMaxBytes, sc.Tables.BinpackSpanBytes)
	}

	// A large budget: the Go limit leaves 1/8 for the mapped program.
	c.Memory.Limit = 8 << 30
	if b, _ := budgetOf(c); b.GoLimit != 7<<30 || b.Compaction != 128<<20 {
		t.Fatalf("budget of 8 GiB: %+v", b)
	}
	// No budget: every part keeps its own default.
	c.Memory.Limit = 0
	if b, err := budgetOf(c); err != nil || b != (memoryBudget{}) {
		t.Fatalf("no budget: %+v, %v", b, err)
	}
	c.Memory.Limit = 100 << 20
	if _, err := budgetOf(c); err == nil || !strings.Contains(err.Error(), "memory.limit") {
		t.Fatalf("a budget under the least: %v", err)
	}
}
