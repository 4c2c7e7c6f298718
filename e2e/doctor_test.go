package e2e

// lakegate admin doctor against the configuration a user deploys: two
// `lakegate serve` processes on a three-member etcd cluster and a shared
// object store, the CLI asking every member.
//
//	go test -run TestDoctor ./e2e/

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/lakegate/lakegate/doctor"
	"github.com/lakegate/lakegate/internal/testservers"
)

// runDoctor runs `lakegate admin doctor --cluster` (plus args) against
// url and returns its output and exit code.
func runDoctor(t *testing.T, bin, url string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"admin", "doctor", "--cluster", "--url", url}, args...)...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	}
	t.Fatalf("lakegate admin doctor: %v: %s", err, out)
	return "", -1
}

func wantLines(t *testing.T, out string, res ...string) {
	t.Helper()
	for _, re := range res {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Fatalf("doctor output lacks %q:\n%s", re, out)
		}
	}
}

// TestDoctor: a sound cluster is all ok on both nodes; an etcd member
// down is a warning naming it (exit 0); an object store that refuses
// writes is a failure (exit 1) on every node, in the table and the JSON.
func TestDoctor(t *testing.T) {
	etcd := testservers.StartEtcdCluster(t, 3)
	objects := filepath.Join(t.TempDir(), "objects")
	c := startLGClusterOn(t, etcd, 2, "file://"+filepath.ToSlash(objects))
	url := c.nodes[0].httpURL

	out, code := runDoctor(t, c.bin, url)
	if code != 0 {
		t.Fatalf("healthy cluster: exit %d:\n%s", code, out)
	}
	wantLines(t, out, `(?m)^node node0: ok$`, `(?m)^node node1: ok$`, `etcd members\s+ok\s+3 of 3 answer`,
		`lakegate members\s+ok\s+2: node0, node1`, `object store\s+ok\s+file://`, `2 node\(s\): 0 failure\(s\), 0 warning\(s\)`)

	down := (etcd.Leader() + 1) % 3
	etcd.Stop(down)
	out, code = runDoctor(t, c.bin, url)
	if code != 0 {
		t.Fatalf("one etcd member down: exit %d (a warning, not a failure):\n%s", code, out)
	}
	wantLines(t, out, `etcd members\s+warn\s+2 of 3 answer; down: `+etcd.Members[down].Name, `→ the cluster has quorum but one more loss stops it`)
	etcd.Start(down)
	etcd.WaitHealthy()

	// The store's directory becomes a file: every write fails.
	if err := os.Rename(objects, objects+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(objects, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code = runDoctor(t, c.bin, url)
	if code != 1 {
		t.Fatalf("store refusing writes: exit %d, want 1:\n%s", code, out)
	}
	wantLines(t, out, `(?m)^node node0: fail$`, `(?m)^node node1: fail$`, `object store\s+fail\s+file://.*writing the probe object`,
		`lakegate: doctor: checks failed: 2 of them, on 2 node\(s\)`)
	js, code := runDoctor(t, c.bin, url, "--json")
	var reports []doctor.Report
	if err := json.Unmarshal([]byte(js[:regexp.MustCompile(`(?m)^lakegate: `).FindStringIndex(js)[0]]), &reports); err != nil || code != 1 {
		t.Fatalf("--json: exit %d, %v:\n%s", code, err, js)
	}
	if len(reports) != 2 || reports[0].Status != doctor.Fail || reports[1].Status != doctor.Fail {
		t.Fatalf("--json reports: %+v", reports)
	}
}
