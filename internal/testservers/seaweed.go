//go:build unix

package testservers

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Environment variables read by StartSeaweed.
const (
	// EnvSkipS3 set to "1" makes StartSeaweed skip the test when the weed
	// binary is missing, instead of failing it.
	EnvSkipS3 = "LAKEGATE_SKIP_S3"
	// EnvWeedBin overrides the path of the weed binary
	// (default: .cache/bin/weed at the repository root, then $PATH).
	EnvWeedBin = "LAKEGATE_WEED"
)

// Bounds of a start. The ready wait covers exec to "S3 ready" (about 4 s on
// 2 cores, of which the filer takes 3); the bucket wait covers the first
// bucket creation after that.
const (
	seaweedReadyTimeout  = 60 * time.Second
	seaweedBucketTimeout = 30 * time.Second
	seaweedStopTimeout   = 10 * time.Second
	seaweedStartAttempts = 3   // a start retries with new ports if weed dies (a port was taken meanwhile)
	seaweedLogLinesMax   = 200 // lines of weed's output kept for failure messages
)

// Seaweed is a running SeaweedFS ("weed mini": master, volume, filer and S3
// gateway in one process) serving S3 on loopback without authentication.
type Seaweed struct {
	// Endpoint is the S3 endpoint, "http://127.0.0.1:PORT".
	Endpoint string
	// Bucket is the bucket created at start.
	Bucket string
	// URL is the gocloud URL of Bucket, see BucketURL.
	URL string
	// Dir is the server's data directory (removed after the test).
	Dir string
	// Startup is the time from exec to the bucket created.
	Startup time.Duration

	proc *process
}

// StartSeaweed starts weed mini with every port (HTTP and gRPC of master,
// volume, filer, S3 and admin) free and chosen at start, waits until its S3
// gateway is ready, creates a bucket, and stops the server (SIGKILL to its
// process group) in t's cleanup. The server serves only this test: start one
// per test and separate subtests by bucket or by key prefix.
//
// If the weed binary is missing the test fails with a message to run
// `make tools`, or is skipped when LAKEGATE_SKIP_S3=1.
func StartSeaweed(t testing.TB) *Seaweed {
	t.Helper()
	bin := findWeed(t)
	var errs []error
	for range seaweedStartAttempts {
		s, err := startSeaweed(t, bin)
		if err == nil {
			t.Logf("seaweedfs: S3 at %s ready in %v", s.Endpoint, s.Startup.Round(time.Millisecond))
			return s
		}
		errs = append(errs, err)
		t.Logf("seaweedfs: start failed, retrying with new ports: %v", err)
	}
	t.Fatalf("seaweedfs: could not start: %v", errors.Join(errs...))
	return nil
}

// BucketURL returns the gocloud URL of bucket on this server:
//
//	s3://BUCKET?endpoint=http://127.0.0.1:PORT&use_path_style=true&region=us-east-1&anonymous=true
//
// anonymous=true sends unsigned requests (the server has no identities), so
// no AWS_* environment is needed.
func (s *Seaweed) BucketURL(bucket string) string {
	q := url.Values{
		"endpoint":       {s.Endpoint},
		"use_path_style": {"true"},
		"region":         {"us-east-1"},
		"anonymous":      {"true"},
	}
	return "s3://" + bucket + "?" + q.Encode()
}

// CreateBucket creates another bucket and returns its gocloud URL.
func (s *Seaweed) CreateBucket(t testing.TB, bucket string) string {
	t.Helper()
	if err := s.createBucket(bucket, time.Now().Add(seaweedBucketTimeout)); err != nil {
		t.Fatalf("seaweedfs: %v", err)
	}
	return s.BucketURL(bucket)
}

// WeedPath returns the weed binary to run: $LAKEGATE_WEED, else
// .cache/bin/weed at the repository root, else weed on $PATH.
func WeedPath() (string, error) {
	if p := os.Getenv(EnvWeedBin); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", EnvWeedBin, p, err)
		}
		return p, nil
	}
	var tried []string
	if root, err := RepoRoot(); err == nil {
		p := filepath.Join(root, ".cache", "bin", "weed")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		tried = append(tried, p)
	}
	if p, err := exec.LookPath("weed"); err == nil {
		return p, nil
	}
	tried = append(tried, "weed on $PATH")
	return "", fmt.Errorf("weed binary not found (tried %s)", strings.Join(tried, ", "))
}

// RepoRoot returns the root of the lakegate repository, found by walking up
// from the working directory (a test's package directory) to the go.mod of
// module github.com/lakegate/lakegate.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
			if first, _, _ := strings.Cut(string(b), "\n"); strings.TrimSpace(first) == "module github.com/lakegate/lakegate" {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the lakegate repository")
		}
		dir = parent
	}
}

func findWeed(t testing.TB) string {
	t.Helper()
	bin, err := WeedPath()
	if err == nil {
		return bin
	}
	if os.Getenv(EnvSkipS3) == "1" {
		t.Skipf("S3 tests skipped (%s=1): %v", EnvSkipS3, err)
	}
	t.Fatalf("seaweedfs: %v; run `make tools` (tools/build-weed.sh) to build it, or set %s=1 to skip the S3 tests", err, EnvSkipS3)
	return ""
}

// seaweedPortFlags name the ports weed mini listens on; all are given explicitly,
// as weed moves a default port that is taken to the next free one and would
// collide with a parallel test package doing the same.
var seaweedPortFlags = []string{
	"master.port", "master.port.grpc",
	"volume.port", "volume.port.grpc",
	"filer.port", "filer.port.grpc",
	"s3.port", "s3.port.grpc",
	"admin.port", "admin.port.grpc",
}

var seaweedReadyLine = regexp.MustCompile(`^\s*S3\s+ready\b`)

