package node

import (
	"context"
	"errors"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/lakegate/lakegate/meta"
)

// TestStartUnreachableEtcd: a node whose external etcd does not answer
// fails to start with meta.ErrUnavailable — it used to panic closing the
// nil store of the failed dial.
func TestStartUnreachableEtcd(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := Start(ctx, Config{DataDir: t.TempDir(), ObjectURL: "mem://", EtcdEndpoints: []string{"http://" + addr}})
	if err == nil {
		n.Close()
		t.Fatal("Start succeeded without etcd")
	}
	if !errors.Is(err, meta.ErrUnavailable) {
		t.Fatalf("Start: %v, want meta.ErrUnavailable", err)
	}
}

// TestEmbeddedEtcdLoopbackOnly: the embedded member of a standalone node
// (which takes no credentials) listens on 127.0.0.1 only.
func TestEmbeddedEtcdLoopbackOnly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := Start(ctx, Config{DataDir: t.TempDir(), ObjectURL: "mem://", GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	eps := n.Embedded.Endpoints()
	if len(eps) == 0 {
		t.Fatal("no endpoints")
	}
	for _, ep := range eps {
		u, err := url.Parse(ep)
		if err != nil {
			t.Fatal(err)
		}
		if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsLoopback() {
			t.Errorf("embedded etcd listens on %s, want loopback only", ep)
		}
	}
}
