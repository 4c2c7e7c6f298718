package meta_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lakegate/lakegate/meta"
	"github.com/lakegate/lakegate/meta/metatest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/connectivity"
)

// shared is one embedded etcd for the package's tests (started by
// TestMain); tests isolate themselves with key prefixes
// (metatest.NewEtcdStore).
var shared *meta.Embedded

func TestMain(m *testing.M) {
	os.Exit(runWithEtcd(m))
}

func runWithEtcd(m *testing.M) int {
	dir, err := os.MkdirTemp("", "lakegate-meta-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	shared, err = meta.StartEmbedded(meta.EmbeddedConfig{Dir: dir, UnsafeNoFsync: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer shared.Close()
	return m.Run()
}

func TestEtcdAcceptance(t *testing.T) {
	metatest.Run(t, func(t *testing.T) meta.Store {
		return metatest.NewEtcdStore(t, shared)
	})
}

// TestEtcdAcceptanceNoPrefix runs the suite on stores without a key prefix
// (etcd's own "\x00" range ends), on a member of its own that is emptied
// before every subtest.
func TestEtcdAcceptanceNoPrefix(t *testing.T) {
	emb := metatest.Embedded(t)
	metatest.Run(t, func(t *testing.T) meta.Store {
		if _, err := emb.Client().Delete(ctxT(t), "\x00", clientv3.WithFromKey()); err != nil {
			t.Fatal(err)
		}
		s := emb.NewStore(meta.EtcdOptions{})
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

func ctxT(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// TestEtcdPrefix: the prefix is invisible to callers and separates stores.
func TestEtcdPrefix(t *testing.T) {
	ctx := ctxT(t)
	a := shared.NewStore(meta.EtcdOptions{Prefix: "/prefix-test/a/"})
	b := shared.NewStore(meta.EtcdOptions{Prefix: "/prefix-test/b/"})
	defer a.Close()
	defer b.Close()
	rev := put(t, a, "k", "from-a")
	if _, found, err := b.Get(ctx, "k"); err != nil || found {
		t.Fatalf("b sees a's key: found=%v err=%v", found, err)
	}
	kvs, err := a.Range(ctx, "", "", 0)
	if err != nil || len(kvs) != 1 || kvs[0].Key != "k" {
		t.Fatalf("a.Range = %+v, %v", kvs, err)
	}
	raw, err := shared.Client().Get(ctx, "/prefix-test/a/k")
	if err != nil || len(raw.Kvs) != 1 || raw.Kvs[0].ModRevision != rev {
		t.Fatalf("raw key: %+v, %v", raw, err)
	}
}

// TestEtcdServerTooManyOps: a store configured above the member's
// --max-txn-ops gets the server's refusal, mapped to ErrTooManyOps.
func TestEtcdServerTooManyOps(t *testing.T) {
	max := shared.Config().MaxTxnOps
	s := metatest.NewEtcdStore(t, shared)
	over := shared.NewStore(meta.EtcdOptions{Prefix: s.Prefix(), MaxTxnOps: 2 * max, MaxRequestBytes: 64 << 20})
	defer over.Close()
	ops := make([]meta.Op, max+1)
	for i := range ops {
		ops[i] = meta.Put(fmt.Sprintf("k%d", i), nil)
	}
	_, _, err := over.Txn(ctxT(t), nil, ops)
	if !errors.Is(err, meta.ErrTooManyOps) || !strings.Contains(err.Error(), "etcdserver") {
		t.Fatalf("server-side too many ops: %v", err)
	}
	// Same for a request over the member's --max-request-bytes.
	big := make([]byte, shared.Config().MaxRequestBytes)
	_, _, err = over.Txn(ctxT(t), nil, []meta.Op{meta.Put("big", big)})
	if !errors.Is(err, meta.ErrTooManyOps) || !strings.Contains(err.Error(), "etcdserver") {
		t.Fatalf("server-side too large: %v", err)
	}
}

// TestEtcdWatchCompacted: a watch from a compacted revision is closed.
func TestEtcdWatchCompacted(t *testing.T) {
	ctx := ctxT(t)
	emb := metatest.Embedded(t)
	s := emb.NewStore(meta.EtcdOptions{})
	defer s.Close()
	r1 := put(t, s, "k", "1")
	put(t, s, "k", "2")
	r3 := put(t, s, "k", "3")
	if _, err := emb.Client().Compact(ctx, r3); err != nil {
		t.Fatal(err)
	}
	ch := s.Watch(ctx, "", r1)
	select {
	case ev, ok := <-ch:
		if ok {
			t.Fatalf("watch from compacted revision delivered %+v", ev)
		}
	case <-ctx.Done():
		t.Fatal("watch from compacted revision not closed")
	}
	// From the compaction revision on it works.
	ch = s.Watch(ctx, "", r3)
	r4 := put(t, s, "k", "4")
	if ev := <-ch; ev.KV.ModRevision != r4 {
		t.Fatalf("watch after compaction: %+v", ev)
	}
}

// TestEmbeddedRestart: data and revisions survive a restart on the same
// directory (with new ports), and a client of the stopped member gets
// ErrUnavailable.
func TestEmbeddedRestart(t *testing.T) {
	ctx := ctxT(t)
	dir := t.TempDir()
	emb, err := meta.StartEmbedded(meta.EmbeddedConfig{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	s := emb.NewStore(meta.EtcdOptions{})
	rev := put(t, s, "durable", "yes")
	_ = s.Close()

	dialed, err := meta.Dial(ctx, emb.Endpoints(), meta.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer dialed.Close()
	if kv, found, err := dialed.Get(ctx, "durable"); err != nil || !found || kv.ModRevision != rev {
		t.Fatalf("dialed Get: %+v found=%v err=%v", kv, found, err)
	}
	if err := emb.Close(); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, _, err := dialed.Get(short, "durable"); !errors.Is(err, meta.ErrUnavailable) {
		t.Fatalf("Get from a stopped member: %v, want ErrUnavailable", err)
	}
	if _, _, err := dialed.Txn(short, nil, []meta.Op{meta.Put("x", nil)}); !errors.Is(err, meta.ErrUnavailable) {
		t.Fatalf("Txn to a stopped member: %v, want ErrUnavailable", err)
	}

	emb, err = meta.StartEmbedded(meta.EmbeddedConfig{Dir: dir})
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	defer emb.Close()
	s = emb.NewStore(meta.EtcdOptions{})
	defer s.Close()
	kv, found, err := s.Get(ctx, "durable")
	if err != nil || !found || string(kv.Value) != "yes" || kv.ModRevision != rev {
		t.Fatalf("after restart: %+v found=%v err=%v, want yes @%d", kv, found, err, rev)
	}
	if r := put(t, s, "next", "1"); r != rev+1 {
		t.Fatalf("first write after restart at %d, want %d", r, rev+1)
	}
}

// TestDial: an external-cluster store works and owns its client; an
// unreachable cluster fails with ErrUnavailable within the dial timeout.
func TestDial(t *testing.T) {
	ctx := ctxT(t)
	s, err := meta.Dial(ctx, shared.Endpoints(), meta.DialOptions{EtcdOptions: meta.EtcdOptions{Prefix: "/dial-test/"}})
	if err != nil {
		t.Fatal(err)
	}
	if s.MaxTxnOps() != meta.DefaultMaxTxnOps {
		t.Fatalf("MaxTxnOps %d, want etcd's default %d", s.MaxTxnOps(), meta.DefaultMaxTxnOps)
	}
	put(t, s, "k", "v")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if st := s.Client().ActiveConnection().GetState(); st != connectivity.Shutdown {
		t.Fatalf("client connection %v after Close of a dialed store, want Shutdown", st)
	}

	// A port nobody listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	start := time.Now()
	defer func() { t.Logf("unreachable dial took %v", time.Since(start)) }()
	_, err = meta.Dial(ctx, []string{addr}, meta.DialOptions{DialTimeout: 300 * time.Millisecond})
	if !errors.Is(err, meta.ErrUnavailable) {
		t.Fatalf("Dial(%s): %v, want ErrUnavailable", addr, err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("Dial took %v with a 300ms timeout", d)
	}
	if _, err := meta.Dial(ctx, nil, meta.DialOptions{}); !errors.Is(err, meta.ErrInvalid) {
		t.Fatalf("Dial without endpoints: %v", err)
	}
}
