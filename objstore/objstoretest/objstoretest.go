package objstoretest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/lakegate/lakegate/objstore"
)

// Racing PutIfAbsent: this many writers create each of RacingKeys keys.
const (
	RacingWriters = 16
	RacingKeys    = 8
)

// LargeObjectBytes is the size of the large-object test: above S3's 5 MiB
// part size, so an S3 backend must not split a conditional create.
const LargeObjectBytes = 6<<20 + 123

// Run runs the acceptance suite against stores made by newStore.
func Run(t *testing.T, newStore func(t *testing.T) objstore.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s objstore.Store)
	}{
		{"PutGet", testPutGet},
		{"PutReplaces", testPutReplaces},
		{"SlicesAreNotShared", testSlicesAreNotShared},
		{"GetRange", testGetRange},
		{"NotFound", testNotFound},
		{"Delete", testDelete},
		{"List", testList},
		{"ListStops", testListStops},
		{"PutIfAbsent", testPutIfAbsent},
		{"PutIfAbsentRacing", testPutIfAbsentRacing},
		{"PutRacing", testPutRacing},
		{"LargeObject", testLargeObject},
		{"InvalidKeys", testInvalidKeys},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

func mustPut(t *testing.T, s objstore.Store, key string, data []byte) {
	t.Helper()
	if err := s.Put(t.Context(), key, data); err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
}

func mustGet(t *testing.T, s objstore.Store, key string, want []byte) {
	t.Helper()
	got, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Get(%q) = %d bytes %.32q…, want %d bytes %.32q…", key, len(got), got, len(want), want)
	}
}

func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func testPutGet(t *testing.T, s objstore.Store) {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	mustPut(t, s, "bin", all)
	mustGet(t, s, "bin", all)

	mustPut(t, s, "empty", nil)
	got, err := s.Get(t.Context(), "empty")
	if err != nil || len(got) != 0 {
		t.Fatalf("Get(empty) = %q, %v; want empty, nil", got, err)
	}

	mustPut(t, s, "deep/er/key.wal", []byte("deep"))
	mustGet(t, s, "deep/er/key.wal", []byte("deep"))
}

func testPutReplaces(t *testing.T, s objstore.Store) {
	mustPut(t, s, "k", []byte("first version, longer"))
	mustPut(t, s, "k", []byte("second"))
	mustGet(t, s, "k", []byte("second"))
}

func testSlicesAreNotShared(t *testing.T, s objstore.Store) {
	data := []byte("original")
	mustPut(t, s, "put", data)
	if err := s.PutIfAbsent(t.Context(), "create", data); err != nil {
		t.Fatal(err)
	}
	copy(data, "CHANGED!")
	mustGet(t, s, "put", []byte("original"))
	mustGet(t, s, "create", []byte("original"))

	got, err := s.Get(t.Context(), "put")
	if err != nil {
		t.Fatal(err)
	}
	copy(got, "CHANGED!")
	mustGet(t, s, "put", []byte("original"))
}

func testGetRange(t *testing.T, s objstore.Store) {
	data := randomBytes(1, 100)
	mustPut(t, s, "r", data)
	cases := []struct {
		off, n int64
		want   []byte
	}{
		{0, 10, data[:10]},
		{10, 20, data[10:30]},
		{90, 10, data[90:]},
		{95, 10, data[95:]}, // past the end: what exists
		{99, 1, data[99:]},
		{100, 10, nil}, // at the end
		{150, 10, nil}, // beyond the end
		{10, -1, data[10:]},
		{0, -1, data},
		{5, 0, nil},
	}
	for _, c := range cases {
		got, err := s.GetRange(t.Context(), "r", c.off, c.n)
		if err != nil {
			t.Errorf("GetRange(%d, %d): %v", c.off, c.n, err)
			continue
		}
		if !bytes.Equal(got, c.want) {
			t.Errorf("GetRange(%d, %d) = %d bytes, want %d bytes", c.off, c.n, len(got), len(c.want))
		}
	}
	if _, err := s.GetRange(t.Context(), "r", -1, 10); !errors.Is(err, objstore.ErrInvalid) {
		t.Errorf("GetRange(-1, 10) error = %v, want ErrInvalid", err)
	}

	mustPut(t, s, "empty", nil)
	got, err := s.GetRange(t.Context(), "empty", 0, 10)
	if err != nil || len(got) != 0 {
		t.Errorf("GetRange(empty, 0, 10) = %q, %v; want empty, nil", got, err)
	}
}

