package objstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
)

// fileBackend writes, deletes and lists objects of a file:// store directly
// on the file system; gocloud's fileblob serves the reads, which map a
// valid key (see ValidKey) to the same path as path does here.
//
// Why not fileblob for writes: its IfNotExist is "stat, then rename the temp
// file over the target", guarded by a mutex that is new for every writer, so
// two racing creators can both pass the stat and both "win", the second
// silently replacing the first. Here a create is "write temp file, fsync,
// link(2) it to the target": link fails with EEXIST if the target exists,
// atomically, also across processes. Put is the same with rename(2). On
// Linux a create writes an unnamed file instead (createAnon: O_TMPFILE,
// then linkat), the same guarantee without creating and removing a
// temporary name.
//
// Temporary files are named ".lakegate-*.tmp" next to their target (so that
// link and rename never cross a mount point); ValidKey reserves the
// ".lakegate" prefix and list skips such names. A crash can leave one
// behind; it is never visible as an object.
type fileBackend struct {
	root   string      // absolute directory of the bucket
	prefix string      // prepended to every key (Open's prefix= parameter)
	fsync  bool        // fsync data and directories before a write returns
	noAnon atomic.Bool // createAnon is not available here: use named temporary files
}

const (
	tmpPrefix = reservedPrefix + "-"
	tmpSuffix = ".tmp"
	// dirMode and fileMode (before the umask): the objects are the
	// cluster's data, readable by the node's user and group only, never
	// by every local user (fileblob itself would use 0777 and 0666).
	dirMode  = 0o750
	fileMode = 0o640
)

// fileDir returns the directory a file:// URL names, as fileblob reads it:
// host "." means a path relative to the working directory.
func fileDir(u *url.URL) string {
	p := u.Path
	if u.Host == "." || os.PathSeparator != '/' {
		p = strings.TrimPrefix(p, "/")
	}
	return filepath.FromSlash(p)
}

func newFileBackend(dir, prefix string, fsync bool) (*fileBackend, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("objstore: file store %q: %w", dir, err)
	}
	if err := os.MkdirAll(abs, dirMode); err != nil {
		return nil, fmt.Errorf("objstore: file store: %w", err)
	}
	return &fileBackend{root: abs, prefix: prefix, fsync: fsync}, nil
}

func (f *fileBackend) path(key string) string {
	return filepath.Join(f.root, filepath.FromSlash(f.prefix+key))
}

// put writes data to key: with exclusive it fails with ErrExists if key
// exists (link), otherwise it replaces key (rename).
func (f *fileBackend) put(ctx context.Context, key string, data []byte, exclusive bool) (err error) {
	op := "put"
	if exclusive {
		op = "put-if-absent"
	}
	defer func() {
		if err != nil && !errors.Is(err, ErrExists) {
			err = fmt.Errorf("objstore: %s %q: %w", op, key, err)
		}
	}()
	if err := ctx.Err(); err != nil {
		return err
	}
	path := f.path(key)
	dir := filepath.Dir(path)
	if err := f.mkdirs(dir); err != nil {
		return err
	}
	if exclusive && !f.noAnon.Load() {
		ok, err := createAnon(dir, path, data, f.fsync)
		if ok {
			if errors.Is(err, ErrExists) {
				return fmt.Errorf("objstore: %s %q: %w", op, key, ErrExists)
			}
			if err == nil && f.fsync {
				err = syncDir(dir)
			}
			return err
		}
		f.noAnon.Store(true)
	}
	tmp, err := createTemp(dir)
	if err != nil {
		return err
	}
	tmpName := tmp.Name()
	defer os.Remove(tmpName) // after a link the temp name is still there; after a rename this fails harmlessly
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if f.fsync {
		if err := tmp.Sync(); err != nil {
			_ = tmp.Close()
			return err
		}
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if exclusive {
		if err := os.Link(tmpName, path); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("objstore: %s %q: %w", op, key, ErrExists)
			}
			return err
		}
	} else if err := os.Rename(tmpName, path); err != nil {
		return err
	}
	if f.fsync {
		return syncDir(dir)
	}
	return nil
}

