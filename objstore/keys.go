package objstore

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// KeyBytesMax is the longest key in bytes (S3's limit).
const KeyBytesMax = 1024

// reservedPrefix starts the names of the store's own files (the file
// backend's temporary files, next to their target); no key segment may.
const reservedPrefix = ".lakegate"

// ValidKey reports whether key is a valid object key, and if not why, wrapped
// in ErrInvalid. A valid key:
//
//   - is 1..KeyBytesMax bytes of UTF-8;
//   - has no leading or trailing '/', no empty, "." or ".." segment;
//   - has no control character and none of \ < > : " | ? * (not portable to
//     every file system);
//   - does not contain "__0x" (gocloud's escape marker) nor end in ".attrs"
//     (fileblob's sidecar suffix);
//   - has no path segment starting with ".lakegate" (reserved for the
//     store's own temporary files).
//
// These rules make a key map one-to-one to the same object name on every
// backend, so a bucket written through one backend reads the same through
// another (e.g. a file:// directory synced to S3).
func ValidKey(key string) error {
	bad := func(why string) error {
		return fmt.Errorf("%w: key %q: %s", ErrInvalid, key, why)
	}
	switch {
	case key == "":
		return bad("empty")
	case len(key) > KeyBytesMax:
		return bad(fmt.Sprintf("longer than %d bytes", KeyBytesMax))
	case !utf8.ValidString(key):
		return bad("not UTF-8")
	case strings.Contains(key, "__0x"):
		return bad(`contains "__0x"`)
	case strings.HasSuffix(key, ".attrs"):
		return bad(`ends in ".attrs"`)
	}
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return bad("empty, \".\" or \"..\" path segment")
		}
		if strings.HasPrefix(seg, reservedPrefix) {
			return bad("path segment starts with reserved " + reservedPrefix)
		}
	}
	for _, r := range key {
		if r < 0x20 || r == 0x7f || strings.ContainsRune(`\<>:"|?*`, r) {
			return bad(fmt.Sprintf("character %q", r))
		}
	}
	return nil
}
