package murmur3

import "testing"

// Reference vectors of MurmurHash3 x86_32, seed 0 (every tail length).
func TestSum32(t *testing.T) {
	for _, v := range []struct {
		in   string
		want uint32
	}{
		{"", 0},
		{"a", 0x3c2569b2},
		{"abcd", 0x43ed676a},
		{"hello", 0x248bfa47},
		{"The quick brown fox jumps over the lazy dog", 0x2e4ff723},
	} {
		if got := Sum32([]byte(v.in)); got != v.want {
			t.Errorf("Sum32(%q) = %#08x, want %#08x", v.in, got, v.want)
		}
	}
}
