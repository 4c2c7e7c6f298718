package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// docs/configuration.md is generated from the code: regenerate it with
//
//	go run ./cmd/lakegate config docs > docs/configuration.md
func TestConfigurationDocMatchesCode(t *testing.T) {
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != configDocs() {
		t.Fatal("docs/configuration.md is stale: run `go run ./cmd/lakegate config docs > docs/configuration.md`")
	}
}

func TestExampleConfigLoads(t *testing.T) {
	c, err := loadConfig("serve", []string{"--config", "../../deploy/lakegate.example.yaml"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Etcd.Endpoints) != 3 || c.Engine.Linger != 250*time.Millisecond || !c.Log.JSON {
		t.Fatalf("example not loaded: %+v", c)
	}
}

func TestConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "c.yaml")
	os.WriteFile(file, []byte("dataDir: /from/file\npulsar:\n  addr: ':1111'\nengine:\n  linger: 5ms\n"), 0o644)
	c, err := loadConfig("serve", []string{"--config", file, "--pulsar-addr", ":3333"},
		[]string{"LAKEGATE_PULSAR_ADDR=:2222", "LAKEGATE_ENGINE_LINGER=7ms", "LAKEGATE_ETCD_ENDPOINTS=a:1, b:2"})
	if err != nil {
		t.Fatal(err)
	}
	if c.DataDir != "/from/file" || c.Pulsar.Addr != ":3333" || c.Engine.Linger != 7*time.Millisecond ||
		strings.Join(c.Etcd.Endpoints, ",") != "a:1,b:2" || c.HTTP.Addr != ":8080" || c.Engine.MaxInflightFlushes != 4 {
		t.Fatalf("precedence default < file < env < flag broken: %+v", c)
	}
}

func TestConfigErrorsNameTheKey(t *testing.T) {
	dir := t.TempDir()
	unknown := filepath.Join(dir, "u.yaml")
	os.WriteFile(unknown, []byte("engine:\n  lingr: 5ms\n"), 0o644)
	for _, tc := range []struct {
		args []string
		env  []string
		want string
	}{
		{[]string{"--config", unknown}, nil, "lingr"},
		{nil, []string{"LAKEGATE_ENGINE_LINGER=soon"}, "engine.linger"},
		{[]string{"--engine-cache-bytes", "-5"}, nil, "engine.cacheBytes"},
		{[]string{"--log-level", "loud"}, nil, "log.level"},
		{[]string{"--config", filepath.Join(dir, "missing.yaml")}, nil, "missing.yaml"},
		{[]string{"--kafka-addr", ":0", "--kafka-namespace", "orders"}, nil, "kafka.namespace"},
		{[]string{"--kafka-addr", ":0", "--kafka-namespace", "a/b/c"}, nil, "kafka.namespace"},
		{[]string{"--kafka-addr", ":0", "--kafka-tls"}, nil, "kafka.tls"},
	} {
		_, err := loadConfig("standalone", tc.args, tc.env)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %v: error %v, want one naming %q", tc.args, tc.env, err, tc.want)
		}
	}
}

// A cluster node with authentication sends tokens to other members: it
// refuses to start without TLS between them unless told it is unsafe, and
// in proxy mode it needs a proxy role to relay with.
func TestConfigPeersNeedTLS(t *testing.T) {
	base := []string{"--etcd-endpoints", "http://127.0.0.1:2379", "--auth-enabled", "--auth-token-secret-key", "data:;base64,c2VjcmV0"}
	for _, c := range []struct {
		name  string
		flags []string
		want  string // "" = accepted
	}{
		{"no https", nil, "http.tlsAddr"},
		{"no https, unsafe allowed", []string{"--cluster-allow-plaintext-peers"}, ""},
		{"https", []string{"--http-tls-addr", ":8443", "--tls-cert-file", "c.pem", "--tls-key-file", "k.pem"}, ""},
		{"proxy mode without pulsar+ssl", []string{"--http-tls-addr", ":8443", "--tls-cert-file", "c.pem", "--tls-key-file", "k.pem", "--cluster-proxy-lookups", "--auth-broker-client-token", "t", "--auth-proxy-roles", "lakegate-node"}, "pulsar.tlsAddr"},
		{"proxy mode without proxy roles", []string{"--http-tls-addr", ":8443", "--pulsar-tls-addr", ":6651", "--tls-cert-file", "c.pem", "--tls-key-file", "k.pem", "--cluster-proxy-lookups", "--auth-broker-client-token", "t"}, "auth.proxyRoles"},
		{"proxy mode without relay credentials", []string{"--http-tls-addr", ":8443", "--pulsar-tls-addr", ":6651", "--tls-cert-file", "c.pem", "--tls-key-file", "k.pem", "--cluster-proxy-lookups", "--auth-proxy-roles", "lakegate-node"}, "auth.brokerClientToken"},
	} {
		_, err := loadConfig("serve", append(append([]string{}, base...), c.flags...), nil)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want an error naming %s", c.name, err, c.want)
		}
	}
	// A standalone node has no other member.
	if _, err := loadConfig("standalone", []string{"--auth-enabled", "--auth-token-secret-key", "data:;base64,c2VjcmV0"}, nil); err != nil {
		t.Errorf("standalone with authentication and no TLS: %v", err)
	}
}

// A cluster node bound to every interface advertises the host's name, never
// localhost (other members would reach themselves there); a node of its own
// keeps localhost.
func TestAdvertisedWildcard(t *testing.T) {
	bound := &net.TCPAddr{IP: net.IPv4zero, Port: 6650}
	host, err := os.Hostname()
	if err != nil || host == "" || host == "localhost" {
		t.Skipf("no usable host name here (%q, %v)", host, err)
	}
	if got, err := advertised("", bound, true); err != nil || got != net.JoinHostPort(host, "6650") {
		t.Errorf("cluster node: %q %v, want %s:6650", got, err, host)
	}
	if got, _ := advertised("", bound, false); got != "localhost:6650" {
		t.Errorf("standalone: %q", got)
	}
	if got, _ := advertised("pod-1.lakegate:6650", bound, true); got != "pod-1.lakegate:6650" {
		t.Errorf("configured: %q", got)
	}
	if got, _ := advertised("", &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 6650}, true); got != "10.1.2.3:6650" {
		t.Errorf("bound to one address: %q", got)
	}
}
