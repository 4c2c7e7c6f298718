package lakestream

import (
	"context"
	"time"
)

type staleReadsKey struct{}

// WithStaleReads returns ctx letting a log's reads of its own bounds and
// entries (FirstOffset, NextOffset, EntryHeader, FindOffsetByTime, …)
// answer from the state of a fresh read made at most maxAge ago, instead
// of making one per call. Without it such reads see every append that
// finished before the call; with it, every append that finished maxAge
// before the call. It is for periodic work that looks at many logs one
// after the other — policy rounds, metrics scrapes — so that it costs one
// metadata read per maxAge rather than one per log. A storage that has
// no cheaper read ignores it.
func WithStaleReads(ctx context.Context, maxAge time.Duration) context.Context {
	return context.WithValue(ctx, staleReadsKey{}, maxAge)
}

// StaleReadsOf is the maxAge WithStaleReads put in ctx (0: none).
func StaleReadsOf(ctx context.Context) time.Duration {
	d, _ := ctx.Value(staleReadsKey{}).(time.Duration)
	return max(d, 0)
}
