//go:build !unix

package testservers

import (
	"testing"
	"time"
)

// Azurite is a running Azurite; see azurite.go (unix only).
type Azurite struct {
	Host, Endpoint, Container, URL string
	Startup                        time.Duration
}

// StartAzurite skips the test: starting Azurite is supported on unix only.
func StartAzurite(t testing.TB) *Azurite {
	t.Skip("azurite test server: unix only")
	return nil
}

// ContainerURL is unreachable off unix.
func (a *Azurite) ContainerURL(container string) string { return "" }

// CreateContainer is unreachable off unix.
func (a *Azurite) CreateContainer(t testing.TB, name string) string { return "" }
