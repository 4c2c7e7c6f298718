package objstore_test

// The acceptance suite (objstoretest) on every backend that runs here:
//
//	go test ./objstore/                      mem, file, S3 (SeaweedFS), GCS (fake), Azure (Azurite)
//	LAKEGATE_SKIP_S3=1 go test ./objstore/   without S3 when weed is not built
//	LAKEGATE_SKIP_AZURE=1 go test ./objstore/  without Azure when Azurite is not installed
//	go test -run 'TestS3' -v ./objstore/     S3 only, with weed's startup time
//	go test -run 'TestAzure' -v ./objstore/  Azure only
//
// S3 needs .cache/bin/weed and Azure needs tools/azurite/node_modules and
// node (make tools); see internal/testservers.

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lakegate/lakegate/internal/testservers"
	"github.com/lakegate/lakegate/objstore"
	"github.com/lakegate/lakegate/objstore/objstoretest"
)

func open(t testing.TB, u string) objstore.Store {
	t.Helper()
	s, err := objstore.Open(context.Background(), u)
	if err != nil {
		t.Fatalf("Open(%q): %v", u, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func fileURL(dir string) string { return "file://" + filepath.ToSlash(dir) }

func TestMem(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Store { return open(t, "mem://") })
}

func TestFile(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Store { return open(t, fileURL(t.TempDir())) })
}

// The same suite where creates go through named temporary files (the path
// without O_TMPFILE).
func TestFileNamedTemp(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Store {
		s := open(t, fileURL(t.TempDir()))
		objstore.NamedTempOnly(s)
		return s
	})
}

func TestFileNoFsyncPrefix(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Store {
		return open(t, fileURL(t.TempDir())+"?fsync=false&prefix=tenant/a/")
	})
}

// prefixed returns a constructor of stores on one bucket, each under its
// own key prefix, so that one server serves every subtest.
func prefixed(bucketURL string) func(t *testing.T) objstore.Store {
	var n atomic.Int64
	return func(t *testing.T) objstore.Store {
		return open(t, fmt.Sprintf("%s&prefix=t%d/", bucketURL, n.Add(1)))
	}
}

func TestS3(t *testing.T) {
	t.Parallel() // overlap the S3 tests' server startups
	srv := testservers.StartSeaweed(t)
	objstoretest.Run(t, prefixed(srv.URL))
}

func TestGCS(t *testing.T) {
	srv := testservers.StartGCS(t)
	objstoretest.Run(t, prefixed(srv.URL))
}

func TestAzure(t *testing.T) {
	srv := testservers.StartAzurite(t)
	objstoretest.Run(t, prefixed(srv.URL))
}

func TestAzurePutIfAbsentRacingClients(t *testing.T) {
	srv := testservers.StartAzurite(t)
	var stores []objstore.Store
	for range 4 {
		stores = append(stores, open(t, srv.URL)) // 4 HTTP clients
	}
	objstoretest.RacePutIfAbsent(t, stores, 4, 8)
}

// A refused conditional create on Azure is ErrExists, not a panic: gocloud
// v0.47.0's azureblob writer panics in Close (nil pipe reader) when the
// service answers 409 to a conditional upload that went through
// Write+Close, so PutIfAbsent must use Bucket.Upload. Covers the sizes that
// take each of the SDK's upload paths: empty, one Put Blob, and staged
// blocks committed with Put Block List (above its 8 MiB block size).
func TestAzurePutIfAbsentRefused(t *testing.T) {
	srv := testservers.StartAzurite(t)
	s := open(t, srv.URL+"&prefix=refused/")
	ctx := t.Context()
	for _, size := range []int{0, 1, 64 << 10, 9 << 20} {
		key := fmt.Sprintf("k%d", size)
		first := make([]byte, size)
		for i := range first {
			first[i] = byte(i % 251)
		}
		if err := s.PutIfAbsent(ctx, key, first); err != nil {
			t.Fatalf("first PutIfAbsent(%s): %v", key, err)
		}
		for _, second := range [][]byte{nil, []byte("second"), make([]byte, size)} {
			err := putIfAbsentNoPanic(t, s, key, second)
			if !errors.Is(err, objstore.ErrExists) {
				t.Fatalf("PutIfAbsent(%s, %d bytes) over an existing object: %v, want ErrExists", key, len(second), err)
			}
		}
		got, err := s.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, first) {
			t.Fatalf("Get(%s) after refused creates: %d bytes, not the first object", key, len(got))
		}
	}
}

// putIfAbsentNoPanic turns a panic in PutIfAbsent into a test failure that
// names it, instead of a crashed test binary.
func putIfAbsentNoPanic(t *testing.T, s objstore.Store, key string, data []byte) (err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("PutIfAbsent(%s, %d bytes) panicked: %v", key, len(data), r)
		}
	}()
	return s.PutIfAbsent(t.Context(), key, data)
}

// Writers on separate Store instances, as separate processes would be.
func TestFilePutIfAbsentRacingStores(t *testing.T) {
	dir := t.TempDir()
	var stores []objstore.Store
	for i := range 4 {
		s := open(t, fileURL(dir))
		if i%2 == 1 {
			objstore.NamedTempOnly(s) // both create paths race each other
		}
		stores = append(stores, s)
	}
	objstoretest.RacePutIfAbsent(t, stores, 8, 32)
	assertNoTempFiles(t, dir)
}

