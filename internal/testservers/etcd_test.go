//go:build unix

package testservers

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestEtcdCluster: a 3-member cluster takes writes with one member down,
// refuses them (within the request timeout) with two down, and takes them
// again once the members are back; data written before survives.
func TestEtcdCluster(t *testing.T) {
	c := StartEtcdCluster(t, 3)
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	put := func(key string, timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		_, err := cli.Put(ctx, key, "v")
		return err
	}
	if err := put("a", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	c.Stop(0)
	// A write in flight when the leader dies may time out (etcd drops
	// proposals while there is no leader); a new leader takes over within a
	// few election timeouts.
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := put("b", 3*time.Second)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("one member down: %v", err)
		}
		t.Logf("one member down: %v (retrying)", err)
	}
	c.Stop(1)
	if err := put("c", 2*time.Second); err == nil {
		t.Fatal("two members down: put succeeded")
	} else {
		t.Logf("two members down: %v", err)
	}
	c.Start(0)
	c.Start(1)
	c.WaitHealthy()
	if err := put("d", 10*time.Second); err != nil {
		t.Fatalf("after restart: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, k := range []string{"a", "b", "d"} {
		r, err := cli.Get(ctx, k)
		if err != nil || len(r.Kvs) != 1 {
			t.Fatalf("get %s: %v %v", k, r, err)
		}
	}
}
