//go:build unix

package testservers

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
)

// Environment variables read by StartAzurite.
const (
	// EnvSkipAzure set to "1" makes StartAzurite skip the test when Azurite
	// (or node) is missing, instead of failing it.
	EnvSkipAzure = "LAKEGATE_SKIP_AZURE"
)

// The emulator's account: Azurite's built-in account and its well-known key,
// published in Azurite's and Azure's documentation (not a secret).
const (
	AzuriteAccount = "devstoreaccount1"
	AzuriteKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// Bounds of a start. Azurite 3.35.0 on Node 20 prints its ready line about
// 1 s after exec on 2 cores.
const (
	azuriteReadyTimeout     = 30 * time.Second
	azuriteContainerTimeout = 30 * time.Second
	azuriteStopTimeout      = 10 * time.Second
	azuriteStartAttempts    = 3 // a start retries with a new port if azurite dies (the port was taken meanwhile)
	// azuriteExtentMemoryMB bounds the emulator's in-memory object data
	// (its default is half the machine's memory); a write beyond it fails.
	azuriteExtentMemoryMB = 1024
)

// azuriteEntry is the emulator's blob-service entry point, relative to the
// repository root, as installed by tools/install-azurite.sh.
const azuriteEntry = "tools/azurite/node_modules/.bin/azurite-blob"

var azuriteReadyLine = regexp.MustCompile(`Azurite Blob service successfully listens on`)

// Azurite is a running Azurite blob service (the Azure Storage emulator,
// npm azurite@3.35.0 under node) on loopback, holding its data in memory.
// It serves the single account devstoreaccount1 with shared-key
// authentication (AzuriteKey), path-style: http://127.0.0.1:PORT/ACCOUNT/CONTAINER.
type Azurite struct {
	// Host is "127.0.0.1:PORT".
	Host string
	// Endpoint is the account's service URL, "http://127.0.0.1:PORT/devstoreaccount1".
	Endpoint string
	// Container is the container created at start.
	Container string
	// URL is the gocloud URL of Container, see ContainerURL.
	URL string
	// Startup is the time from exec to the container created.
	Startup time.Duration

	proc *process
}

// StartAzurite starts Azurite's blob service on a free loopback port, waits
// until it listens, creates a container, and stops the server (SIGKILL to
// its process group) in t's cleanup. Start one per test and separate
// subtests by container or by key prefix.
//
// It sets, with t.Setenv (so neither the test nor its parents may be
// parallel), the environment through which gocloud's azureblob driver finds
// the emulator: AZURE_STORAGE_ACCOUNT, AZURE_STORAGE_KEY,
// AZURE_STORAGE_PROTOCOL=http, AZURE_STORAGE_IS_LOCAL_EMULATOR=true and
// AZURE_STORAGE_DOMAIN=127.0.0.1:PORT. The driver reads that environment
// once per process (on the first azblob:// open), so the URLs returned here
// also carry the endpoint as URL parameters (see ContainerURL): a second
// emulator in the same test binary, on another port, is then reached too.
//
// If node or Azurite is missing the test fails with a message to run
// `make tools`, or is skipped when LAKEGATE_SKIP_AZURE=1.
func StartAzurite(t testing.TB) *Azurite {
	t.Helper()
	node, entry := findAzurite(t)
	var errs []error
	for range azuriteStartAttempts {
		a, err := startAzurite(t, node, entry)
		if err == nil {
			t.Logf("azurite: blob service at %s ready in %v", a.Endpoint, a.Startup.Round(time.Millisecond))
			return a
		}
		errs = append(errs, err)
		t.Logf("azurite: start failed, retrying with a new port: %v", err)
	}
	t.Fatalf("azurite: could not start: %v", errors.Join(errs...))
	return nil
}

// ContainerURL returns the gocloud URL of container on this server:
//
//	azblob://CONTAINER?domain=127.0.0.1:PORT&localemu=true&protocol=http
//
// The credentials (AZURE_STORAGE_ACCOUNT, AZURE_STORAGE_KEY) come from the
// environment StartAzurite sets; the parameters repeat the endpoint part of
// it, which azureblob would otherwise take from the environment of the first
// azblob:// open in the process.
func (a *Azurite) ContainerURL(container string) string {
	q := url.Values{
		"domain":   {a.Host},
		"localemu": {"true"},
		"protocol": {"http"},
	}
	return "azblob://" + container + "?" + q.Encode()
}

// CreateContainer creates another container and returns its gocloud URL.
func (a *Azurite) CreateContainer(t testing.TB, name string) string {
	t.Helper()
	if err := a.createContainer(name); err != nil {
		t.Fatalf("azurite: %v", err)
	}
	return a.ContainerURL(name)
}

// AzuritePath returns node and the azurite-blob entry point installed by
// tools/install-azurite.sh under the repository root.
func AzuritePath() (node, entry string, err error) {
	root, err := RepoRoot()
	if err != nil {
		return "", "", err
	}
	entry = filepath.Join(root, filepath.FromSlash(azuriteEntry))
	if _, err := os.Stat(entry); err != nil {
		return "", "", fmt.Errorf("azurite not installed: %w", err)
	}
	node, err = exec.LookPath("node")
	if err != nil {
		return "", "", fmt.Errorf("azurite needs node: %w", err)
	}
	return node, entry, nil
}

func findAzurite(t testing.TB) (node, entry string) {
	t.Helper()
	node, entry, err := AzuritePath()
	if err == nil {
		return node, entry
	}
	if os.Getenv(EnvSkipAzure) == "1" {
		t.Skipf("Azure tests skipped (%s=1): %v", EnvSkipAzure, err)
	}
	t.Fatalf("azurite: %v; run `make tools` (tools/install-azurite.sh, needs Node 20+) to install it, or set %s=1 to skip the Azure tests", err, EnvSkipAzure)
	return "", ""
}

func startAzurite(t testing.TB, node, entry string) (*Azurite, error) {
	dir := t.TempDir()
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	host := "127.0.0.1:" + strconv.Itoa(ports[0])
	args := []string{entry,
		"--blobHost", "127.0.0.1",
		"--blobPort", strconv.Itoa(ports[0]),
		"--inMemoryPersistence",
		"--extentMemoryLimit", strconv.Itoa(azuriteExtentMemoryMB),
		"--skipApiVersionCheck", // the Go SDK speaks a newer API version than 3.35.0 knows
		"--disableTelemetry",    // no calls out of the machine
		"--silent",              // no access log
	}
	begin := time.Now()
	p, err := startProcess(node, args, filepath.Join(dir, "azurite.out"), azuriteReadyLine)
	if err != nil {
		return nil, err
	}
	stop := func() { p.kill(azuriteStopTimeout) }
	select {
	case <-p.ready:
	case <-p.exited:
		stop()
		return nil, fmt.Errorf("azurite exited before it listened: %v\n%s", p.exitErr, p.tail())
	case <-time.After(azuriteReadyTimeout):
		stop()
		return nil, fmt.Errorf("azurite not listening after %v\n%s", azuriteReadyTimeout, p.tail())
	}
	a := &Azurite{
		Host:      host,
		Endpoint:  "http://" + host + "/" + AzuriteAccount,
		Container: "lakegate-test",
		proc:      p,
	}
	if err := a.createContainer(a.Container); err != nil {
		stop()
		return nil, fmt.Errorf("%w\n%s", err, p.tail())
	}
	a.Startup = time.Since(begin)
	a.URL = a.ContainerURL(a.Container)
	t.Cleanup(stop)

	t.Setenv("AZURE_STORAGE_ACCOUNT", AzuriteAccount)
	t.Setenv("AZURE_STORAGE_KEY", AzuriteKey)
	t.Setenv("AZURE_STORAGE_PROTOCOL", "http")
	t.Setenv("AZURE_STORAGE_IS_LOCAL_EMULATOR", "true")
	t.Setenv("AZURE_STORAGE_DOMAIN", host)
	return a, nil
}

// createContainer creates a container with the Azure SDK (shared-key
// authenticated PUT ?restype=container). The server listens when its ready
// line is printed, so one attempt (with the SDK's own retries) suffices.
func (a *Azurite) createContainer(name string) error {
	cred, err := azblob.NewSharedKeyCredential(AzuriteAccount, AzuriteKey)
	if err != nil {
		return err
	}
	c, err := container.NewClientWithSharedKeyCredential(a.Endpoint+"/"+name, cred, nil)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), azuriteContainerTimeout)
	defer cancel()
	if _, err := c.Create(ctx, nil); err != nil {
		return fmt.Errorf("create container %q: %w", name, err)
	}
	return nil
}
