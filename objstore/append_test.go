package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/lakegate/lakegate/objstore"
)

func TestAppenderOf(t *testing.T) {
	if a := objstore.AppenderOf(open(t, "mem://")); a != nil {
		t.Errorf("AppenderOf(mem) = %T, want nil", a)
	}
	f := open(t, fileURL(t.TempDir()))
	if objstore.AppenderOf(objstore.NewFaulty(objstore.Instrument(f), 1)) == nil {
		t.Error("AppenderOf(Faulty(Instrument(file))) = nil")
	}
}

// An appended object exists (empty) once created, takes concurrent appends
// each readable at the offset it returned, through another store value
// too, and is exclusive: a second create or a PutIfAbsent of its key is
// ErrExists.
func TestFileAppend(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, fileURL(dir))
	other := open(t, fileURL(dir))
	a, err := objstore.AppenderOf(s).Create(ctx, "wal/n/seg")
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if got, err := other.Get(ctx, "wal/n/seg"); err != nil || len(got) != 0 {
		t.Fatalf("Get after Create = %d bytes, %v; want an empty object", len(got), err)
	}
	if _, err := objstore.AppenderOf(other).Create(ctx, "wal/n/seg"); !errors.Is(err, objstore.ErrExists) {
		t.Errorf("second Create = %v, want ErrExists", err)
	}
	if err := other.PutIfAbsent(ctx, "wal/n/seg", []byte("x")); !errors.Is(err, objstore.ErrExists) {
		t.Errorf("PutIfAbsent of an appended key = %v, want ErrExists", err)
	}
	const n = 64
	offsets := make([]int64, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			off, err := a.Append(ctx, bytes.Repeat([]byte{byte(i)}, 100+i))
			if err != nil {
				t.Errorf("Append %d: %v", i, err)
			}
			offsets[i] = off
		})
	}
	wg.Wait()
	var total int64
	for i := range n {
		total += int64(100 + i)
		got, err := other.GetRange(ctx, "wal/n/seg", offsets[i], int64(100+i))
		if err != nil || !bytes.Equal(got, bytes.Repeat([]byte{byte(i)}, 100+i)) {
			t.Fatalf("GetRange of append %d at %d = %d bytes %v, want its data", i, offsets[i], len(got), err)
		}
	}
	if a.Size() != total {
		t.Errorf("Size = %d, want %d", a.Size(), total)
	}
	if all, err := other.Get(ctx, "wal/n/seg"); err != nil || int64(len(all)) != total {
		t.Errorf("Get = %d bytes, %v; want %d (no hole, nothing past the appends)", len(all), err, total)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := a.Append(ctx, []byte("late")); !errors.Is(err, objstore.ErrClosed) {
		t.Errorf("Append after Close = %v, want ErrClosed", err)
	}
	if err := other.Delete(ctx, "wal/n/seg"); err != nil {
		t.Errorf("Delete of an appended object: %v", err)
	}
}

// Create validates the key and refuses on a closed store.
func TestFileAppendRefusals(t *testing.T) {
	ctx := context.Background()
	s := open(t, fileURL(t.TempDir()))
	ap := objstore.AppenderOf(s)
	for _, key := range []string{"", "../x", "a//b", "/abs"} {
		if _, err := ap.Create(ctx, key); !errors.Is(err, objstore.ErrInvalid) {
			t.Errorf("Create(%q) = %v, want ErrInvalid", key, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ap.Create(ctx, "a/b"); !errors.Is(err, objstore.ErrClosed) {
		t.Errorf("Create on a closed store = %v, want ErrClosed", err)
	}
}
