package objstore

import (
	"context"
	"errors"
)

// Sentinel errors. Implementations wrap them (together with the backend's own
// error, when there is one); compare with errors.Is, never by string.
var (
	// ErrNotFound is returned by Get, GetRange and Delete of a missing key.
	ErrNotFound = errors.New("objstore: not found")
	// ErrExists is returned by PutIfAbsent when the key already exists
	// (including when a racing writer created it first). The existing object
	// is left untouched.
	ErrExists = errors.New("objstore: already exists")
	// ErrInvalid is returned for a key that is not a valid key (see ValidKey),
	// a negative range offset, or a malformed store URL. It is a caller bug,
	// never a transient condition.
	ErrInvalid = errors.New("objstore: invalid argument")
	// ErrClosed is returned by every method called after Close.
	ErrClosed = errors.New("objstore: closed")
)

// Store is the object-store boundary of the engine: whole-object writes,
// ranged reads, deletes and listing.
//
// Keys are slash-separated relative paths without a leading slash; ValidKey
// gives the exact rules, which every implementation enforces (ErrInvalid) so
// that a key valid on one backend is valid on all.
//
// All methods are safe for concurrent use. Returned byte slices are owned by
// the caller; data passed to Put* is not retained after the call returns.
// Errors other than the sentinels are backend failures wrapped with the
// operation and the key; after such an error from Put or PutIfAbsent the
// object may or may not have been written (the outcome is unknown).
type Store interface {
	// PutIfAbsent creates key with data, atomically failing with ErrExists if
	// the key exists. Of racing creators (in this process or any other
	// process using the same bucket) exactly one succeeds, and the stored
	// object is that winner's data, visible whole or not at all.
	PutIfAbsent(ctx context.Context, key string, data []byte) error
	// Put creates or replaces key. Readers see either the old or the new
	// object, never a mix.
	Put(ctx context.Context, key string, data []byte) error
	// Get returns the whole object (ErrNotFound).
	Get(ctx context.Context, key string) ([]byte, error)
	// GetRange returns the bytes [offset, offset+length) of the object
	// (ErrNotFound). Reading past the end returns the bytes that exist, so an
	// offset at or beyond the end returns an empty slice and no error. A
	// negative length reads to the end; a negative offset is ErrInvalid.
	GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error)
	// Delete removes key (ErrNotFound if absent). On backends whose delete is
	// idempotent (S3) the check is a separate request, so of two racing
	// deletes both may succeed.
	Delete(ctx context.Context, key string) error
	// List calls fn for every object whose key starts with prefix (a plain
	// string prefix, not only a directory), recursively, in ascending byte
	// order of keys. fn returning an error stops the listing and List returns
	// that error as is. Objects created or deleted during the listing may or
	// may not be seen. prefix need not be a valid key ("" lists everything).
	List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error
	// Close releases the store. Calls after Close fail.
	Close() error
}

// ObjectInfo describes a listed object.
type ObjectInfo struct {
	Key     string
	Size    int64
	ModTime int64 // Unix ms; 0 when the store does not say
}
