//go:build unix

package objstore_test

import (
	"context"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/lakegate/lakegate/objstore"
)

// A file:// store creates its objects 0640 and its directories 0750 (at
// most: the umask may take more away), whichever path wrote them — put
// (rename of a named temporary file), put-if-absent through an unnamed
// O_TMPFILE file or a named temporary file (link), an appended object — and the store's own root: the objects are the cluster's data,
// not for every local user to read.
func TestFileModes(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "store") // created by Open
	s := open(t, fileURL(root))
	named := open(t, fileURL(root))
	objstore.NamedTempOnly(named)
	if err := s.Put(ctx, "put/a/b", []byte("put")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIfAbsent(ctx, "anon/a/b", []byte("anon")); err != nil {
		t.Fatal(err)
	}
	if err := named.PutIfAbsent(ctx, "named/a/b", []byte("named")); err != nil {
		t.Fatal(err)
	}
	if err := named.Put(ctx, "named/a/c", []byte("named put")); err != nil {
		t.Fatal(err)
	}
	a, err := objstore.AppenderOf(s).Create(ctx, "appended/a/b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Append(ctx, []byte("appended")); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		limit := fs.FileMode(0o640)
		if d.IsDir() {
			limit = 0o750
		} else {
			files++
		}
		if perm := fi.Mode().Perm(); perm&^limit != 0 {
			t.Errorf("%s: mode %#o, want at most %#o", path, perm, limit)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files != 5 {
		t.Fatalf("%d files under the store, want 5", files)
	}
}
