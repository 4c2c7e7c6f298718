package node

// TestLayers checks the import rules of docs/DESIGN.md ("Import rules") on
// the non-test Go files of the module, transitively: a rule the code
// breaks fails here, not in a review.

import (
	"go/build"
	"io/fs"
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
		// Above the contract: lakestream only. The front doors (gateway:
		// the binary protocol; admin: the admin REST) call the broker
		// layer; the broker never calls a front door, and neither front
		// door calls the other (the admin REST reaches the topics the
		// gateway serves through its own port, admin.Node).
		"gateway":  {"engine", "tables", "node", "meta", "objstore", "admin", "nodehttp", "kafka"},
		"kafka":    {"engine", "tables", "node", "meta", "objstore", "admin", "nodehttp", "gateway"},
		"admin":    {"engine", "tables", "node", "meta", "objstore", "gateway", "nodehttp"},
		"broker":   {"engine", "tables", "node", "meta", "objstore", "gateway", "admin", "nodehttp"},
		"actors":   {"engine", "tables", "node", "meta", "objstore", "broker", "admin", "gateway"},
		"nodehttp": {"engine", "tables", "node", "gateway"},
		// The contract implements nothing.
		"lakestream": {"engine", "tables", "node", "gateway", "actors", "protocol", "lakehouse", "broker", "admin"},
		// The cluster's Iceberg catalog and its REST API sit on the ground
		// floor and iceberg-go only.
		"lakehouse/iceberg/metacat": {"engine", "tables", "node", "gateway", "actors", "objstore"},
		"icebergrest":               {"engine", "tables", "node", "gateway", "actors", "objstore"},
		// The table layer does not wire nodes, and meets the broker only
		// through the contract (the materialization job, the trim floor).
		"tables": {"node", "gateway", "actors", "broker", "admin"},
		// The transaction coordinator: its identity and interface import
		// nothing of lakegate (the front doors hold it); its
		// implementation reaches the metadata store, no front door.
		"txn":    {"engine", "tables", "node", "meta", "objstore", "gateway", "admin", "broker", "kafka", "actors", "nodehttp", "lakehouse"},
		"txn/tc": {"engine", "tables", "node", "objstore", "gateway", "admin", "broker", "kafka", "actors", "nodehttp", "lakehouse"},
		// The storage node (and lakegate:// URIs) stays below the front
		// doors: node/assembly wires them, above it.
		"node": {"gateway", "nodehttp", "node/assembly", "broker", "admin"},
	}
	// Only the front doors (the admin REST and the gateway) import the
	// broker layer, and nothing below them imports a front door: every
	// package of the storage side and the contract is checked.
	for _, pkg := range []string{"engine", "engine/catalog", "objstore", "meta", "lakehouse", "lakehouse/delta",
		"lakehouse/iceberg/metacat", "icebergrest", "lakestream", "protocol", "auth"} {
		forbidden[pkg] = append(forbidden[pkg], "broker", "admin", "gateway")
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

// TestOnlyFrontDoorsImportBroker checks the broker layer's callers: of
// the module's packages, only the front doors (gateway, admin) and the
// process assembly that builds a node (cmd/…, node/assembly, internal/testnode)
// import broker directly, from their non-test files (docs/DESIGN.md,
// "Import rules").
func TestOnlyFrontDoorsImportBroker(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(file))
	allowed := func(pkg string) bool {
		switch {
		case pkg == "broker" || strings.HasPrefix(pkg, "broker/"),
			pkg == "gateway", pkg == "admin", pkg == "kafka",
			pkg == "node/assembly", pkg == "internal/testnode",
			strings.HasPrefix(pkg, "cmd/"):
			return true
		}
		return false
	}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
			return filepath.SkipDir
		}
		bp, err := build.ImportDir(path, 0)
		if err != nil {
			return nil // no non-test Go files here
		}
		rel, _ := filepath.Rel(root, path)
		pkg := filepath.ToSlash(rel)
		for _, imp := range bp.Imports {
			if imp == module+"broker" && !allowed(pkg) {
				t.Errorf("%s imports broker: only the front doors (gateway, admin) and the node assembly may (docs/DESIGN.md)", pkg)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
