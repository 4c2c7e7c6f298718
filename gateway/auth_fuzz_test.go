package gateway

// FuzzAuthHandshake: no handshake a client sends — CONNECT with any
// authentication method and data, AUTH_RESPONSE, anything before or
// between — takes a node with token authentication down or lets an
// unauthenticated client in; a well-behaved, authenticated connection keeps
// producing and consuming. Run:
//
//	go test -run '^$' -fuzz '^FuzzAuthHandshake$' -fuzztime 2000x ./gateway/

import (
	"bufio"
	"bytes"
	"net"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/auth"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

func connectWith(method string, data []byte) protocol.Frame {
	return cmdFrame(pb.BaseCommand_CONNECT, func(c *pb.BaseCommand) {
		c.Connect = &pb.CommandConnect{ClientVersion: proto.String("fuzz"), ProtocolVersion: proto.Int32(21),
			AuthMethodName: proto.String(method), AuthData: data,
			FeatureFlags: &pb.FeatureFlags{SupportsAuthRefresh: proto.Bool(true)}}
	})
}

func authResponse(method string, data []byte) protocol.Frame {
	return cmdFrame(pb.BaseCommand_AUTH_RESPONSE, func(c *pb.BaseCommand) {
		c.AuthResponse = &pb.CommandAuthResponse{Response: &pb.AuthData{AuthMethodName: proto.String(method), AuthData: data}}
	})
}

// startAuthGateway starts a gateway requiring tokens signed with secret.
func startAuthGateway(tb testing.TB) (*Server, []byte) {
	tb.Helper()
	secret, err := auth.NewSecretKey()
	if err != nil {
		tb.Fatal(err)
	}
	a, err := auth.New(auth.Config{Providers: []string{auth.MethodToken, auth.MethodTLS}, Token: auth.TokenConfig{SecretKey: secret}})
	if err != nil {
		tb.Fatal(err)
	}
	srv := startMemGateway(tb, func(c *Config) {
		c.Auth, c.Authorization, c.SuperUserRoles = a, true, []string{"admin"}
	})
	return srv, secret
}

func authSeeds(tb testing.TB, secret []byte) [][]byte {
	good, _ := auth.NewToken(auth.TokenSpec{Subject: "nobody"}, secret, nil, "")
	expired, _ := auth.NewToken(auth.TokenSpec{Subject: "admin", Expiry: -time.Hour}, secret, nil, "")
	other, _ := auth.NewSecretKey()
	forged, _ := auth.NewToken(auth.TokenSpec{Subject: "admin"}, other, nil, "")
	seqs := [][]protocol.Frame{
		{connectWith("token", []byte(good)), producerFrame("persistent://public/default/x", 1, 1)},
		{connectWith("token", []byte(expired))},
		{connectWith("token", []byte(forged))},
		{connectWith("token", nil)},
		{connectWith("tls", nil)},
		{connectWith("basic", []byte("user:password"))},
		{connectWith("", nil), producerFrame("persistent://public/default/x", 1, 1)},
		{connectWith("token", []byte(good)), authResponse("token", []byte(forged))},
		{connectWith("token", []byte(good)), authResponse("token", []byte(good)), authResponse("tls", nil)},
		{authResponse("token", []byte(good))}, // before CONNECT
	}
	var out [][]byte
	for _, fs := range seqs {
		b := frameBytes(tb, fs...)
		out = append(out, b, b[:len(b)/2])
	}
	return append(out, nil, []byte{0, 0, 0, 4, 0, 0, 0, 0})
}

// feedRaw writes in (then a PING) on a fresh connection and waits for the
// PING's PONG or the connection's end; a CONNECTED to an input whose
// credentials are not a valid token fails the input.
func feedRaw(srv *Server, in, ping []byte) (connected bool, err error) {
	conn, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		return false, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(fuzzIOTimeout))
	if _, err := conn.Write(append(append([]byte(nil), in...), ping...)); isTimeout(err) {
		return false, err
	}
	conn.(*net.TCPConn).CloseWrite()
	br := bufio.NewReader(conn)
	for {
		fr, err := protocol.ReadFrame(br, 0)
		switch {
		case isTimeout(err):
			return connected, err
		case err != nil:
			return connected, nil
		case fr.Cmd.GetType() == pb.BaseCommand_CONNECTED:
			connected = true
		case fr.Cmd.GetType() == pb.BaseCommand_PONG:
			return connected, nil
		}
	}
}

// validFirstConnect reports whether in starts with a CONNECT carrying a
// token that verifies with secret (an input that may legitimately connect).
func validFirstConnect(in, secret []byte) bool {
	f, err := protocol.ReadFrame(bufio.NewReader(bytes.NewReader(in)), 0)
	if err != nil || f.Cmd.GetType() != pb.BaseCommand_CONNECT {
		return false
	}
	a, _ := auth.New(auth.Config{Providers: []string{auth.MethodToken}, Token: auth.TokenConfig{SecretKey: secret}})
	c := f.Cmd.GetConnect()
	_, err = a.Authenticate(c.GetAuthMethodName(), c.GetAuthData(), nil)
	return err == nil
}

func FuzzAuthHandshake(f *testing.F) {
	srv, secret := startAuthGateway(f)
	for _, s := range authSeeds(f, secret) {
		f.Add(s)
	}
	admin, _ := auth.NewToken(auth.TokenSpec{Subject: "admin"}, secret, nil, "")
	p := newProbeConnect(f, srv, connectWith("token", []byte(admin)))
	ping := frameBytes(f, protocol.Frame{Cmd: protocol.Ping()})
	f.Fuzz(func(t *testing.T, in []byte) {
		connected, err := feedRaw(srv, in, ping)
		if err != nil {
			t.Fatal(err)
		}
		if connected && !validFirstConnect(in, secret) {
			t.Fatal("CONNECTED without valid credentials")
		}
		if err := p.roundTrip(); err != nil {
			t.Fatalf("the authenticated connection stopped working: %v", err)
		}
	})
}