func startSeaweed(t testing.TB, bin string) (*Seaweed, error) {
	dir := t.TempDir()
	ports, err := freePorts(len(seaweedPortFlags))
	if err != nil {
		return nil, err
	}
	port := map[string]int{}
	args := []string{"-logdir=" + filepath.Join(dir, "log"), "mini",
		"-dir=" + filepath.Join(dir, "data"),
		"-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		"-s3.port.iceberg=0", "-s3.port.lance=0", "-admin.port.legacy=0",
		"-webdav=false", "-admin.ui=false",
		"-master.telemetry=false", // no calls out of the machine
	}
	for i, f := range seaweedPortFlags {
		port[f] = ports[i]
		args = append(args, "-"+f+"="+strconv.Itoa(ports[i]))
	}
	for _, d := range []string{"log", "data"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}

	begin := time.Now()
	p, err := startProcess(bin, args, filepath.Join(dir, "weed.out"), seaweedReadyLine)
	if err != nil {
		return nil, err
	}
	s := &Seaweed{
		Endpoint: "http://127.0.0.1:" + strconv.Itoa(port["s3.port"]),
		Bucket:   "lakegate-test",
		Dir:      dir,
		proc:     p,
	}
	stop := func() {
		p.kill(seaweedStopTimeout)
		removeSeaweedSockets(ports)
	}
	select {
	case <-p.ready:
	case <-p.exited:
		stop()
		return nil, fmt.Errorf("weed exited before S3 was ready: %v\n%s", p.exitErr, p.tail())
	case <-time.After(seaweedReadyTimeout):
		stop()
		return nil, fmt.Errorf("S3 not ready after %v\n%s", seaweedReadyTimeout, p.tail())
	}
	if err := s.createBucket(s.Bucket, time.Now().Add(seaweedBucketTimeout)); err != nil {
		stop()
		return nil, fmt.Errorf("%w\n%s", err, p.tail())
	}
	s.Startup = time.Since(begin)
	s.URL = s.BucketURL(s.Bucket)
	t.Cleanup(stop)
	return s, nil
}

// createBucket sends PUT /bucket until it succeeds. The S3 gateway answers
// as soon as it listens, a moment before the filer behind it takes writes,
// so the first attempts may fail; retries back off from 20 ms to 500 ms and
// stop at deadline or when the server exits.
func (s *Seaweed) createBucket(bucket string, deadline time.Time) error {
	backoff := 20 * time.Millisecond
	client := &http.Client{Timeout: 5 * time.Second}
	for {
		req, err := http.NewRequest(http.MethodPut, s.Endpoint+"/"+bucket, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK || strings.Contains(string(body), "BucketAlreadyOwnedByYou") {
				return nil
			}
			err = fmt.Errorf("PUT /%s: %s: %s", bucket, resp.Status, body)
		}
		if time.Now().Add(backoff).After(deadline) {
			return fmt.Errorf("create bucket %q: %w", bucket, err)
		}
		select {
		case <-s.proc.exited:
			return fmt.Errorf("create bucket %q: weed exited: %v", bucket, s.proc.exitErr)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// removeSeaweedSockets removes the unix sockets weed creates in /tmp, named
// after its ports; a killed weed leaves them behind.
func removeSeaweedSockets(ports []int) {
	for _, p := range ports {
		matches, _ := filepath.Glob("/tmp/seaweedfs-*-" + strconv.Itoa(p) + ".sock")
		for _, m := range matches {
			_ = os.Remove(m)
		}
	}
}

// process is a child process in its own process group whose combined output
// goes to a log file, with the last lines kept in memory.
type process struct {
	cmd     *exec.Cmd
	ready   chan struct{} // closed when a line matches the ready pattern
	exited  chan struct{} // closed when the process has exited
	exitErr error         // set before exited is closed

	mu struct {
		sync.Mutex
		lines []string // last seaweedLogLinesMax lines
	}
}

func startProcess(bin string, args []string, logPath string, readyLine *regexp.Regexp) (*process, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		logFile.Close()
		return nil, err
	}
	p := &process{
		cmd:    exec.Command(bin, args...),
		ready:  make(chan struct{}),
		exited: make(chan struct{}),
	}
	p.cmd.Stdout = pw
	p.cmd.Stderr = pw
	setProcAttr(p.cmd)

	// Start and Wait on one locked OS thread: on Linux the child gets
	// SIGKILL when the thread that started it exits (Pdeathsig), so it must
	// be a thread that lives exactly as long as the child, and a test binary
	// killed by -timeout takes its servers with it.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := p.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.exitErr = p.cmd.Wait()
		close(p.exited)
	}()
	err = <-started
	pw.Close() // the child holds its own copy
	if err != nil {
		pr.Close()
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}

	go func() {
		defer logFile.Close()
		defer pr.Close()
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		isReady := false
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logFile, line)
			p.mu.Lock()
			p.mu.lines = append(p.mu.lines, line)
			if len(p.mu.lines) > seaweedLogLinesMax {
				p.mu.lines = p.mu.lines[len(p.mu.lines)-seaweedLogLinesMax:]
			}
			p.mu.Unlock()
			if !isReady && readyLine.MatchString(line) {
				isReady = true
				close(p.ready)
			}
		}
		_, _ = io.Copy(logFile, pr) // a line too long for the scanner
	}()
	return p, nil
}

func (p *process) tail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return "--- last output ---\n" + strings.Join(p.mu.lines, "\n")
}

// kill sends SIGKILL to the process group and waits up to timeout for the
// process to be reaped.
func (p *process) kill(timeout time.Duration) {
	_ = killGroup(p.cmd.Process)
	select {
	case <-p.exited:
	case <-time.After(timeout):
	}
}
