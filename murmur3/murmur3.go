package murmur3

import "math/bits"

// Sum32 is MurmurHash3 x86_32 of data with seed 0 (Austin Appleby's
// reference): the hash Pulsar clients route keys with and Key_Shared
// subscriptions split keys by.
func Sum32(data []byte) uint32 {
	const (
		c1 = 0xcc9e2d51
		c2 = 0x1b873593
	)
	var h uint32
	n := len(data)
	body := n &^ 3
	for i := 0; i < body; i += 4 {
		k := uint32(data[i]) | uint32(data[i+1])<<8 | uint32(data[i+2])<<16 | uint32(data[i+3])<<24
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
		h = bits.RotateLeft32(h, 13)
		h = h*5 + 0xe6546b64
	}
	var k uint32
	switch n & 3 {
	case 3:
		k ^= uint32(data[body+2]) << 16
		fallthrough
	case 2:
		k ^= uint32(data[body+1]) << 8
		fallthrough
	case 1:
		k ^= uint32(data[body])
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
	}
	h ^= uint32(n)
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}
