package gateway

import (
	"context"
	"net"
	"testing"

	"github.com/lakegate/lakegate/engine"
	"github.com/lakegate/lakegate/internal/testmember"
	"github.com/lakegate/lakegate/lakestream"
)

// selfOf is the member a server on these listeners advertises.
func selfOf(id string, ln, tlsLn net.Listener) lakestream.Member {
	eps := map[string]string{}
	if ln != nil {
		eps["pulsar"] = "pulsar://" + advertisedOf(ln)
	}
	if tlsLn != nil {
		eps["pulsar+ssl"] = "pulsar+ssl://" + advertisedOf(tlsLn)
	}
	return lakestream.Member{ID: id, Endpoints: eps}
}

// listenTest is Listen on 127.0.0.1:0 as the one member of a cluster, as
// production runs a node on its own: cfg.Membership, when nil, is a
// fakeMembership (tests over a fake catalog).
func listenTest(tb testing.TB, cfg Config) (*Server, error) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	if cfg.Membership == nil {
		cfg.Membership = testmember.New(selfOf("test", ln, nil))
	}
	srv, err := Serve(ln, cfg)
	if err != nil {
		ln.Close()
	}
	return srv, err
}

// engineMember joins e's cluster as member id with the endpoints of a
// server on these listeners; the test's cleanup leaves it.
func engineMember(tb testing.TB, e *engine.Engine, id string, ln, tlsLn net.Listener) lakestream.Membership {
	tb.Helper()
	m, err := e.JoinCluster(context.Background(), engine.MembershipConfig{ID: id, Endpoints: selfOf(id, ln, tlsLn).Endpoints})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { m.Close(context.Background()) })
	return m
}
