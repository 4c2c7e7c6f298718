//go:build !linux

package objstore

// createAnon is Linux only (O_TMPFILE); elsewhere put-if-absent writes a
// named temporary file and links it.
func createAnon(dir, path string, data []byte, sync bool) (ok bool, err error) { return false, nil }
