package objstore

import (
	"context"
	"errors"
	"sync/atomic"
)

// Stats are cumulative counts of the operations on an Instrumented store
// since it was made. Every call counts once in its operation's counter,
// whatever its outcome; the outcome counters then split off the failures.
// A Prometheus collector reads them with Stats (they only grow).
type Stats struct {
	Puts    uint64 // Put and PutIfAbsent calls
	Gets    uint64 // Get and GetRange calls
	Deletes uint64 // Delete calls
	Lists   uint64 // List calls

	Conflicts uint64 // PutIfAbsent calls that returned ErrExists
	NotFound  uint64 // Get, GetRange and Delete calls that returned ErrNotFound
	Errors    uint64 // calls that failed otherwise (backend, context, ErrInvalid); not fn's own errors in List

	BytesWritten uint64 // data bytes of successful Put and PutIfAbsent calls
	BytesRead    uint64 // bytes returned by successful Get and GetRange calls
}

// Instrumented is a Store that counts the operations passed to the Store it
// wraps. Safe for concurrent use; the counters are atomics.
type Instrumented struct {
	inner Store
	c     struct {
		puts, gets, deletes, lists  atomic.Uint64
		conflicts, notFound, errors atomic.Uint64
		bytesWritten, bytesRead     atomic.Uint64
	}
}

// Instrument wraps inner so that its operations are counted (see Stats).
func Instrument(inner Store) *Instrumented { return &Instrumented{inner: inner} }

// Stats returns a snapshot of the counters. The counters are read one by one,
// so a snapshot taken during operations may be off by the operations in
// flight.
func (s *Instrumented) Stats() Stats {
	return Stats{
		Puts:         s.c.puts.Load(),
		Gets:         s.c.gets.Load(),
		Deletes:      s.c.deletes.Load(),
		Lists:        s.c.lists.Load(),
		Conflicts:    s.c.conflicts.Load(),
		NotFound:     s.c.notFound.Load(),
		Errors:       s.c.errors.Load(),
		BytesWritten: s.c.bytesWritten.Load(),
		BytesRead:    s.c.bytesRead.Load(),
	}
}

// Unwrap returns the wrapped store.
func (s *Instrumented) Unwrap() Store { return s.inner }

func (s *Instrumented) outcome(err error) {
	switch {
	case err == nil:
	case errors.Is(err, ErrExists):
		s.c.conflicts.Add(1)
	case errors.Is(err, ErrNotFound):
		s.c.notFound.Add(1)
	default:
		s.c.errors.Add(1)
	}
}

func (s *Instrumented) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	s.c.puts.Add(1)
	err := s.inner.PutIfAbsent(ctx, key, data)
	s.outcome(err)
	if err == nil {
		s.c.bytesWritten.Add(uint64(len(data)))
	}
	return err
}

func (s *Instrumented) Put(ctx context.Context, key string, data []byte) error {
	s.c.puts.Add(1)
	err := s.inner.Put(ctx, key, data)
	s.outcome(err)
	if err == nil {
		s.c.bytesWritten.Add(uint64(len(data)))
	}
	return err
}

func (s *Instrumented) Get(ctx context.Context, key string) ([]byte, error) {
	s.c.gets.Add(1)
	b, err := s.inner.Get(ctx, key)
	s.outcome(err)
	s.c.bytesRead.Add(uint64(len(b)))
	return b, err
}

func (s *Instrumented) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	s.c.gets.Add(1)
	b, err := s.inner.GetRange(ctx, key, offset, length)
	s.outcome(err)
	s.c.bytesRead.Add(uint64(len(b)))
	return b, err
}

func (s *Instrumented) Delete(ctx context.Context, key string) error {
	s.c.deletes.Add(1)
	err := s.inner.Delete(ctx, key)
	s.outcome(err)
	return err
}

func (s *Instrumented) List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	s.c.lists.Add(1)
	var fnErr error
	err := s.inner.List(ctx, prefix, func(o ObjectInfo) error {
		fnErr = fn(o)
		return fnErr
	})
	if err != nil && (fnErr == nil || !errors.Is(err, fnErr)) {
		s.c.errors.Add(1)
	}
	return err
}

func (s *Instrumented) Close() error { return s.inner.Close() }
