package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/lakegate/lakegate/lakestream"
)

func join(t *testing.T, e *Engine, id string, ttl time.Duration) *Membership {
	t.Helper()
	m, err := e.JoinCluster(ctxT(t), MembershipConfig{ID: id, SessionTTL: ttl,
		Endpoints: map[string]string{"pulsar": "pulsar://" + id + ":6650"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(ctxT(t)) })
	return m
}

func waitLost(t *testing.T, o lakestream.Ownership, within time.Duration) {
	t.Helper()
	select {
	case <-o.Lost():
	case <-time.After(within):
		t.Fatalf("ownership of %s not lost within %v", o.Unit(), within)
	}
}

// Acquire: first come owns; the others learn who; a release frees the unit;
// Members and Owner answer from the store.
func TestMembershipAcquireRelease(t *testing.T) {
	env := newMemEnv(t)
	ctx := ctxT(t)
	a := join(t, env.engine(t, Options{}), "a", 5*time.Second)
	b := join(t, env.engine(t, Options{}), "b", 5*time.Second)
	ms, err := a.Members(ctx)
	if err != nil || len(ms) != 2 || ms[0].ID != "a" || ms[1].ID != "b" || ms[1].Endpoints["pulsar"] != "pulsar://b:6650" {
		t.Fatalf("Members: %+v %v", ms, err)
	}
	oa, err := a.Acquire(ctx, "persistent://t/ns/x-partition-0")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := a.Acquire(ctx, "persistent://t/ns/x-partition-0"); err != nil || again != oa {
		t.Fatalf("re-Acquire by the owner: %v %v", again, err)
	}
	_, err = b.Acquire(ctx, "persistent://t/ns/x-partition-0")
	var owned *lakestream.OwnedError
	if !errors.As(err, &owned) || !errors.Is(err, lakestream.ErrOwned) || owned.Owner.ID != "a" || owned.Owner.Endpoints["pulsar"] != "pulsar://a:6650" {
		t.Fatalf("Acquire of an owned unit: %v", err)
	}
	if o, ok, err := b.Owner(ctx, "persistent://t/ns/x-partition-0"); err != nil || !ok || o.ID != "a" {
		t.Fatalf("Owner: %+v %v %v", o, ok, err)
	}
	if len(a.Owned()) != 1 || len(b.Owned()) != 0 {
		t.Fatalf("Owned: a %d b %d", len(a.Owned()), len(b.Owned()))
	}
	if err := oa.Release(ctx); err != nil {
		t.Fatal(err)
	}
	waitLost(t, oa, time.Second)
	if _, ok, _ := b.Owner(ctx, "persistent://t/ns/x-partition-0"); ok {
		t.Fatal("owned after release")
	}
	if _, err := b.Acquire(ctx, "persistent://t/ns/x-partition-0"); err != nil {
		t.Fatalf("Acquire after release: %v", err)
	}
	// Leaving the cluster releases everything.
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := a.Owner(ctx, "persistent://t/ns/x-partition-0"); ok {
		t.Fatal("owned after the owner left")
	}
	if ms, _ := a.Members(ctx); len(ms) != 1 {
		t.Fatalf("members after b left: %+v", ms)
	}
}

// A member whose session expires (here: its lease revoked behind its back,
// as etcd does when keep-alives stop) loses every unit at once, cannot write
// under its old guards — cursors, appends — and comes back with a new
// session; the unit can be taken by another member meanwhile.
func TestMembershipSessionLossFences(t *testing.T) {
	env := newMemEnv(t)
	ctx := ctxT(t)
	ea, eb := env.engine(t, Options{}), env.engine(t, Options{})
	a := join(t, ea, "a", time.Second)
	b := join(t, eb, "b", time.Second)
	const unit = "persistent://t/ns/y"
	oa, err := a.Acquire(ctx, unit)
	if err != nil {
		t.Fatal(err)
	}
	la, err := ea.Log(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := la.Append(ctx, 1, []byte("owner's"), lakestream.WithAppendGuard(oa)); err != nil {
		t.Fatalf("guarded append: %v", err)
	}
	ca, err := la.OpenCursor(ctx, "sub", -1, lakestream.WithGuard(oa))
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.MarkDelete(ctx, 0, nil); err != nil {
		t.Fatalf("guarded cursor write: %v", err)
	}

	a.mu.Lock()
	lease := a.mu.lease
	a.mu.Unlock()
	if err := env.meta.Revoke(ctx, lease); err != nil {
		t.Fatal(err)
	}
	// b takes the unit while a may not have noticed yet: a's guarded writes
	// fail on the store's compare.
	ob, err := b.Acquire(ctx, unit)
	if err != nil {
		t.Fatalf("Acquire after the owner's session ended: %v", err)
	}
	if _, err := la.Append(ctx, 1, []byte("stale owner's"), lakestream.WithAppendGuard(oa)); !errors.Is(err, lakestream.ErrGuardLost) {
		t.Fatalf("append under a lost guard: %v, want ErrGuardLost", err)
	}
	if err := ca.MarkDelete(ctx, 1, nil); !errors.Is(err, lakestream.ErrGuardLost) {
		t.Fatalf("cursor write under a lost guard: %v, want ErrGuardLost", err)
	}
	waitLost(t, oa, 2*time.Second)
	// The new owner writes.
	lb, err := eb.Log(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if h, err := lb.Append(ctx, 1, []byte("new owner's"), lakestream.WithAppendGuard(ob)); err != nil || h.Offset != 1 {
		t.Fatalf("new owner's append: %+v %v (the stale append must not have landed)", h, err)
	}
	cb, err := lb.LoadCursor(ctx, "sub", lakestream.WithGuard(ob))
	if err != nil || cb.MarkDeleteOffset() != 0 {
		t.Fatalf("new owner loads the cursor: %v (mark-delete %d, want 0)", err, cb.MarkDeleteOffset())
	}
	if err := cb.MarkDelete(ctx, 1, nil); err != nil {
		t.Fatalf("new owner's cursor write: %v", err)
	}
	// a comes back with a new session and can acquire other units.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := a.Acquire(ctx, "persistent://t/ns/z"); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("a never got a new session: %v", err)
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
}

// A process joining with the id of an earlier one that died ends that one's
// session: its units are free at once.
func TestMembershipRestartEndsEarlierSession(t *testing.T) {
	env := newMemEnv(t)
	ctx := ctxT(t)
	first := join(t, env.engine(t, Options{}), "n1", time.Minute)
	o, err := first.Acquire(ctx, "u")
	if err != nil {
		t.Fatal(err)
	}
	first.cancel() // "killed": no more keep-alives, no release
	<-first.done
	second := join(t, env.engine(t, Options{}), "n1", time.Minute)
	if _, err := second.Acquire(ctx, "u"); err != nil {
		t.Fatalf("Acquire after a restart with the same id: %v", err)
	}
	if err := o.(*ownership).check(ctx, env.meta); err == nil {
		t.Fatal("the dead process's ownership still checks out")
	}
}
