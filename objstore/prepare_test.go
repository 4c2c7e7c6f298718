package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/lakegate/lakegate/objstore"
)

// prepared opens a file store in dir and returns it with its Preparer.
func prepared(t *testing.T, dir string) (objstore.Store, objstore.Preparer) {
	t.Helper()
	s := open(t, fileURL(dir))
	p := objstore.PreparerOf(s)
	if p == nil {
		t.Fatal("PreparerOf(file store) = nil")
	}
	return s, p
}

func TestPreparerOf(t *testing.T) {
	if p := objstore.PreparerOf(open(t, "mem://")); p != nil {
		t.Errorf("PreparerOf(mem) = %T, want nil", p)
	}
	f := open(t, fileURL(t.TempDir()))
	wrapped := objstore.NewFaulty(objstore.Instrument(f), 1)
	if objstore.PreparerOf(wrapped) == nil {
		t.Error("PreparerOf(Faulty(Instrument(file))) = nil")
	}
}

// Prepared keys are objects at once (empty), filled by this store value's
// PutIfAbsent exactly once, and refused to any other store value.
func TestFilePrepareFill(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, p := prepared(t, dir)
	other := open(t, fileURL(dir))
	keys := []string{"wal/n/a", "wal/n/b", "wal/m/c"}
	if err := p.Prepare(ctx, keys); err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	for _, k := range keys {
		if got, err := other.Get(ctx, k); err != nil || len(got) != 0 {
			t.Fatalf("Get(%s) after Prepare = %d bytes, %v; want an empty object", k, len(got), err)
		}
	}
	for i, d := range [][]byte{[]byte("short"), bytes.Repeat([]byte("x"), 100000)} {
		if err := s.PutIfAbsent(ctx, keys[i], d); err != nil {
			t.Fatalf("fill %s: %v", keys[i], err)
		}
		if got, err := other.Get(ctx, keys[i]); err != nil || !bytes.Equal(got, d) {
			t.Fatalf("Get(%s) after fill = %d bytes, %v; want %d", keys[i], len(got), err, len(d))
		}
		if err := s.PutIfAbsent(ctx, keys[i], d); !errors.Is(err, objstore.ErrExists) {
			t.Fatalf("second PutIfAbsent(%s) = %v, want ErrExists", keys[i], err)
		}
	}
	// Another store value (another process) cannot take a prepared key.
	if err := other.PutIfAbsent(ctx, keys[2], []byte("theirs")); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("PutIfAbsent of a key prepared elsewhere = %v, want ErrExists", err)
	}
	// Deleted by the other one: the fill becomes a create.
	if err := other.Delete(ctx, keys[2]); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIfAbsent(ctx, keys[2], []byte("mine")); err != nil {
		t.Fatalf("fill of a deleted prepared key: %v", err)
	}
	if got, err := other.Get(ctx, keys[2]); err != nil || string(got) != "mine" {
		t.Fatalf("Get(%s) = %q, %v", keys[2], got, err)
	}
	if st := p.PrepareStats(); st != (objstore.PrepareStats{Filled: 2, Gone: 1}) {
		t.Fatalf("PrepareStats = %+v, want 2 filled and 1 gone", st)
	}
}

// Prepare of an existing key is ErrExists and leaves nothing of the call
// behind; Delete ends a preparation.
func TestFilePrepareExistsAndDelete(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, p := prepared(t, dir)
	if err := s.PutIfAbsent(ctx, "k/old", []byte("old")); err != nil {
		t.Fatal(err)
	}
	err := p.Prepare(ctx, []string{"k/new", "k/old"})
	if !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("Prepare over an existing key = %v, want ErrExists", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "k", "new")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("k/new after the failed Prepare: %v, want removed", err)
	}
	if got, err := s.Get(ctx, "k/old"); err != nil || string(got) != "old" {
		t.Fatalf("k/old = %q, %v; want untouched", got, err)
	}
	if err := p.Prepare(ctx, []string{"k/gone"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "k/gone"); err != nil {
		t.Fatal(err)
	}
	// Not prepared any more: an ordinary create.
	if err := s.PutIfAbsent(ctx, "k/gone", []byte("new")); err != nil {
		t.Fatal(err)
	}
	if err := p.Prepare(ctx, []string{"bad//key"}); !errors.Is(err, objstore.ErrInvalid) {
		t.Fatalf("Prepare(bad key) = %v, want ErrInvalid", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Prepare(ctx, []string{"k/late"}); !errors.Is(err, objstore.ErrClosed) {
		t.Fatalf("Prepare after Close = %v, want ErrClosed", err)
	}
}
