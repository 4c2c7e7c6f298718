package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/lakegate/lakegate/objstore"
)

// Backoff of WAL object PUT retries (docs/storage.md, "Store faults"):
// putRetryBase doubling to putRetryMax, with jitter, until the flush's
// CommitTimeout ends.
const (
	putRetryBase = 50 * time.Millisecond
	putRetryMax  = 2 * time.Second
)

// The engine's two retry schedules: metadata operations (commit conflicts,
// head updates, outcome resolution, watches) retry fast and without jitter;
// object PUTs back off with jitter, since many nodes hit one store.
var (
	metaRetry = retryBackoff{base: time.Millisecond, max: 200 * time.Millisecond}
	putRetry  = retryBackoff{base: putRetryBase, max: putRetryMax, jitter: true}
)

// retryBackoff is a doubling backoff: before attempt n (1-based) it waits
// base·2^(n-1), at most max; with jitter the wait is drawn from [d/2, d).
type retryBackoff struct {
	base, max time.Duration
	jitter    bool
}

// delay is the wait before attempt n (1-based).
func (b retryBackoff) delay(n int) time.Duration {
	d := b.base << min(max(n-1, 0), 20)
	d = min(d, b.max)
	if b.jitter && d > 1 {
		d = d/2 + time.Duration(rand.Int64N(int64(d/2)))
	}
	return d
}

// wait sleeps delay(n), or returns ctx's error when ctx ends first.
func (b retryBackoff) wait(ctx context.Context, n int) error {
	t := time.NewTimer(b.delay(n))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// putObject creates f's WAL object, retrying failed attempts (store errors,
// throttling, timeouts of one request) with backoff until ctx ends; the
// store SDK's own retries run inside each attempt. A flush whose PUT is
// still failing when ctx ends fails its appends (ErrUnavailable): that is
// how a store outage becomes a producer error after CommitTimeout, while
// shorter faults only delay the acknowledgment (backpressure: the flush
// holds its MaxInflightFlushes slot and its bytes of MaxPendingBytes).
//
// The object name is unique to the flush, so ErrExists means an earlier
// attempt (or the SDK's retry of one) whose reply was lost created it: the
// stored bytes are read back and compared, and equal bytes are success.
// Invalid keys and a closed store are not retried.
func (w *walWriter) putObject(ctx context.Context, f *flush) error {
	var err error
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if berr := putBackoff(ctx, attempt); berr != nil {
				return fmt.Errorf("%w after %d attempts (last: %w)", berr, attempt, err)
			}
		}
		err = w.e.store.PutIfAbsent(ctx, f.object, f.data)
		switch {
		case err == nil:
			if attempt > 0 {
				w.opts.Logger.Info("engine: WAL object stored after retries", "object", f.object, "attempts", attempt+1)
			}
			return nil
		case errors.Is(err, objstore.ErrExists):
			got, gerr := w.e.store.Get(ctx, f.object)
			if gerr == nil {
				if bytes.Equal(got, f.data) {
					return nil
				}
				return err // not ours: never overwrite
			}
			err = fmt.Errorf("%w (reading it back: %w)", err, gerr)
		case errors.Is(err, objstore.ErrInvalid), errors.Is(err, objstore.ErrClosed):
			return err
		}
		if ctx.Err() != nil {
			return err
		}
		w.opts.Logger.Debug("engine: WAL object PUT failed, retrying", "object", f.object, "attempt", attempt+1, "err", err)
	}
}

// putBackoff waits before PUT retry attempt n (1-based): putRetryBase
// doubling to putRetryMax, each wait drawn from [d/2, d).
func putBackoff(ctx context.Context, n int) error {
	return putRetry.wait(ctx, n)
}
