//go:build !unix

package testservers

import (
	"testing"

	"github.com/lakegate/lakegate/internal/testcerts"
)

// EtcdCluster is a cluster of etcd processes; see etcd.go (unix only).
type EtcdCluster struct {
	Endpoints                     []string
	Security                      EtcdSecurity
	CAFile                        string
	Certs                         *testcerts.Set
	ClientCertFile, ClientKeyFile string
}

// StartSecureEtcdCluster skips the test: the etcd cluster helper is unix only.
func StartSecureEtcdCluster(t testing.TB, n int, sec EtcdSecurity) *EtcdCluster {
	t.Skip("etcd cluster test servers: unix only")
	return nil
}

// StartEtcdCluster skips the test: the etcd cluster helper is unix only.
func StartEtcdCluster(t testing.TB, n int) *EtcdCluster {
	t.Skip("etcd cluster test servers: unix only")
	return nil
}

// Stop is unreachable off unix.
func (c *EtcdCluster) Stop(i int) {}

// Start is unreachable off unix.
func (c *EtcdCluster) Start(i int) {}

// WaitHealthy is unreachable off unix.
func (c *EtcdCluster) WaitHealthy() {}

// Running is unreachable off unix.
func (c *EtcdCluster) Running(i int) bool { return false }

// Healthy is unreachable off unix.
func (c *EtcdCluster) Healthy(i int) bool { return false }

// Leader is unreachable off unix.
func (c *EtcdCluster) Leader() int { return -1 }
