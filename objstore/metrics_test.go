package objstore_test

import (
	"errors"
	"testing"

	"github.com/lakegate/lakegate/objstore"
)

func TestInstrumentedStats(t *testing.T) {
	ctx := t.Context()
	f := objstore.NewFaulty(open(t, "mem://"), 1)
	s := objstore.Instrument(f)

	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.PutIfAbsent(ctx, "a", []byte("12345")))
	if err := s.PutIfAbsent(ctx, "a", []byte("x")); !errors.Is(err, objstore.ErrExists) {
		t.Fatal(err)
	}
	must(s.Put(ctx, "b", []byte("123")))
	if _, err := s.Get(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetRange(ctx, "a", 1, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "missing"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatal(err)
	}
	must(s.Delete(ctx, "b"))
	if err := s.Delete(ctx, "b"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatal(err)
	}
	f.FailNext(objstore.OpGet, 1)
	if _, err := s.Get(ctx, "a"); !errors.Is(err, objstore.ErrInjected) {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "bad//key"); !errors.Is(err, objstore.ErrInvalid) {
		t.Fatal(err)
	}
	stop := errors.New("stop")
	if err := s.List(ctx, "", func(objstore.ObjectInfo) error { return stop }); !errors.Is(err, stop) {
		t.Fatal(err)
	}
	f.FailNext(objstore.OpList, 1)
	if err := s.List(ctx, "", func(objstore.ObjectInfo) error { return nil }); !errors.Is(err, objstore.ErrInjected) {
		t.Fatal(err)
	}

	want := objstore.Stats{
		Puts: 3, Gets: 5, Deletes: 2, Lists: 2,
		Conflicts: 1, NotFound: 2, Errors: 3, // injected get, invalid key, injected list
		BytesWritten: 8, BytesRead: 7,
	}
	if got := s.Stats(); got != want {
		t.Fatalf("Stats() =\n%+v, want\n%+v", got, want)
	}
}