func TestS3PutIfAbsentRacingClients(t *testing.T) {
	t.Parallel()
	srv := testservers.StartSeaweed(t)
	var stores []objstore.Store
	for range 4 {
		stores = append(stores, open(t, srv.URL)) // 4 HTTP clients
	}
	// SeaweedFS serializes conditional writes of one key with a lock whose
	// client sleeps 1 s when it is contended: keep the rounds few.
	objstoretest.RacePutIfAbsent(t, stores, 3, 4)
}

func TestGCSPutIfAbsentRacingClients(t *testing.T) {
	srv := testservers.StartGCS(t)
	var stores []objstore.Store
	for range 4 {
		stores = append(stores, open(t, srv.URL))
	}
	objstoretest.RacePutIfAbsent(t, stores, 4, 8)
}

func assertNoTempFiles(t *testing.T, dir string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), ".lakegate") {
			t.Errorf("temporary file left behind: %s", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The file store keeps objects as plain files at DIR/PREFIX/KEY (readable
// by Spark and friends), with no sidecar files, and hides stray temporary
// files of a crashed writer.
func TestFileLayout(t *testing.T) {
	dir := t.TempDir()
	s := open(t, fileURL(dir)+"?prefix=p/")
	ctx := t.Context()
	if err := s.PutIfAbsent(ctx, "a/b.parquet", []byte("created")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "a/c", []byte("put")); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "p", "a", "b.parquet"))
	if err != nil || string(got) != "created" {
		t.Fatalf("file content %q, %v", got, err)
	}
	assertNoTempFiles(t, dir)
	entries, _ := os.ReadDir(filepath.Join(dir, "p", "a"))
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"b.parquet", "c"}) {
		t.Fatalf("files in p/a: %q, want only the objects", names)
	}

	stray := filepath.Join(dir, "p", "a", ".lakegate-0123456789abcdef.tmp")
	if err := os.WriteFile(stray, []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}
	var keys []string
	if err := s.List(ctx, "", func(o objstore.ObjectInfo) error { keys = append(keys, o.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys, []string{"a/b.parquet", "a/c"}) {
		t.Fatalf("List = %q, want the two objects only", keys)
	}
}

// Relative file URLs (file://./dir) resolve against the working directory.
func TestFileRelative(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	s := open(t, "file://./data/sub")
	if err := s.PutIfAbsent(t.Context(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "sub", "k")); err != nil {
		t.Fatal(err)
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := t.Context()
	for _, u := range []string{
		"mem://?prefix=/abs",
		"mem://?prefix=../up/",
		"mem://?fsync=false",
		"file:///tmp/x?fsync=maybe",
		"%zz",
	} {
		if _, err := objstore.Open(ctx, u); !errors.Is(err, objstore.ErrInvalid) {
			t.Errorf("Open(%q) error = %v, want ErrInvalid", u, err)
		}
	}
	if _, err := objstore.Open(ctx, "nosuch://bucket"); err == nil {
		t.Error("Open(nosuch://) succeeded")
	}
}

func TestClosed(t *testing.T) {
	for _, u := range []string{"mem://", fileURL(t.TempDir())} {
		s, err := objstore.Open(t.Context(), u)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		ctx := t.Context()
		checks := map[string]error{
			"PutIfAbsent": s.PutIfAbsent(ctx, "k", nil),
			"Put":         s.Put(ctx, "k", nil),
			"Delete":      s.Delete(ctx, "k"),
			"List":        s.List(ctx, "", func(objstore.ObjectInfo) error { return nil }),
			"Close":       s.Close(),
		}
		_, checks["Get"] = s.Get(ctx, "k")
		_, checks["GetRange"] = s.GetRange(ctx, "k", 0, 1)
		for name, err := range checks {
			if !errors.Is(err, objstore.ErrClosed) {
				t.Errorf("%s: %s after Close: %v, want ErrClosed", u, name, err)
			}
		}
	}
}

// The wrappers pass the acceptance suite when they inject nothing.
func TestWrappersPassThrough(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Store {
		return objstore.Instrument(objstore.NewFaulty(open(t, "mem://"), 1))
	})
}

func TestValidKey(t *testing.T) {
	good := []string{"a", "a/b", "wal/0000000001.wal", "tables/orders/_delta_log/00000000000000000000.json", "é/ü", "a.b-c_d=e+f@g"}
	bad := []string{"", "/a", "a/", "a//b", ".", "..", "a/../b", "./a", "a\x00b", "a\\b", "a:b", "x.attrs", "a__0x41__", ".lakegate", ".lakegate-x/y", "a/.lakegate-x.tmp", strings.Repeat("k", objstore.KeyBytesMax+1), "\xff"}
	for _, k := range good {
		if err := objstore.ValidKey(k); err != nil {
			t.Errorf("ValidKey(%q) = %v, want nil", k, err)
		}
	}
	for _, k := range bad {
		if err := objstore.ValidKey(k); !errors.Is(err, objstore.ErrInvalid) {
			t.Errorf("ValidKey(%q) = %v, want ErrInvalid", k, err)
		}
	}
}

// The S3 URL the test server hands out is the documented form.
func TestS3URLForm(t *testing.T) {
	srv := &testservers.Seaweed{Endpoint: "http://127.0.0.1:1234"}
	u, err := url.Parse(srv.BucketURL("b"))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	if u.Scheme != "s3" || u.Host != "b" || q.Get("endpoint") != "http://127.0.0.1:1234" ||
		q.Get("use_path_style") != "true" || q.Get("region") != "us-east-1" || q.Get("anonymous") != "true" {
		t.Fatalf("BucketURL = %s", u)
	}
}
