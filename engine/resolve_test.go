package engine

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/lakegate/lakegate/engine/index"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
	"github.com/lakegate/lakegate/objstore"
)

// TestVoidAfterFoldedRecord builds the sequence TestLeaderlessProperties
// once met at random (an acknowledged append held twice, at two offsets):
// engine a's commit transaction applies but its reply is lost; before a's
// watch delivers the record, engine b applies it, folds it into the log's
// head and deletes it; a's resolution then finds the key absent and voids
// it. The void alone cannot tell "never applied" from "applied and folded";
// the append must not be committed a second time, and it is acknowledged
// at the offset the log holds it.
func TestVoidAfterFoldedRecord(t *testing.T) {
	ctx := ctxT(t)
	mem := meta.NewMem(meta.MemOptions{})
	bucket, err := objstore.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bucket.Close(); mem.Close() })
	b, err := New(bucket, mem, Options{NodeID: "b", Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	lag := &lagStore{Store: mem, b: b, t: t, open: make(chan struct{})}
	close(lag.open)
	a, err := New(bucket, lag, Options{NodeID: "a", Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })

	const id = lakestream.LogID(3)
	if _, err := a.Append(ctx, id, 1, []byte("first")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Log(ctx, id); err != nil { // b applies the log's records
		t.Fatal(err)
	}
	lag.arm()
	h, err := a.Append(ctx, id, 1, []byte("second"))
	if !lag.fired() {
		t.Fatal("the lost reply was not injected")
	}
	if err != nil && !errors.Is(err, lakestream.ErrIndeterminate) {
		t.Fatalf("append after a lost reply: %v (the record did commit)", err)
	}
	if err := b.clog.sync(ctx); err != nil { // b has applied every record
		t.Fatal(err)
	}
	ents, err := b.ReadEntries(ctx, id, 0, 100, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, string(e.Payload))
	}
	if strings.Join(got, ",") != "first,second" {
		t.Fatalf("log holds %q, want [first second] (the append committed once)", got)
	}
	if err == nil && h.Offset != ents[1].Offset {
		t.Fatalf("acknowledged at %d, held at %d", h.Offset, ents[1].Offset)
	}
}

// lagStore is engine a's view of the metadata store: once armed, its next
// commit transaction applies, engine b folds and deletes the record, and
// the reply is lost — while a's watch holds its events until a writes the
// void of that key.
type lagStore struct {
	meta.Store
	b *Engine
	t *testing.T

	mu    sync.Mutex
	armed bool
	key   string        // the record key whose reply was lost
	open  chan struct{} // closed: the watch delivers
	fire  bool
}

func (s *lagStore) arm() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed = true
	s.open = make(chan struct{}) // hold the watch from now on
}

func (s *lagStore) fired() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fire
}

func (s *lagStore) Watch(ctx context.Context, prefix string, afterRev int64) <-chan meta.Event {
	in := s.Store.Watch(ctx, prefix, afterRev)
	out := make(chan meta.Event, 1024)
	go func() {
		defer close(out)
		for ev := range in {
			s.mu.Lock()
			gate := s.open
			s.mu.Unlock()
			select {
			case <-gate:
			case <-ctx.Done():
				return
			}
			out <- ev
		}
	}()
	return out
}

func (s *lagStore) Txn(ctx context.Context, cmps []meta.Cmp, ops []meta.Op) (bool, int64, error) {
	s.mu.Lock()
	armed, key := s.armed, s.key
	s.mu.Unlock()
	if armed && len(ops) > 0 && ops[0].Kind == meta.OpPut && strings.Contains(ops[0].Key, "/commits/rec/") && !index.IsVoid(ops[0].Value) {
		ok, rev, err := s.Store.Txn(ctx, cmps, ops)
		if err != nil || !ok {
			return ok, rev, err
		}
		s.mu.Lock()
		s.armed, s.key, s.fire = false, ops[0].Key, true
		s.mu.Unlock()
		if err := s.b.clog.waitApplied(ctx, rev); err != nil {
			s.t.Error(err)
		}
		if err := s.b.clog.foldNow(ctx); err != nil {
			s.t.Error(err)
		}
		if _, found, _ := s.Store.Get(ctx, ops[0].Key); found {
			s.t.Error("b's fold left the record in place")
		}
		return false, 0, errors.New("injected: txn applied, reply lost")
	}
	ok, rev, err := s.Store.Txn(ctx, cmps, ops)
	if key != "" && len(ops) > 0 && ops[0].Key == key && index.IsVoid(ops[0].Value) {
		s.mu.Lock()
		close(s.open) // the void is written: a's watch goes on
		s.key = ""
		s.mu.Unlock()
	}
	return ok, rev, err
}
