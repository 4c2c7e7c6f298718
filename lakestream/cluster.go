package lakestream

import (
	"context"
	"errors"
	"fmt"
)

// Cluster membership and ownership: lakegate's extension of the API (the
// Java API leaves it to the broker). Appends stay leaderless — any node may
// append to any log — but the client-visible rules of a topic-partition
// (subscriptions, producer names, access modes, deduplication) need one
// place where they are enforced. That place is the unit's owner: at most one
// live member at a time, chosen by the first to Acquire it, for as long as
// its session lives. Ownership carries no data, so it moves in seconds.
//
// Writes that only the owner may make (cursor state, deduplication
// snapshots, topic epochs, appends of the owner's producers) carry the
// Ownership as a Guard (WithGuard, WithAppendGuard): once it is lost they
// fail with ErrGuardLost, from any process, so a node that lost a unit while
// paused or cut off cannot change it.

// Member is one live node of a cluster.
type Member struct {
	// ID is the node's id, unique among live members.
	ID string
	// Endpoints are the URLs the node advertises, by name: "pulsar",
	// "pulsar+ssl", "http", "https" (absent when the node has none).
	Endpoints map[string]string
}

// Membership is this node's view of the cluster serving one catalog.
// Safe for concurrent use.
type Membership interface {
	// Self is this node.
	Self() Member
	// Members lists the live members, sorted by ID.
	Members(ctx context.Context) ([]Member, error)
	// Acquire takes unit for this node unless another live member owns it
	// (then the error wraps ErrOwned and is an *OwnedError naming the
	// owner). Acquiring a unit this node owns returns that Ownership.
	// ErrUnavailable when the metadata store cannot be reached or this
	// node's session is being renewed.
	Acquire(ctx context.Context, unit string) (Ownership, error)
	// Owner returns the live owner of unit (ok false: nobody owns it).
	Owner(ctx context.Context, unit string) (owner Member, ok bool, err error)
	// Owned lists the units this node owns.
	Owned() []Ownership
	// Close releases every ownership and leaves the cluster.
	Close(ctx context.Context) error
}

// Guard is an ownership token: the implementation that handed it out checks
// it on every write made with it.
type Guard interface {
	// Lost is closed once the guard no longer holds.
	Lost() <-chan struct{}
	// Held reports whether the guard holds now: false once Lost is
	// closed, and as soon as the node cannot be sure any more that its
	// session is alive (its last renewal is older than the session allows:
	// a process paused past its lease, say), even before Lost is closed.
	// What is served to clients under the guard checks it first.
	Held() bool
}

// Ownership is this node's ownership of one unit.
type Ownership interface {
	Guard
	// Unit is what is owned.
	Unit() string
	// Release gives the unit up (no-op once lost); Lost is closed after it.
	Release(ctx context.Context) error
}

// ErrOwned is returned by Membership.Acquire when another live member owns
// the unit; errors.As finds an *OwnedError with the owner.
var ErrOwned = errors.New("lakestream: owned by another member")

// OwnedError names the member owning a unit.
type OwnedError struct {
	Unit  string
	Owner Member
}

func (e *OwnedError) Error() string {
	return fmt.Sprintf("%v: %s is owned by %s", ErrOwned, e.Unit, e.Owner.ID)
}

// Unwrap makes errors.Is(err, ErrOwned) hold.
func (e *OwnedError) Unwrap() error { return ErrOwned }
