package catalog

import "github.com/lakegate/lakegate/murmur3"

// Murmur3Sum32 is MurmurHash3 x86_32 of data with seed 0 (see
// murmur3): the hash Pulsar clients route keys with.
func Murmur3Sum32(data []byte) uint32 { return murmur3.Sum32(data) }

// PartitionForKey returns the partition a Pulsar client's default router
// picks for a message key among n partitions: Murmur3_32Hash (murmur3 of the
// UTF-8 key, masked to 31 bits) then signSafeMod. n must be ≥ 1.
func PartitionForKey(key string, n int) int {
	h := Murmur3Sum32([]byte(key)) & 0x7fffffff
	return int(h % uint32(n))
}
