package engine_test

// The engine acceptance suite (enginetest) on every storage backend:
//
//	go test -p 1 -run TestAcceptance ./engine/                 mem, file+etcd, S3 (SeaweedFS)+etcd, GCS (fake)+etcd, Azure (Azurite)+etcd
//	go test -p 1 -run 'TestAcceptance/S3' -v ./engine/         S3 only, with SeaweedFS's startup time
//	LAKEGATE_SKIP_S3=1 go test -run TestAcceptance ./engine/   without S3 when weed is not built (make tools)
//	LAKEGATE_SKIP_AZURE=1 go test -run TestAcceptance ./engine/  without Azure when Azurite is not installed (make tools)
//
// One server of each kind serves every subtest of its backend: subtests are
// isolated by an object-key prefix and an etcd key prefix, since starting
// SeaweedFS costs seconds and etcd a fraction of one.

import (
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/lakegate/lakegate/engine/enginetest"
	"github.com/lakegate/lakegate/internal/testservers"
	"github.com/lakegate/lakegate/meta"
	"github.com/lakegate/lakegate/meta/metatest"
	"github.com/lakegate/lakegate/objstore"
)

func TestAcceptance(t *testing.T) {
	t.Run("Mem", func(t *testing.T) {
		enginetest.Run(t, func(t *testing.T) enginetest.Env {
			return enginetest.Env{Store: openStore(t, "mem://"), Meta: memMeta(t, 0), NewMeta: memMeta}
		})
	})
	t.Run("File+Etcd", func(t *testing.T) {
		emb := metatest.Embedded(t)
		enginetest.Run(t, func(t *testing.T) enginetest.Env {
			return etcdEnv(t, emb, "file://"+filepath.ToSlash(t.TempDir()))
		})
	})
	t.Run("S3+Etcd", func(t *testing.T) {
		srv := testservers.StartSeaweed(t)
		emb := metatest.Embedded(t)
		enginetest.Run(t, prefixedEnv(emb, srv.URL))
	})
	t.Run("GCS+Etcd", func(t *testing.T) {
		srv := testservers.StartGCS(t)
		emb := metatest.Embedded(t)
		enginetest.Run(t, prefixedEnv(emb, srv.URL))
	})
	t.Run("Azure+Etcd", func(t *testing.T) {
		srv := testservers.StartAzurite(t)
		emb := metatest.Embedded(t)
		enginetest.Run(t, prefixedEnv(emb, srv.URL))
	})
}

// prefixedEnv returns environments on one bucket (bucketURL has a query
// already), each under its own key prefix.
func prefixedEnv(emb *meta.Embedded, bucketURL string) func(t *testing.T) enginetest.Env {
	var n atomic.Int64
	return func(t *testing.T) enginetest.Env {
		return etcdEnv(t, emb, fmt.Sprintf("%s&prefix=t%d/", bucketURL, n.Add(1)))
	}
}

func etcdEnv(t *testing.T, emb *meta.Embedded, storeURL string) enginetest.Env {
	return enginetest.Env{
		Store: openStore(t, storeURL),
		Meta:  metatest.NewEtcdStore(t, emb),
		NewMeta: func(t *testing.T, maxTxnOps int) meta.Store {
			s := emb.NewStore(meta.EtcdOptions{Prefix: fmt.Sprintf("/acceptance/%d/", etcdSeq.Add(1)), MaxTxnOps: maxTxnOps})
			t.Cleanup(func() { s.Close() })
			return s
		},
	}
}

var etcdSeq atomic.Int64

func openStore(t *testing.T, u string) objstore.Store {
	t.Helper()
	s, err := objstore.Open(t.Context(), u)
	if err != nil {
		t.Fatalf("objstore.Open(%q): %v", u, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func memMeta(t *testing.T, maxTxnOps int) meta.Store {
	s := meta.NewMem(meta.MemOptions{MaxTxnOps: maxTxnOps})
	t.Cleanup(func() { s.Close() })
	return s
}
