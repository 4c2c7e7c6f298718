package gateway

// Reaching other members (docs/security.md, "Clusters").
//
// A node talks to other members three ways: forwarded admin requests and
// hand-overs (HTTP, carrying Config.BrokerClientToken or the client's own
// credentials), and relayed client connections in proxy mode (the Pulsar
// protocol, carrying the client's identity). Each goes to the member's
// advertised address, over TLS whenever the member advertises a TLS
// endpoint; with authentication on, a member without one is not reached in
// clear unless Config.AllowPlaintextPeers says so. The TLS configuration is
// asked for at every new connection (Config.ClientTLS), so a rotated CA
// file is trusted from the next connection on.
//
// A relay is a proxy in Pulsar's sense: the relaying node authenticated the
// client itself, and connects to the owner as its own role (a proxy role
// there: Config.ProxyRoles) naming the client in original_principal, with
// the client's token as original_auth_data. The owner authorizes both roles
// (auth.go); a client never borrows the relaying node's identity.

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"time"

	gproto "google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/auth"
	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol/pb"
)

// peerBase is the admin base URL member is reached at: its https endpoint
// whenever it advertises one, else its http endpoint — which a node with
// authentication uses only with AllowPlaintextPeers, since the request
// carries a token.
func (s *Server) peerBase(member lakestream.Member) (string, error) {
	if u := member.Endpoints["https"]; u != "" {
		return u, nil
	}
	u := member.Endpoints["http"]
	if u == "" {
		return "", fmt.Errorf("%w: member %s advertises no http endpoint", broker.ErrServiceNotReady, member.ID)
	}
	if s.cfg.Auth != nil && !s.cfg.AllowPlaintextPeers {
		return "", fmt.Errorf("%w: member %s advertises no https endpoint, and a request to it would carry credentials in clear (set cluster.allowPlaintextPeers to allow it)", broker.ErrServiceNotReady, member.ID)
	}
	return u, nil
}

// relayEndpoint is the address a connection is relayed to: member's
// pulsar+ssl endpoint whenever it advertises one, else its pulsar one —
// which a node with authentication uses only with AllowPlaintextPeers.
func (s *Server) relayEndpoint(member lakestream.Member) (addr string, useTLS bool, err error) {
	if u := member.Endpoints["pulsar+ssl"]; u != "" {
		return hostPort(u), true, nil
	}
	u := member.Endpoints["pulsar"]
	if u == "" {
		return "", false, fmt.Errorf("%w: member %s advertises no pulsar endpoint", broker.ErrServiceNotReady, member.ID)
	}
	if s.cfg.Auth != nil && !s.cfg.AllowPlaintextPeers {
		return "", false, fmt.Errorf("%w: member %s advertises no pulsar+ssl endpoint, and a relayed connection would carry credentials in clear (set cluster.allowPlaintextPeers to allow it)", broker.ErrServiceNotReady, member.ID)
	}
	return hostPort(u), false, nil
}

// peerTransport is the HTTP transport of requests to members: TLS
// connections are made with a configuration asked for at each dial (a
// rotated CA file is used from the next connection on), and no HTTP proxy
// of the environment is used (members are reached at their advertised
// addresses).
func (s *Server) peerTransport() *http.Transport {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Transport{
		DialContext: d.DialContext,
		DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			cfg := s.clientTLS()
			cfg.ServerName = host
			return (&tls.Dialer{NetDialer: d, Config: cfg}).DialContext(ctx, network, addr)
		},
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
	}
}

// relayConnect is the CONNECT this node sends to the member it relays
// connect to. Without authentication it is the client's own (less
// proxy_to_broker_url). With authentication this node speaks as a proxy:
// its own credentials (BrokerClientToken, else its certificate through the
// tls provider), the client's role as original_principal and, for a token
// client, the token as original_auth_data (the owner verifies it and
// challenges the client through the relay when it expires). A client
// certificate cannot be forwarded: the owner takes the principal on this
// node's word.
func (s *session) relayConnect(connect *pb.CommandConnect) *pb.CommandConnect {
	c := gproto.Clone(connect).(*pb.CommandConnect)
	c.ProxyToBrokerUrl = nil
	if s.srv.cfg.Auth == nil {
		return c
	}
	id, original := s.identities()
	client, method, data := id, connect.GetAuthMethodName(), string(connect.GetAuthData())
	if original.Role != "" { // a proxy in front of this node
		client, method, data = original, connect.GetOriginalAuthMethod(), connect.GetOriginalAuthData()
	}
	c.OriginalPrincipal = gproto.String(client.Role)
	c.OriginalAuthMethod, c.OriginalAuthData = nil, nil
	if client.Method == auth.MethodToken && data != "" {
		if method == "" {
			method = auth.MethodToken
		}
		c.OriginalAuthMethod, c.OriginalAuthData = gproto.String(method), gproto.String(data)
	}
	c.AuthMethod = nil
	if t := s.srv.cfg.BrokerClientToken; t != "" {
		c.AuthMethodName, c.AuthData = gproto.String(auth.MethodToken), []byte(t)
	} else {
		c.AuthMethodName, c.AuthData = gproto.String(auth.MethodTLS), nil
	}
	c.ProxyVersion = gproto.String(s.srv.cfg.ServerVersion)
	return c
}

// peerRequestTimeout bounds one request to a peer (a forwarded admin
// request, a hand-over).
const peerRequestTimeout = 30 * time.Second