// remove deletes key. A directory is not an object: fileblob would remove an
// empty one and report success, so the file store deletes by itself. Empty
// directories stay behind (removing them would race with a put creating a
// file in them).
func (f *fileBackend) remove(key string) error {
	path := f.path(key)
	fi, err := os.Lstat(path)
	if err == nil && fi.IsDir() {
		err = fs.ErrNotExist
	}
	if err == nil {
		err = os.Remove(path)
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("objstore: delete %q: %w", key, ErrNotFound)
	}
	return fmt.Errorf("objstore: delete %q: %w", key, err)
}

// mkdirs is os.MkdirAll that also fsyncs the parent of every directory it
// creates, so that a durable object is reachable after a crash.
func (f *fileBackend) mkdirs(dir string) error {
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s is a file, not a directory", dir)
		}
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := f.mkdirs(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, dirMode); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if f.fsync {
		return syncDir(parent)
	}
	return nil
}

func createTemp(dir string) (*os.File, error) {
	var rnd [8]byte
	for range 100 {
		_, _ = rand.Read(rnd[:])
		name := filepath.Join(dir, tmpPrefix+hex.EncodeToString(rnd[:])+tmpSuffix)
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, fileMode)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, err
	}
	return nil, fmt.Errorf("cannot create a temporary file in %s", dir)
}

func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil // directories cannot be opened for fsync there
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// list walks the directory tree in key order. In one directory a child
// directory D sorts as "D/", because every key below it starts so; a file
// "D-1" therefore comes before "D/x" as '-' < '/'.
func (f *fileBackend) list(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	full := f.prefix + prefix
	start := ""
	if i := strings.LastIndexByte(full, '/'); i >= 0 {
		start = full[:i+1]
	}
	return f.walk(ctx, start, full, fn)
}

type dirEntry struct {
	key  string // full key (with f.prefix), with a trailing '/' for directories
	info fs.FileInfo
}

// walk lists the directory of key prefix rel (empty or ending in '/'),
// calling fn for every file whose key starts with full.
func (f *fileBackend) walk(ctx context.Context, rel, full string, fn func(ObjectInfo) error) error {
	des, err := os.ReadDir(filepath.Join(f.root, filepath.FromSlash(rel)))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil
		}
		return fmt.Errorf("objstore: list %q: %w", full, err)
	}
	entries := make([]dirEntry, 0, len(des))
	for _, de := range des {
		name := de.Name()
		// Temporary files, and sidecars of a directory once written by
		// plain fileblob (not objects: ValidKey forbids the suffix).
		if strings.HasPrefix(name, reservedPrefix) || !de.IsDir() && strings.HasSuffix(name, ".attrs") {
			continue
		}
		key := rel + name
		if de.IsDir() {
			key += "/"
		}
		// Keep a directory if it may hold keys starting with full.
		if !strings.HasPrefix(key, full) && !strings.HasPrefix(full, key) {
			continue
		}
		info, err := de.Info()
		if err != nil {
			continue // removed since ReadDir
		}
		entries = append(entries, dirEntry{key: key, info: info})
	}
	slices.SortFunc(entries, func(a, b dirEntry) int { return strings.Compare(a.key, b.key) })
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		if e.info.IsDir() {
			if err := f.walk(ctx, e.key, full, fn); err != nil {
				return err
			}
			continue
		}
		if !e.info.Mode().IsRegular() {
			continue
		}
		err := fn(ObjectInfo{
			Key:     e.key[len(f.prefix):],
			Size:    e.info.Size(),
			ModTime: e.info.ModTime().UnixMilli(),
		})
		if err != nil {
			return err
		}
	}
	return nil
}
