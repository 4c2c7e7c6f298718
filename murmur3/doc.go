// Package murmur3 is MurmurHash3 x86_32, the one hash function Pulsar uses
// for key routing (a client's default partition router) and for Key_Shared
// hash ranges. Pure code, no imports from lakegate.
//
// Why here: it is production code with two users that must agree bit for
// bit — the catalog's partition layout (engine/catalog.PartitionForKey) and
// the Key_Shared selector of the subscription actors (actors/keyshared.go) —
// so it lives in one package neither of them owns. It is not in protocol/
// because the engine must not import the wire format (docs/DESIGN.md,
// TestLayers), and not in internal/ because internal/ holds test support
// only. A leaf at the root that imports nothing of lakegate, so any layer may
// use it (TestLayers checks that it stays a leaf).
//
// Files:
//
//	murmur3.go  Sum32: MurmurHash3 x86_32 with seed 0 (Austin Appleby's
//	            reference), checked against reference vectors in the test
package murmur3