func testNotFound(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	mustPut(t, s, "dir/present", []byte("x"))
	for _, key := range []string{"missing", "dir/missing", "dir"} {
		if _, err := s.Get(ctx, key); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("Get(%q) error = %v, want ErrNotFound", key, err)
		}
		if _, err := s.GetRange(ctx, key, 0, 10); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("GetRange(%q, 0, 10) error = %v, want ErrNotFound", key, err)
		}
		if _, err := s.GetRange(ctx, key, 10, 0); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("GetRange(%q, 10, 0) error = %v, want ErrNotFound", key, err)
		}
		if _, err := s.GetRange(ctx, key, 5, -1); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("GetRange(%q, 5, -1) error = %v, want ErrNotFound", key, err)
		}
		if err := s.Delete(ctx, key); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("Delete(%q) error = %v, want ErrNotFound", key, err)
		}
	}
}

func testDelete(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	mustPut(t, s, "a/1", []byte("one"))
	mustPut(t, s, "a/2", []byte("two"))
	if err := s.Delete(ctx, "a/1"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := s.Get(ctx, "a/1"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Get after Delete: %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, "a/1"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("second Delete: %v, want ErrNotFound", err)
	}
	mustGet(t, s, "a/2", []byte("two"))
	if keys := listKeys(t, s, ""); !slices.Equal(keys, []string{"a/2"}) {
		t.Fatalf("List after Delete = %q, want [a/2]", keys)
	}
}

func listKeys(t *testing.T, s objstore.Store, prefix string) []string {
	t.Helper()
	var keys []string
	err := s.List(t.Context(), prefix, func(o objstore.ObjectInfo) error {
		keys = append(keys, o.Key)
		return nil
	})
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return keys
}

func testList(t *testing.T, s objstore.Store) {
	// '-' (0x2d) sorts before '/' (0x2f): "a-c" < "a/b", which a directory
	// walk gets wrong.
	keys := []string{"a/b", "a-c", "a/c/d", "a/c-e", "ab", "b", "a/b0", "0", "wal/000001", "wal/000002", "wal/000010", "x.attrs/y"}
	order := rand.New(rand.NewPCG(7, 7)).Perm(len(keys))
	sizes := map[string]int64{}
	for i, j := range order {
		k := keys[j]
		mustPut(t, s, k, make([]byte, i))
		sizes[k] = int64(i)
	}
	sorted := slices.Sorted(slices.Values(keys))

	filter := func(prefix string) []string {
		var out []string
		for _, k := range sorted {
			if len(k) >= len(prefix) && k[:len(prefix)] == prefix {
				out = append(out, k)
			}
		}
		return out
	}
	for _, prefix := range []string{"", "a", "a/", "a/c", "a/c/", "a-", "wal/", "wal/00000", "b", "zzz", "a/b/"} {
		got := listKeys(t, s, prefix)
		if want := filter(prefix); !slices.Equal(got, want) {
			t.Errorf("List(%q) = %q, want %q", prefix, got, want)
		}
	}

	err := s.List(t.Context(), "", func(o objstore.ObjectInfo) error {
		if o.Size != sizes[o.Key] {
			t.Errorf("List: %q size %d, want %d", o.Key, o.Size, sizes[o.Key])
		}
		if o.ModTime < 0 {
			t.Errorf("List: %q ModTime %d", o.Key, o.ModTime)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func testListStops(t *testing.T, s objstore.Store) {
	for i := range 5 {
		mustPut(t, s, fmt.Sprintf("k%d", i), []byte("x"))
	}
	stop := errors.New("stop here")
	var seen []string
	err := s.List(t.Context(), "", func(o objstore.ObjectInfo) error {
		seen = append(seen, o.Key)
		if len(seen) == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Fatalf("List error = %v, want fn's error", err)
	}
	if !slices.Equal(seen, []string{"k0", "k1"}) {
		t.Fatalf("List saw %q after stopping, want [k0 k1]", seen)
	}
}

func testPutIfAbsent(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	if err := s.PutIfAbsent(ctx, "once", []byte("first")); err != nil {
		t.Fatalf("first PutIfAbsent: %v", err)
	}
	if err := s.PutIfAbsent(ctx, "once", []byte("second")); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("second PutIfAbsent error = %v, want ErrExists", err)
	}
	mustGet(t, s, "once", []byte("first"))

	mustPut(t, s, "put-first", []byte("put"))
	if err := s.PutIfAbsent(ctx, "put-first", []byte("create")); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("PutIfAbsent over Put error = %v, want ErrExists", err)
	}
	mustGet(t, s, "put-first", []byte("put"))

	if err := s.Delete(ctx, "once"); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIfAbsent(ctx, "once", []byte("again")); err != nil {
		t.Fatalf("PutIfAbsent after Delete: %v", err)
	}
	mustGet(t, s, "once", []byte("again"))

	if err := s.PutIfAbsent(ctx, "empty", nil); err != nil {
		t.Fatalf("PutIfAbsent(empty): %v", err)
	}
	if err := s.PutIfAbsent(ctx, "empty", nil); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("PutIfAbsent(empty) twice error = %v, want ErrExists", err)
	}
}

// testPutIfAbsentRacing: RacingWriters goroutines on one store.
func testPutIfAbsentRacing(t *testing.T, s objstore.Store) {
	RacePutIfAbsent(t, []objstore.Store{s}, RacingWriters, RacingKeys)
}

// RacePutIfAbsent starts writersPerStore goroutines on each of stores (which
// must share one bucket, e.g. opened separately to stand for separate
// processes), all released at once, each creating the same keys
// "race/0".."race/<keys-1>" with its own content. For every key exactly one
// writer must win, every other must get ErrExists, and the stored object
// must be the winner's content, whole.
func RacePutIfAbsent(t *testing.T, stores []objstore.Store, writersPerStore, keys int) {
	t.Helper()
	ctx := t.Context()
	writers := len(stores) * writersPerStore
	content := func(w, k int) []byte {
		// Different lengths too, so a mix of two writers would show.
		return fmt.Appendf(nil, "writer %03d key %d %s", w, k, bytes.Repeat([]byte{'a' + byte(w%26)}, 100*(w%20)))
	}
	var (
		start   = make(chan struct{})
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners = make([][]int, keys)
		errs    []error
	)
	for w := range writers {
		s := stores[w%len(stores)]
		wg.Go(func() {
			<-start
			for k := range keys {
				err := s.PutIfAbsent(ctx, fmt.Sprintf("race/%d", k), content(w, k))
				mu.Lock()
				switch {
				case err == nil:
					winners[k] = append(winners[k], w)
				case !errors.Is(err, objstore.ErrExists):
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		t.Errorf("PutIfAbsent: unexpected error: %v", err)
	}
	for k, ws := range winners {
		if len(ws) != 1 {
			t.Errorf("key race/%d: %d winners %v, want exactly 1", k, len(ws), ws)
			continue
		}
		mustGet(t, stores[0], fmt.Sprintf("race/%d", k), content(ws[0], k))
	}
}

// testPutRacing checks that racing Puts of one key leave one writer's
// object whole, never a mix.
func testPutRacing(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	const writers = 8
	content := func(w int) []byte { return bytes.Repeat([]byte{'A' + byte(w)}, 1000+w*517) }
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := range writers {
		wg.Go(func() {
			<-start
			errs[w] = s.Put(ctx, "last-wins", content(w))
		})
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("Put: %v", err)
		}
	}
	got, err := s.Get(ctx, "last-wins")
	if err != nil {
		t.Fatal(err)
	}
	for w := range writers {
		if bytes.Equal(got, content(w)) {
			return
		}
	}
	t.Fatalf("after racing Puts the object (%d bytes) is no writer's content", len(got))
}

func testLargeObject(t *testing.T, s objstore.Store) {
	if testing.Short() {
		t.Skip("large object skipped in -short mode")
	}
	ctx := t.Context()
	data := randomBytes(2, LargeObjectBytes)
	if err := s.PutIfAbsent(ctx, "large", data); err != nil {
		t.Fatalf("PutIfAbsent(large): %v", err)
	}
	if err := s.PutIfAbsent(ctx, "large", data[:10]); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("second PutIfAbsent(large) error = %v, want ErrExists", err)
	}
	mustGet(t, s, "large", data)
	off := int64(5<<20 - 7)
	got, err := s.GetRange(ctx, "large", off, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data[off:off+1000]) {
		t.Fatal("GetRange across the 5 MiB mark returned other bytes")
	}
}

func testInvalidKeys(t *testing.T, s objstore.Store) {
	ctx := context.WithoutCancel(t.Context())
	for _, key := range []string{"", "/abs", "dir/", "a//b", "../up", "a/./b", "a/../b", "tab\tkey", ".lakegate-x", "x.attrs", "a__0x2f__b"} {
		if err := s.PutIfAbsent(ctx, key, []byte("x")); !errors.Is(err, objstore.ErrInvalid) {
			t.Errorf("PutIfAbsent(%q) error = %v, want ErrInvalid", key, err)
		}
		if err := s.Put(ctx, key, []byte("x")); !errors.Is(err, objstore.ErrInvalid) {
			t.Errorf("Put(%q) error = %v, want ErrInvalid", key, err)
		}
		if _, err := s.Get(ctx, key); !errors.Is(err, objstore.ErrInvalid) {
			t.Errorf("Get(%q) error = %v, want ErrInvalid", key, err)
		}
		if err := s.Delete(ctx, key); !errors.Is(err, objstore.ErrInvalid) {
			t.Errorf("Delete(%q) error = %v, want ErrInvalid", key, err)
		}
	}
	if keys := listKeys(t, s, ""); len(keys) != 0 {
		t.Errorf("invalid keys left objects: %q", keys)
	}
}
