package meta

import (
	"context"
	"errors"
	"time"
)

// Sentinel errors. Implementations wrap them (with the backend's own error
// when there is one, so the cause stays visible); compare with errors.Is,
// never by string.
var (
	// ErrTooManyOps is returned by Txn when a transaction carries more than
	// MaxTxnOps compares or more than MaxTxnOps operations, or when the
	// request is larger than the store's request size limit (etcd's
	// --max-request-bytes; the MaxRequestBytes options of Mem and Etcd).
	// Nothing was applied; the caller must split the transaction.
	ErrTooManyOps = errors.New("meta: too many operations in transaction")
	// ErrUnavailable is returned when the store cannot be reached or does
	// not answer before the context's deadline (or the store's own request
	// timeout). After a Txn failing with ErrUnavailable the outcome is
	// unknown: the writes may or may not have been applied, and the caller
	// must find out by reading.
	ErrUnavailable = errors.New("meta: store unavailable")
	// ErrClosed is returned by every method called after Close.
	ErrClosed = errors.New("meta: closed")
	// ErrLeaseExpired is returned by KeepAlive, and by a Txn putting a key
	// with a lease, when the lease expired, was revoked or never existed.
	// Nothing was applied.
	ErrLeaseExpired = errors.New("meta: lease expired")
	// ErrInvalid is returned for a request the store rejects as malformed: an
	// empty key in Get, a Cmp or an Op (DeletePrefix with an empty prefix
	// included), or a Txn whose ops write one key twice (two puts of a key,
	// or a put of a key that a delete in the same Txn also covers). It is a
	// caller bug, never transient; nothing was applied.
	ErrInvalid = errors.New("meta: invalid request")
	// ErrPermissionDenied is returned when the store refuses the client's
	// credentials or what they allow: etcd with authentication on and no
	// user, a wrong user or password, or a user whose roles do not cover
	// the key. Never transient (the configuration is wrong); Dial fails
	// with it at once.
	ErrPermissionDenied = errors.New("meta: permission denied")
)

// KV is one key with its value and revisions.
type KV struct {
	Key   string
	Value []byte
	// ModRevision is the store revision of the key's last change; it is > 0
	// for every existing key. In a delete Event it is the revision of the
	// delete.
	ModRevision int64
	// CreateRevision is the store revision at which the key was created
	// (re-created, after a delete). It is 0 in a delete Event.
	CreateRevision int64
}

// Cmp is a transaction guard on one key's ModRevision. ModRevision 0 means
// "the key does not exist".
type Cmp struct {
	Key         string
	ModRevision int64
}

// OpKind is the kind of a transaction operation.
type OpKind int

// Operation kinds.
const (
	OpPut OpKind = iota + 1
	OpDelete
	// OpDeletePrefix deletes every key beginning with Key.
	OpDeletePrefix
)

// Op is one write in a transaction.
type Op struct {
	Kind  OpKind
	Key   string
	Value []byte
	// Lease attaches a put key to a lease (0: none; a put without a lease
	// detaches the key from any lease it had).
	Lease LeaseID
}

// LeaseID names a lease (Grant). 0 is no lease.
type LeaseID int64

// Put returns a put operation.
func Put(key string, value []byte) Op { return Op{Kind: OpPut, Key: key, Value: value} }

// PutWithLease returns a put operation attaching the key to lease: the key
// is deleted when the lease expires or is revoked.
func PutWithLease(key string, value []byte, lease LeaseID) Op {
	return Op{Kind: OpPut, Key: key, Value: value, Lease: lease}
}

// Delete returns a delete operation. Deleting an absent key is not an error
// (and not a change).
func Delete(key string) Op { return Op{Kind: OpDelete, Key: key} }

// DeletePrefix returns a delete-by-prefix operation. The prefix must not be
// empty (ErrInvalid): the whole keyspace is never deleted by accident.
func DeletePrefix(prefix string) Op { return Op{Kind: OpDeletePrefix, Key: prefix} }

// EventKind is the kind of a watch event.
type EventKind int

// Watch event kinds.
const (
	EventPut EventKind = iota + 1
	EventDelete
)

// Event is one change seen by a watch.
type Event struct {
	Kind EventKind
	// KV is the key after a put. For a delete it holds Key and ModRevision
	// (the revision of the delete) only.
	KV KV
}

