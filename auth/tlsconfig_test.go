package auth

import (
	"crypto/tls"
	"crypto/x509"
	"os"
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
