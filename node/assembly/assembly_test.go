package assembly

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/lakegate/lakegate/node"
)

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// A standalone node is a one-member cluster: it joins as "standalone",
// advertising its listeners, serves /readyz, and Close stops it (again:
// the same answer).
func TestStandaloneIsOneMemberCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pulsar, web := listen(t), listen(t)
	n, err := Start(ctx, Config{
		Node:   node.Config{DataDir: filepath.Join(t.TempDir(), "node")},
		Pulsar: pulsar,
		HTTP:   []net.Listener{web},
	})
	if err != nil {
		t.Fatal(err)
	}
	if id := n.Member.Self().ID; id != "standalone" {
		t.Errorf("member id %q, want standalone", id)
	}
	ms, err := n.Member.Members(ctx)
	if err != nil || len(ms) != 1 {
		t.Fatalf("members %v, %v: want this node only", ms, err)
	}
	if got, want := ms[0].Endpoints["pulsar"], "pulsar://"+pulsar.Addr().String(); got != want {
		t.Errorf("advertised pulsar endpoint %q, want %q", got, want)
	}
	if got, want := n.Gateway.ServiceURL(), "pulsar://"+pulsar.Addr().String(); got != want {
		t.Errorf("service URL %q, want %q", got, want)
	}
	resp, err := http.Get("http://" + web.Addr().String() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/readyz: %s", resp.Status)
	}
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(ctx); err != nil {
		t.Errorf("second Close: %v", err)
	}
	for _, ln := range []net.Listener{pulsar, web} {
		if c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
			c.Close()
			t.Errorf("%s still accepts after Close", ln.Addr())
		}
	}
}

// A Start that fails closes the listeners it was given.
func TestFailedStartClosesListeners(t *testing.T) {
	pulsar, web := listen(t), listen(t)
	_, err := Start(context.Background(), Config{
		Node:   node.Config{DataDir: t.TempDir(), ObjectURL: "nosuchscheme://bucket"},
		Pulsar: pulsar,
		HTTP:   []net.Listener{web},
	})
	if err == nil {
		t.Fatal("Start on an unknown object store succeeded")
	}
	for _, ln := range []net.Listener{pulsar, web} {
		if c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
			c.Close()
			t.Errorf("%s still accepts after a failed Start", ln.Addr())
		}
	}
}