// Store is the metadata boundary of the engine: a linearizable key-value
// store with revisions, multi-key compare-and-swap transactions and watches.
// etcd implements it in production (Etcd); Mem in unit tests. The acceptance
// suite in package metatest pins down the behaviour every implementation
// shares.
//
// Keys are non-empty byte-ordered strings. Revisions are etcd's: one
// store-wide counter that every Txn which changes at least one key advances
// by exactly one; all changes of that Txn carry the new revision. A Txn that
// changes nothing (failed compares, no ops, deletes of absent keys) leaves
// the revision alone.
//
// All methods are safe for concurrent use. Returned KVs and values are owned
// by the caller; values passed to Put are not retained after Txn returns. An
// empty value may come back as nil.
// Every call honours ctx: a deadline that passes yields ErrUnavailable, a
// cancellation yields an error wrapping context.Canceled (with the same
// unknown outcome for a Txn).
type Store interface {
	// Get returns the key (found=false if absent).
	Get(ctx context.Context, key string) (kv KV, found bool, err error)
	// Range returns keys in [start, end) in ascending key order, at most
	// limit of them (limit ≤ 0: no limit). start "" means from the first
	// key; end "" means "to the end of the keyspace". An empty range
	// (end ≤ start) returns no keys and no error. Reads are linearizable.
	Range(ctx context.Context, start, end string, limit int) ([]KV, error)
	// RangeReverse is Range in descending key order (the last keys first),
	// so limit keeps the greatest keys of [start, end). Cost: etcd reads the
	// whole [start, end) on the server before sorting and truncating, so
	// keep reverse ranges narrow; a ceiling lookup (Range, limit 1) is cheap.
	RangeReverse(ctx context.Context, start, end string, limit int) ([]KV, error)
	// Txn applies ops in order, atomically, iff every cmp holds (all cmps
	// are evaluated against the same revision). It returns whether they held
	// and the store revision after the transaction (or at the failed check).
	// A Txn with no cmps and no ops returns the current revision.
	// len(cmps) and len(ops) must each be ≤ MaxTxnOps (ErrTooManyOps).
	// Malformed requests fail with ErrInvalid; an unknown outcome is
	// reported as ErrUnavailable.
	Txn(ctx context.Context, cmps []Cmp, ops []Op) (ok bool, revision int64, err error)
	// Watch streams changes of keys beginning with prefix ("" = every key)
	// that happen after revision afterRev, in revision order
	// and, within one revision, in the order of the Txn's ops (a
	// DeletePrefix yields one delete per key, in key order).
	//
	// The channel is closed when ctx ends, when the store closes, when the
	// watch cannot start at afterRev+1 because that revision has been
	// compacted away, or on a backend error. A consumer that falls behind
	// by more than the implementation's buffer (see MemOptions and
	// EtcdOptions) is not skipped silently: its channel is closed. After a
	// close the caller re-reads what it needs and watches again, from a
	// revision it obtained before the re-read (an empty Txn returns the
	// current revision); events it then sees twice are idempotent by
	// ModRevision.
	//
	// afterRev 0 means "from now", where now is when the backend registers
	// the watch: on etcd that can be a little after Watch returns, so a
	// caller that must not miss a change passes an explicit revision.
	Watch(ctx context.Context, prefix string, afterRev int64) <-chan Event
	// MaxTxnOps is the most compares, and the most operations, one Txn may
	// carry.
	MaxTxnOps() int

	// Grant creates a lease that expires ttl after it was granted or last
	// kept alive (etcd rounds ttl up to whole seconds and enforces its own
	// minimum). When it expires or is revoked, every key attached to it is
	// deleted, all at one revision.
	Grant(ctx context.Context, ttl time.Duration) (LeaseID, error)
	// KeepAlive renews a lease and returns its new time to live.
	// ErrLeaseExpired when it is gone.
	KeepAlive(ctx context.Context, id LeaseID) (time.Duration, error)
	// Revoke ends a lease now, deleting its keys; revoking a lease that is
	// gone is not an error.
	Revoke(ctx context.Context, id LeaseID) error
	// Close releases the store (not the server behind it) and closes every
	// watch channel. Other calls after Close fail with ErrClosed (Watch
	// returns a closed channel); Close itself is idempotent.
	Close() error
}
