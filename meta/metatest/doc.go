// Package metatest is the acceptance suite every meta.Store implementation
// must pass (Run), and helpers that give tests a real etcd (Embedded,
// NewEtcdStore).
//
// Run it from a backend's tests:
//
//	func TestAcceptance(t *testing.T) {
//		metatest.Run(t, func(t *testing.T) meta.Store {
//			s := meta.NewMem(meta.MemOptions{})
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// newStore must return an empty store (or an isolated key space of a shared
// one, such as an Etcd with a fresh Prefix) that nothing else writes to while
// the subtest runs; it owns the store's cleanup. Subtests run one after
// another, never in parallel, so revision arithmetic holds even on a shared
// etcd server. The suite needs MaxTxnOps ≥ MinMaxTxnOps and watch buffers
// of at least MinWatchBufferEvents events.
//
// Files:
//
//	metatest.go  Run: the acceptance suite
//	etcd.go      Embedded and NewEtcdStore: a real etcd for a test
package metatest
