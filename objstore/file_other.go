//go:build !linux

package objstore

import "os"

// createAnon is Linux only (O_TMPFILE); elsewhere put-if-absent writes a
// named temporary file and links it.
func createAnon(dir, path string, data []byte, sync bool) (ok bool, err error) { return false, nil }

// datasync is fsync where fdatasync is not available.
func datasync(f *os.File) error { return f.Sync() }
