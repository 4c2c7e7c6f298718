// Package gotestexit is the fixture of e2e/interop/gotest_selftest.sh: a test
// that passes inside a test binary that can be made to fail after it (as a
// race report at exit does), and a test that can be made to fail.
package gotestexit

import (
	"os"
	"testing"
)

// TestMain fails the binary after every test passed when
// GOTESTEXIT_FAIL_AFTER=1.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 && os.Getenv("GOTESTEXIT_FAIL_AFTER") == "1" {
		os.Stderr.WriteString("gotestexit: failing after the tests passed\n")
		code = 1
	}
	os.Exit(code)
}

func TestPasses(t *testing.T) {}

func TestFailsOnRequest(t *testing.T) {
	if os.Getenv("GOTESTEXIT_FAIL_TEST") == "1" {
		t.Fatal("failing on request")
	}
}
