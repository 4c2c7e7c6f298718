package metatest

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/lakegate/lakegate/meta"
)

// Embedded starts a single-member etcd in tb.TempDir() (fsync off: test
// data need not survive a crash) and stops it when the test ends. Starting
// one takes a fraction of a second; a package whose tests all need etcd can
// share one from TestMain (meta.StartEmbedded) and isolate tests with
// NewEtcdStore.
func Embedded(tb testing.TB) *meta.Embedded {
	tb.Helper()
	e, err := meta.StartEmbedded(meta.EmbeddedConfig{Dir: tb.TempDir(), UnsafeNoFsync: true})
	if err != nil {
		tb.Fatalf("starting embedded etcd: %v", err)
	}
	tb.Cleanup(func() {
		if err := e.Close(); err != nil {
			tb.Errorf("closing embedded etcd: %v", err)
		}
	})
	return e
}

var storeSeq atomic.Int64

// NewEtcdStore returns a store on emb whose keys live under a prefix no
// other NewEtcdStore store uses, so tests sharing one member do not see
// each other's keys (revisions are still shared). It is closed when the test
// ends.
func NewEtcdStore(tb testing.TB, emb *meta.Embedded) *meta.Etcd {
	tb.Helper()
	s := emb.NewStore(meta.EtcdOptions{Prefix: fmt.Sprintf("/metatest/%d/", storeSeq.Add(1))})
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("closing etcd store: %v", err)
		}
	})
	return s
}
