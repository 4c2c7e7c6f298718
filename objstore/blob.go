package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"sync/atomic"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/azureblob" // azblob://
	_ "gocloud.dev/blob/fileblob"  // file://
	_ "gocloud.dev/blob/gcsblob"   // gs://
	_ "gocloud.dev/blob/memblob"   // mem://
	_ "gocloud.dev/blob/s3blob"    // s3://
	"gocloud.dev/gcerrors"
)

// Query parameters that Open consumes itself; the driver never sees them.
const (
	// paramPrefix stores every key as PREFIX+key (give it a trailing '/').
	paramPrefix = "prefix"
	// paramFsync ("true" by default) makes file:// writes fsync the data and
	// the directory before they return. "false" trades durability against
	// power loss for latency (tests, throw-away data).
	paramFsync = "fsync"
)

// s3SinglePutBytesMax is the largest object that PutIfAbsent and Put send to
// S3 in one PutObject request. Above it the SDK's transfer manager uses a
// multipart upload, whose conditional create is checked only at
// CompleteMultipartUpload. 5 GiB is S3's single-PUT limit.
const s3SinglePutBytesMax = 5 << 30

// s3PartBytesMin is the transfer manager's default (and S3's minimum) part
// size; objects up to it go in one request anyway.
const s3PartBytesMin = 5 << 20

// Open opens the object store at url, a gocloud.dev/blob URL:
//
//	mem://                                   in-process map (tests)
//	file:///abs/dir  or  file://./rel/dir    local directory (created if missing)
//	s3://BUCKET?region=R[&endpoint=URL&use_path_style=true&anonymous=true]
//	gs://BUCKET                              (STORAGE_EMULATOR_HOST for emulators)
//	azblob://CONTAINER                       (AZURE_STORAGE_* environment)
//
// Besides each driver's own query parameters, Open understands:
//
//	prefix=P      every key K is stored as P+K (P must make P+"x" a ValidKey;
//	              give it a trailing '/' to get a "directory").
//	fsync=false   file:// only: do not fsync data and directories (default true).
//
// For file:// Open always sets the fileblob parameters create_dir=true and
// metadata=skip (no ".attrs" sidecar files), and writes objects itself so that
// PutIfAbsent is atomic across processes (fileblob's own IfNotExist is a
// check-then-rename). docs/storage.md lists credentials per cloud.
//
// A malformed URL or parameter is ErrInvalid.
func Open(ctx context.Context, rawURL string) (Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: store url: %v", ErrInvalid, err)
	}
	q := u.Query()
	prefix := q.Get(paramPrefix)
	q.Del(paramPrefix)
	if prefix != "" {
		if err := ValidKey(prefix + "x"); err != nil {
			return nil, fmt.Errorf("%w: store url: bad prefix %q", ErrInvalid, prefix)
		}
	}
	fsync := true
	if v := q.Get(paramFsync); v != "" {
		if u.Scheme != "file" {
			return nil, fmt.Errorf("%w: store url: %s is only for file://", ErrInvalid, paramFsync)
		}
		if fsync, err = strconv.ParseBool(v); err != nil {
			return nil, fmt.Errorf("%w: store url: %s=%q", ErrInvalid, paramFsync, v)
		}
		q.Del(paramFsync)
	}

	s := &blobStore{scheme: u.Scheme}
	if u.Scheme == "file" {
		q.Set("create_dir", "true")
		q.Set("metadata", "skip")
	}
	u.RawQuery = q.Encode()
	if u.Scheme == "file" {
		// Before fileblob, which would create a missing root 0777.
		if s.file, err = newFileBackend(fileDir(u), prefix, fsync); err != nil {
			return nil, err
		}
	}
	bucket, err := blob.OpenBucket(ctx, u.String())
	if err != nil {
		return nil, fmt.Errorf("objstore: open %s://%s: %w", u.Scheme, u.Host, err)
	}
	if prefix != "" {
		bucket = blob.PrefixedBucket(bucket, prefix)
	}
	s.bucket = bucket
	return s, nil
}

// blobStore is the Store over a gocloud bucket. For file:// the writes,
// deletes and the listing go through file (see file.go); reads go through the
// bucket.
type blobStore struct {
	bucket *blob.Bucket
	scheme string
	file   *fileBackend // nil unless scheme is "file"
	closed atomic.Bool
}

func (s *blobStore) check(key string) error {
	if s.closed.Load() {
		return ErrClosed
	}
	return ValidKey(key)
}

