//go:build unix

package meta_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lakegate/lakegate/internal/testcerts"
	"github.com/lakegate/lakegate/internal/testservers"
	"github.com/lakegate/lakegate/meta"
)

// clientTLS trusts caFile and presents cert/key (none when empty).
func clientTLS(t *testing.T, caFile, cert, key string) *tls.Config {
	t.Helper()
	b, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b)
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if cert != "" {
		c, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return cfg
}

// TestDialTLS: a store on an etcd member process that serves TLS and
// requires client certificates works with the CA and a certificate of the
// member's CA; without a certificate, with one of another CA, trusting
// another CA (or only the system's), or over plain HTTP, Dial fails within
// its timeout with ErrUnavailable and says why.
func TestDialTLS(t *testing.T) {
	c := testservers.StartSecureEtcdCluster(t, 1, testservers.EtcdSecurity{TLS: true, ClientCertAuth: true})
	ctx := ctxT(t)
	cert, key, err := c.Certs.Client("lakegate", "lakegate")
	if err != nil {
		t.Fatal(err)
	}
	s, err := meta.Dial(ctx, c.Endpoints, meta.DialOptions{EtcdOptions: meta.EtcdOptions{Prefix: "/lg/"}, TLS: clientTLS(t, c.CAFile, cert, key)})
	if err != nil {
		t.Fatal(err)
	}
	put(t, s, "k", "v")
	s.Close()

	other, err := testcerts.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ocert, okey, _ := other.Client("rogue", "root")
	plain := []string{strings.Replace(c.Endpoints[0], "https://", "http://", 1)}
	for name, tc := range map[string]struct {
		endpoints []string
		cfg       *tls.Config
		want      string
	}{
		"no client certificate":        {c.Endpoints, clientTLS(t, c.CAFile, "", ""), "certificate required"},
		"certificate of another CA":    {c.Endpoints, clientTLS(t, c.CAFile, ocert, okey), "unknown certificate authority"},
		"trusting another CA":          {c.Endpoints, clientTLS(t, other.CAFile, cert, key), "x509: certificate signed by unknown authority"},
		"the system roots only":        {c.Endpoints, nil, "x509: certificate signed by unknown authority"},
		"plain client on a TLS member": {plain, nil, "serves TLS"},
	} {
		start := time.Now()
		_, err := meta.Dial(ctx, tc.endpoints, meta.DialOptions{TLS: tc.cfg, DialTimeout: 2 * time.Second})
		t.Logf("%s: %v (%v)", name, err, time.Since(start).Round(time.Millisecond))
		if err == nil {
			t.Fatalf("%s: Dial succeeded", name)
		}
		if !errors.Is(err, meta.ErrUnavailable) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrUnavailable saying %q", name, err, tc.want)
		}
	}
}

// TestDialAuth: with etcd's authentication on, a store with the right
// user and password works under the user's prefix; a wrong password, no
// user, or a prefix the user's role does not cover fail Dial at once with
// ErrPermissionDenied.
func TestDialAuth(t *testing.T) {
	c := testservers.StartSecureEtcdCluster(t, 1, testservers.EtcdSecurity{
		RootPassword: "root-secret",
		Users:        []testservers.EtcdUser{{Name: "lakegate", Password: "lg-secret", Prefix: "/lg/"}},
	})
	ctx := ctxT(t)
	s, err := meta.Dial(ctx, c.Endpoints, meta.DialOptions{EtcdOptions: meta.EtcdOptions{Prefix: "/lg/"}, Username: "lakegate", Password: "lg-secret"})
	if err != nil {
		t.Fatal(err)
	}
	put(t, s, "k", "v")
	s.Close()
	for name, o := range map[string]meta.DialOptions{
		"wrong password":   {EtcdOptions: meta.EtcdOptions{Prefix: "/lg/"}, Username: "lakegate", Password: "nope"},
		"unknown user":     {EtcdOptions: meta.EtcdOptions{Prefix: "/lg/"}, Username: "mallory", Password: "lg-secret"},
		"no credentials":   {EtcdOptions: meta.EtcdOptions{Prefix: "/lg/"}},
		"outside the role": {EtcdOptions: meta.EtcdOptions{Prefix: "/other/"}, Username: "lakegate", Password: "lg-secret"},
	} {
		start := time.Now()
		_, err := meta.Dial(ctx, c.Endpoints, o)
		t.Logf("%s: %v (%v)", name, err, time.Since(start).Round(time.Millisecond))
		if !errors.Is(err, meta.ErrPermissionDenied) {
			t.Errorf("%s: %v, want ErrPermissionDenied", name, err)
		}
	}
}
