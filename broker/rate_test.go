package broker

import (
	"testing"
	"time"
)

func TestRateMeter(t *testing.T) {
	var r RateMeter
	t0 := time.Unix(100, 0)
	if m, b, n, _ := r.Rates(t0); m != 0 || b != 0 || n != 0 {
		t.Fatalf("first read: %v %v %v, want zeros", m, b, n)
	}
	r.Add(100, 1000)
	// Within the window no new sample: the rate is since the first sample.
	if m, b, n, nb := r.Rates(t0.Add(500 * time.Millisecond)); m != 0 || b != 0 || n != 100 || nb != 1000 {
		t.Fatalf("no base yet: %v %v %v %v", m, b, n, nb)
	}
	if m, b, _, _ := r.Rates(t0.Add(2 * time.Second)); m != 50 || b != 500 {
		t.Fatalf("after 2 s: %v msg/s %v B/s, want 50 and 500", m, b)
	}
	r.Add(30, 300)
	// Measured from the previous sample (t0+2s) on.
	if m, b, _, _ := r.Rates(t0.Add(5 * time.Second)); m != 10 || b != 100 {
		t.Fatalf("after 5 s: %v msg/s %v B/s, want 10 and 100", m, b)
	}
	if m, _, n, _ := r.Rates(t0.Add(7 * time.Second)); m != 0 || n != 130 {
		t.Fatalf("idle: %v msg/s, %d total; want 0 and 130", m, n)
	}
}

func TestTokenBucketPacesToItsRate(t *testing.T) {
	var b TokenBucket
	b.Set(RateLimit{Msgs: 10}) // 10 messages per second, a burst of 10
	t0 := time.Unix(1000, 0)
	if d := b.Delay(t0); d != 0 {
		t.Fatalf("a fresh bucket asks to wait %v", d)
	}
	if n := b.Budget(t0); n != 10 {
		t.Fatalf("budget %d, want the burst of 10", n)
	}
	// A read of 25 goes through (what was read is not refused), leaving a
	// debt of 15: the next message waits 1.6 s (16 tokens at 10/s).
	if d := b.Take(t0, 25, 0); d != 1600*time.Millisecond {
		t.Fatalf("after 25: wait %v, want 1.6s", d)
	}
	if d := b.Delay(t0.Add(time.Second)); d != 600*time.Millisecond {
		t.Fatalf("1 s later: wait %v, want 0.6s", d)
	}
	if d := b.Delay(t0.Add(1600 * time.Millisecond)); d != 0 {
		t.Fatalf("1.6 s later: wait %v, want none", d)
	}
	if n := b.Budget(t0.Add(1600 * time.Millisecond)); n != 1 {
		t.Fatalf("budget %d, want 1", n)
	}
	// Idle for long: tokens are capped at one period's worth.
	if n := b.Budget(t0.Add(time.Hour)); n != 10 {
		t.Fatalf("budget after an hour %d, want 10", n)
	}
}

func TestTokenBucketBytesAndPeriod(t *testing.T) {
	var b TokenBucket
	b.Set(RateLimit{Bytes: 1000, Period: 2 * time.Second}) // 1000 bytes per 2 s
	t0 := time.Unix(1000, 0)
	if d := b.Take(t0, 1, 1000); d <= 0 {
		t.Fatal("a bucket spent to 0 bytes lets the next one go")
	}
	if n := b.Budget(t0); n != 0 {
		t.Fatalf("budget %d, want 0 (messages not limited)", n)
	}
	if d := b.Delay(t0.Add(2 * time.Second)); d != 0 {
		t.Fatalf("a period later: wait %v", d)
	}
	// A changed limit starts full; the same limit keeps the state.
	b.Take(t0.Add(2*time.Second), 1, 5000)
	b.Set(RateLimit{Bytes: 1000, Period: 2 * time.Second})
	if d := b.Delay(t0.Add(2 * time.Second)); d == 0 {
		t.Fatal("set with the same limit forgot the debt")
	}
	b.Set(RateLimit{})
	if d := b.Take(t0, 1000, 1<<30); d != 0 {
		t.Fatalf("an unlimited bucket asks to wait %v", d)
	}
}
