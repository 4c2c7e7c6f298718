//go:build unix

package iceberg

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lakegate/lakegate/internal/testservers"
	"github.com/lakegate/lakegate/objstore"
)

// TestCommitS3 commits files PUT through lakegate's object store into a
// SeaweedFS bucket (s3:// with endpoint and path-style URL parameters) and
// scans them back through the S3 FileIO. Skipped when the weed binary is
// missing and LAKEGATE_SKIP_S3=1.
func TestCommitS3(t *testing.T) {
	sw := testservers.StartSeaweed(t)
	storeURL := sw.URL + "&prefix=lg/"
	ctx := ctxT(t)
	store, err := objstore.Open(ctx, storeURL)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()

	// The files are written locally, then PUT to the bucket under the
	// table root.
	local := newEnv(t)
	day := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC).UnixMilli()
	want := map[[2]int64][]byte{}
	var files []string
	for i, part := range []int32{1, 2} {
		rel, ps := writeFile(t, local, part, int64(i*10), 10, day)
		for j, p := range ps {
			want[[2]int64{int64(part), int64(i*10 + j)}] = p
		}
		b, err := os.ReadFile(local.dir + "/" + root + "/" + rel)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.PutIfAbsent(ctx, root+"/"+rel, b); err != nil {
			t.Fatal(err)
		}
		files = append(files, rel)
	}
	c, err := Open(ctx, CatalogConfig{URI: local.db, StoreURL: storeURL})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i, f := range files {
		ok, err := c.Commit(ctx, CommitRequest{Ident: ident, Root: root, LogID: int64(i + 1), End: 10 * int64(i+1), Files: []string{f}})
		if err != nil || !ok {
			t.Fatalf("commit %s: %v, %v", f, ok, err)
		}
	}
	if loc := c.Location(root); !strings.HasPrefix(loc, "s3://"+sw.Bucket+"/lg/") {
		t.Fatalf("location %s", loc)
	}
	checkScan(t, c, want)
	// The metadata sits in the bucket beside data/.
	n := 0
	if err := store.List(ctx, root+"/metadata/", func(objstore.ObjectInfo) error { n++; return nil }); err != nil || n == 0 {
		t.Fatalf("%d metadata objects, %v", n, err)
	}
}
