package auth

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lakegate/lakegate/internal/testcerts"
)

// A rotated certificate is served from the next handshake on; a broken
// replacement keeps the previous one (and is reported).
func TestReloaderRotates(t *testing.T) {
	dir := t.TempDir()
	set, err := testcerts.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := set.Server("node")
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewReloader(TLSFiles{CertFile: cert, KeyFile: key, CAFile: set.CAFile})
	if err != nil {
		t.Fatal(err)
	}
	r.checkInterval = 0 // look at the files at every use
	serial := func() string {
		c, _ := r.current()
		x, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return x.SerialNumber.String()
	}
	first := serial()
	// The new pair is written under other names, then moved over the old
	// ones (as a Kubernetes Secret update does, atomically).
	c2, k2, err := set.Server("next")
	if err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Second)
	os.Chtimes(c2, later, later)
	os.Chtimes(k2, later, later)
	if err := os.Rename(c2, cert); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(k2, key); err != nil {
		t.Fatal(err)
	}
	if got := serial(); got == first {
		t.Fatalf("certificate not reloaded: serial still %s", got)
	}
	rotated := serial()
	// A broken file: the last good certificate stays, the error is kept.
	os.WriteFile(cert, []byte("not a certificate"), 0o600)
	even := time.Now().Add(2 * time.Second)
	os.Chtimes(cert, even, even)
	if got := serial(); got != rotated || r.Err() == nil {
		t.Fatalf("broken file: serial %s (want %s), err %v", got, rotated, r.Err())
	}
	cfg := r.ServerConfig(true)
	sc, err := cfg.GetConfigForClient(&tls.ClientHelloInfo{})
	if err != nil || sc.MinVersion != tls.VersionTLS12 || sc.ClientAuth != tls.VerifyClientCertIfGiven || sc.ClientCAs == nil {
		t.Fatalf("server config: %+v %v", sc, err)
	}
}

// ClientConfig trusts the CA file as it is when called: a configuration
// asked for after the file was rotated verifies a server whose certificate
// only the new CA signed (outbound connections to other members take one
// per connection).
func TestClientConfigFollowsRotatedCA(t *testing.T) {
	dir := t.TempDir()
	oldCA, err := testcerts.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	newCA, err := testcerts.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cert, key, _ := oldCA.Server("node")
	caFile := filepath.Join(dir, "ca.pem")
	copyFile(t, oldCA.CAFile, caFile)
	r, err := NewReloader(TLSFiles{CertFile: cert, KeyFile: key, CAFile: caFile})
	if err != nil {
		t.Fatal(err)
	}
	r.checkInterval = 0
	// A server whose certificate the new CA signed.
	scert, skey, _ := newCA.Server("peer")
	pair, err := tls.LoadX509KeyPair(scert, skey)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	dial := func() error {
		cfg := r.ClientConfig()
		cfg.ServerName = "localhost"
		c, err := tls.Dial("tcp", ln.Addr().String(), cfg)
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := dial(); err == nil {
		t.Fatal("a server signed by a CA not yet trusted was accepted")
	}
	// Rotation: the CA file now holds both CAs.
	bundle := append(readFile(t, oldCA.CAFile), readFile(t, newCA.CAFile)...)
	if err := os.WriteFile(caFile, bundle, 0o600); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Second)
	os.Chtimes(caFile, later, later)
	if err := dial(); err != nil {
		t.Fatalf("after the CA file was rotated: %v", err)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	if err := os.WriteFile(to, readFile(t, from), 0o600); err != nil {
		t.Fatal(err)
	}
}
