package objstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// Appender is a Store whose objects can be written by appending
// (docs/storage.md, "Appended objects"; file:// only): the costly part of
// a create — the inode and the directory entry, made durable — is paid
// once per object instead of once per write.
type Appender interface {
	// Create creates key exclusively as an empty object, durable (the
	// file and its directory synced), and returns it open for appends.
	// ErrExists if key exists.
	Create(ctx context.Context, key string) (Appendable, error)
}

// Appendable is an object open for appends, through the Store value that
// created it. Its methods are safe for concurrent use.
type Appendable interface {
	// Append writes data at the object's end and makes it durable before
	// it returns the offset data starts at: from then on GetRange of
	// [offset, offset+len(data)) through any Store value returns data.
	// After an error the object takes no more appends (every later Append
	// fails); the bytes of the failed append may or may not be in it.
	Append(ctx context.Context, data []byte) (offset int64, err error)
	// Size is the object's size: the bytes of every append written so far.
	Size() int64
	// Close waits for the appends in flight and releases the object
	// (which stays as it is). Append after Close is ErrClosed.
	Close() error
}

// AppenderOf returns the Appender behind s — s itself, or the store that
// an Instrument or NewFaulty wrapper (anything with Unwrap() Store) wraps —
// or nil when s cannot append to objects (every backend but file://).
func AppenderOf(s Store) Appender {
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

// Create implements Appender for file:// stores (the only ones AppenderOf
// returns).
func (s *blobStore) Create(ctx context.Context, key string) (Appendable, error) {
	if err := s.check(key); err != nil {
		return nil, err
	}
	if s.file == nil {
		return nil, ErrInvalid
	}
	a, err := s.file.create(ctx, key)
	if err != nil && !errors.Is(err, ErrExists) {
		err = fmt.Errorf("objstore: create %q: %w", key, err)
	}
	return a, err
}

// create makes key an empty file, exclusively, synced with its directory.
func (f *fileBackend) create(ctx context.Context, key string) (*fileAppendable, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	path := f.path(key)
	dir := filepath.Dir(path)
	if err := f.mkdirs(dir); err != nil {
		return nil, err
	}
	fd, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fileMode)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("objstore: create %q: %w", key, ErrExists)
		}
		return nil, err
	}
	if f.fsync {
		err = fd.Sync()
		if err == nil {
			err = syncDir(dir)
		}
	}
	if err != nil {
		_ = fd.Close()
		_ = os.Remove(path)
		return nil, err
	}
	return &fileAppendable{key: key, fd: fd, fsync: f.fsync}, nil
}

// fileAppendable appends with WriteAt under mu (so the written bytes are
// always a prefix of the file: no hole behind an append in flight) and
// syncs outside it, one fdatasync serving every append written before it
// (group commit).
type fileAppendable struct {
	key    string
	fd     *os.File
	fsync  bool
	flight sync.WaitGroup // appends between their write and their sync
	mu     struct {
		sync.Mutex
		size   int64 // bytes written
		err    error // the first failure: no more appends
		closed bool
	}
	sync struct {
		sync.Mutex
		upTo int64 // bytes known durable
	}
}

func (a *fileAppendable) Append(ctx context.Context, data []byte) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	a.mu.Lock()
	switch {
	case a.mu.closed:
		a.mu.Unlock()
		return 0, ErrClosed
	case a.mu.err != nil:
		err := a.mu.err
		a.mu.Unlock()
		return 0, fmt.Errorf("objstore: append %q: an earlier append failed: %w", a.key, err)
	}
	off := a.mu.size
	if _, err := a.fd.WriteAt(data, off); err != nil {
		a.mu.err = err
		a.mu.Unlock()
		return 0, fmt.Errorf("objstore: append %q: %w", a.key, err)
	}
	a.mu.size += int64(len(data))
	end := a.mu.size
	a.flight.Add(1)
	a.mu.Unlock()
	defer a.flight.Done()
	if !a.fsync {
		return off, nil
	}
	a.sync.Lock()
	defer a.sync.Unlock()
	if a.sync.upTo >= end {
		return off, nil // an append behind this one synced it
	}
	a.mu.Lock()
	upTo, err := a.mu.size, a.mu.err
	a.mu.Unlock()
	if err == nil {
		err = datasync(a.fd)
	}
	if err != nil {
		a.mu.Lock()
		if a.mu.err == nil {
			a.mu.err = err
		}
		a.mu.Unlock()
		return 0, fmt.Errorf("objstore: append %q: sync: %w", a.key, err)
	}
	a.sync.upTo = upTo
	return off, nil
}

func (a *fileAppendable) Size() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.mu.size
}

func (a *fileAppendable) Close() error {
	a.mu.Lock()
	if a.mu.closed {
		a.mu.Unlock()
		return nil
	}
	a.mu.closed = true
	a.mu.Unlock()
	a.flight.Wait()
	return a.fd.Close()
}