func (s *blobStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := s.check(key); err != nil {
		return err
	}
	if s.file != nil {
		return s.file.put(ctx, key, data, true)
	}
	// Upload, not WriteAll/NewWriter: azureblob's writer panics in Close when
	// the service refuses the conditional create.
	err := s.bucket.Upload(ctx, key, bytes.NewReader(data), s.writerOptions(len(data), true))
	switch gcerrors.Code(err) {
	case gcerrors.OK:
		return nil
	case gcerrors.FailedPrecondition, gcerrors.AlreadyExists:
		return fmt.Errorf("objstore: put-if-absent %q: %w", key, ErrExists)
	}
	return wrapErr("put-if-absent", key, err)
}

func (s *blobStore) Put(ctx context.Context, key string, data []byte) error {
	if err := s.check(key); err != nil {
		return err
	}
	if s.file != nil {
		return s.file.put(ctx, key, data, false)
	}
	err := s.bucket.Upload(ctx, key, bytes.NewReader(data), s.writerOptions(len(data), false))
	return wrapErr("put", key, err)
}

func (s *blobStore) writerOptions(size int, ifNotExist bool) *blob.WriterOptions {
	o := &blob.WriterOptions{IfNotExist: ifNotExist, ContentType: "application/octet-stream"}
	if s.scheme == "s3" && size >= s3PartBytesMin && size < s3SinglePutBytesMax {
		// One PutObject instead of a multipart upload: one request, and the
		// precondition is checked by the same request that writes. +1 so the
		// transfer manager sees EOF inside its first part.
		o.BufferSize = size + 1
	}
	return o
}

func (s *blobStore) Get(ctx context.Context, key string) ([]byte, error) {
	return s.read(ctx, "get", key, 0, -1)
}

func (s *blobStore) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	if offset < 0 {
		return nil, fmt.Errorf("%w: get-range %q: offset %d", ErrInvalid, key, offset)
	}
	if length == 0 {
		// Some backends refuse an empty range; still report a missing key.
		if err := s.check(key); err != nil {
			return nil, err
		}
		if _, err := s.bucket.Attributes(ctx, key); err != nil {
			return nil, wrapErr("get-range", key, err)
		}
		return []byte{}, nil
	}
	return s.read(ctx, "get-range", key, offset, length)
}

func (s *blobStore) read(ctx context.Context, op, key string, offset, length int64) ([]byte, error) {
	if err := s.check(key); err != nil {
		return nil, err
	}
	r, err := s.bucket.NewRangeReader(ctx, key, offset, length, nil)
	if err != nil {
		if gcerrors.Code(err) != gcerrors.NotFound {
			// S3 answers 416 for a range that starts at or past the end
			// (also offset 0 of an empty object); the contract is an empty
			// result for an existing object.
			if a, aerr := s.bucket.Attributes(ctx, key); aerr == nil && offset >= a.Size {
				return []byte{}, nil
			}
		}
		return nil, wrapErr(op, key, err)
	}
	defer r.Close()
	n := r.Size() - offset
	if length >= 0 && length < n {
		n = length
	}
	if n <= 0 {
		return []byte{}, nil
	}
	// Exactly n bytes: a growing buffer would zero more than it keeps, and
	// when its last read needs room it doubles (the caller caches what it
	// gets, so the spare capacity would stay alive with it).
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, wrapErr(op, key, err)
	}
	return buf, nil
}

func (s *blobStore) Delete(ctx context.Context, key string) error {
	if err := s.check(key); err != nil {
		return err
	}
	if s.file != nil {
		return s.file.remove(key)
	}
	return wrapErr("delete", key, s.bucket.Delete(ctx, key))
}

func (s *blobStore) List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if s.file != nil {
		// fileblob's walk is not in key order ("a/b" comes before "a-c").
		return s.file.list(ctx, prefix, fn)
	}
	it := s.bucket.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return wrapErr("list", prefix, err)
		}
		if obj.IsDir {
			continue
		}
		info := ObjectInfo{Key: obj.Key, Size: obj.Size}
		if !obj.ModTime.IsZero() {
			info.ModTime = obj.ModTime.UnixMilli()
		}
		if err := fn(info); err != nil {
			return err
		}
	}
}

func (s *blobStore) Close() error {
	if s.closed.Swap(true) {
		return ErrClosed
	}
	return s.bucket.Close()
}

// wrapErr maps a gocloud error to the package's errors: NotFound becomes
// ErrNotFound, anything else is wrapped with the operation and key.
func wrapErr(op, key string, err error) error {
	switch {
	case err == nil:
		return nil
	case gcerrors.Code(err) == gcerrors.NotFound:
		return fmt.Errorf("objstore: %s %q: %w", op, key, ErrNotFound)
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrExists), errors.Is(err, ErrInvalid):
		return err
	}
	return fmt.Errorf("objstore: %s %q: %w", op, key, err)
}
