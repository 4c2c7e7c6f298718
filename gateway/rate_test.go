package gateway

import (
	"testing"
	"time"
)

func TestRateMeter(t *testing.T) {
	var r rateMeter
	t0 := time.Unix(100, 0)
	if m, b, n, _ := r.rates(t0); m != 0 || b != 0 || n != 0 {
		t.Fatalf("first read: %v %v %v, want zeros", m, b, n)
	}
	r.add(100, 1000)
	// Within the window no new sample: the rate is since the first sample.
	if m, b, n, nb := r.rates(t0.Add(500 * time.Millisecond)); m != 0 || b != 0 || n != 100 || nb != 1000 {
		t.Fatalf("no base yet: %v %v %v %v", m, b, n, nb)
	}
	if m, b, _, _ := r.rates(t0.Add(2 * time.Second)); m != 50 || b != 500 {
		t.Fatalf("after 2 s: %v msg/s %v B/s, want 50 and 500", m, b)
	}
	r.add(30, 300)
	// Measured from the previous sample (t0+2s) on.
	if m, b, _, _ := r.rates(t0.Add(5 * time.Second)); m != 10 || b != 100 {
		t.Fatalf("after 5 s: %v msg/s %v B/s, want 10 and 100", m, b)
	}
	if m, _, n, _ := r.rates(t0.Add(7 * time.Second)); m != 0 || n != 130 {
		t.Fatalf("idle: %v msg/s, %d total; want 0 and 130", m, n)
	}
}
