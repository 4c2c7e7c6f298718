package node

// TestLayers checks the import rules of docs/DESIGN.md ("Import rules") on
// the non-test Go files of the module, transitively: a rule the code
// breaks fails here, not in a review.

import (
	"go/build"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

const module = "github.com/lakegate/lakegate/"

// lakegateDeps returns the module's packages that pkg (a path inside the
// module, e.g. "engine") imports, transitively, from its non-test files.
func lakegateDeps(t *testing.T, root, pkg string) map[string]bool {
	t.Helper()
	seen := map[string]bool{}
	var walk func(p string)
	walk = func(p string) {
		bp, err := build.ImportDir(filepath.Join(root, filepath.FromSlash(p)), 0)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		for _, imp := range bp.Imports {
			if rel, ok := strings.CutPrefix(imp, module); ok && !seen[rel] {
				seen[rel] = true
				walk(rel)
			}
		}
	}
	walk(pkg)
	return seen
}

func TestLayers(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(file))
	forbidden := map[string][]string{
		// The engine stores opaque entries: no Pulsar, no tables.
		"engine":         {"lakehouse", "protocol", "tables", "node", "gateway", "actors"},
		"engine/catalog": {"lakehouse", "protocol", "tables", "node", "gateway", "actors", "engine"},
		// The ground floor.
		"objstore":        {"engine", "meta", "tables", "lakehouse"},
		"meta":            {"engine", "objstore", "tables", "lakehouse"},
		"lakehouse/delta": {"engine", "tables", "node"},
		"lakehouse":       {"engine", "tables", "node"},
		// Above the contract: lakestream only.
		"gateway":  {"engine", "tables", "node", "meta", "objstore"},
		"actors":   {"engine", "tables", "node", "meta", "objstore"},
		"nodehttp": {"engine", "tables", "node"},
		// The contract implements nothing.
		"lakestream": {"engine", "tables", "node", "gateway", "actors", "protocol", "lakehouse"},
		// The cluster's Iceberg catalog and its REST API sit on the ground
		// floor and iceberg-go only.
		"lakehouse/iceberg/metacat": {"engine", "tables", "node", "gateway", "actors", "objstore"},
		"icebergrest":               {"engine", "tables", "node", "gateway", "actors", "objstore"},
		// The table layer does not wire nodes, and meets the broker only
		// through the contract (the materialization job, the trim floor).
		"tables": {"node", "gateway", "actors"},
		// The storage node (and lakegate:// URIs) stays below the front
		// doors: node/assembly wires them, above it.
		"node": {"gateway", "nodehttp", "node/assembly"},
	}
	for pkg, bad := range forbidden {
		deps := lakegateDeps(t, root, pkg)
		for _, b := range bad {
			for d := range deps {
				if d == b || strings.HasPrefix(d, b+"/") {
					t.Errorf("%s imports %s (transitively): docs/DESIGN.md forbids it", pkg, d)
				}
			}
		}
	}
	// Leaves: shared by layers that must not import each other, so they
	// import nothing of lakegate.
	for _, pkg := range []string{"murmur3"} {
		for d := range lakegateDeps(t, root, pkg) {
			t.Errorf("%s imports %s: docs/DESIGN.md makes it a leaf", pkg, d)
		}
	}
}
