package objstore

import "context"

// Preparer is a Store that can create objects ahead of their data
// (docs/storage.md, "Prepared objects"): Prepare does the costly part of a
// create — the inode and the directory entry, made durable — so that a
// later PutIfAbsent of the key through the same Store value only writes
// the data into the existing file and syncs it.
//
// After Prepare returns nil every key exists (listed, empty) and is
// prepared by this Store value: its PutIfAbsent fills it, at most
// once successfully; a fill that fails leaves it prepared for a retry.
// PutIfAbsent of a prepared key through any other Store value or process
// is ErrExists, as for any existing key. Delete and Put end a
// preparation. A key that exists fails Prepare with ErrExists; on any
// error the files the call created are removed.
type Preparer interface {
	Prepare(ctx context.Context, keys []string) error
	// PrepareStats counts, since the Store value was opened, the prepared
	// keys that PutIfAbsent filled and those it found deleted (by another
	// Store value or process) and so created anew.
	PrepareStats() PrepareStats
}

// PrepareStats is what a Preparer's prepared keys came to.
type PrepareStats struct {
	Filled int64 // filled by PutIfAbsent
	Gone   int64 // deleted before their fill (PutIfAbsent created them)
}

// PreparerOf returns the Preparer behind s — s itself, or the store that
// an Instrument or NewFaulty wrapper (anything with Unwrap() Store) wraps —
// or nil when s cannot prepare objects (every backend but file://).
func PreparerOf(s Store) Preparer {
	for s != nil {
		if b, ok := s.(*blobStore); ok && b.file != nil {
			return b
		}
		u, ok := s.(interface{ Unwrap() Store })
		if !ok {
			return nil
		}
		s = u.Unwrap()
	}
	return nil
}

// Prepare implements Preparer for file:// stores (the only ones PreparerOf
// returns).
func (s *blobStore) Prepare(ctx context.Context, keys []string) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if s.file == nil {
		return ErrInvalid
	}
	for _, k := range keys {
		if err := ValidKey(k); err != nil {
			return err
		}
	}
	return s.file.prepare(ctx, keys)
}

// PrepareStats implements Preparer.
func (s *blobStore) PrepareStats() PrepareStats {
	if s.file == nil {
		return PrepareStats{}
	}
	return PrepareStats{Filled: s.file.filled.Load(), Gone: s.file.gone.Load()}
}
