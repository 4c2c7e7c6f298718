package testcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Set is a CA and the files written for it.
type Set struct {
	Dir    string
	CAFile string // the CA certificate (PEM)

	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
	serial int64
}

// New makes a CA in dir (ca.pem).
func New(dir string) (*Set, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "lakegate test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	s := &Set{Dir: dir, CAFile: filepath.Join(dir, "ca.pem"), caCert: cert, caKey: key, serial: 1}
	if err := writePEM(s.CAFile, "CERTIFICATE", der); err != nil {
		return nil, err
	}
	return s, nil
}

// Server writes name.pem and name-key.pem: a server certificate for
// 127.0.0.1, ::1 and localhost (and hosts), also usable as a client
// certificate (members present it to each other).
func (s *Set) Server(name string, hosts ...string) (certFile, keyFile string, err error) {
	tmpl := s.template(name)
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	tmpl.DNSNames = append([]string{"localhost"}, hosts...)
	tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}
	return s.issue(name, tmpl)
}

// Client writes name.pem and name-key.pem: a client certificate whose
// common name (the role, for TLS authentication) is role.
func (s *Set) Client(name, role string) (certFile, keyFile string, err error) {
	tmpl := s.template(role)
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return s.issue(name, tmpl)
}

// ClientUntil is Client with a certificate that expires at notAfter (tests
// of expiry on live connections).
func (s *Set) ClientUntil(name, role string, notAfter time.Time) (certFile, keyFile string, err error) {
	tmpl := s.template(role)
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	tmpl.NotAfter = notAfter
	return s.issue(name, tmpl)
}

func (s *Set) template(cn string) *x509.Certificate {
	s.serial++
	return &x509.Certificate{
		SerialNumber: big.NewInt(s.serial),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
	}
}

func (s *Set) issue(name string, tmpl *x509.Certificate) (string, string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, s.caCert, &key.PublicKey, s.caKey)
	if err != nil {
		return "", "", err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile := filepath.Join(s.Dir, name+".pem"), filepath.Join(s.Dir, name+"-key.pem")
	if err := writePEM(certFile, "CERTIFICATE", der); err != nil {
		return "", "", err
	}
	if err := writePEM(keyFile, "PRIVATE KEY", kder); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
