package objstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// createAnon writes data into an unnamed file in dir (open(2) with
// O_TMPFILE), fsyncs it when sync is set, and gives it the name path with
// linkat(2): the file appears whole or not at all, and linkat fails with
// EEXIST if path exists, atomically across processes — the link(2) of the
// named temporary file without creating and removing that name, two
// directory updates fewer per object. ok is false when the file system or
// the kernel cannot do it (no O_TMPFILE, no /proc to link from); nothing
// was created then and the caller takes the named-temporary path.
func createAnon(dir, path string, data []byte, sync bool) (ok bool, err error) {
	fd, err := unix.Open(dir, unix.O_RDWR|unix.O_TMPFILE|unix.O_CLOEXEC, fileMode)
	if err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EINVAL) {
			return false, nil
		}
		return true, err
	}
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		return true, err
	}
	if sync {
		if err := f.Sync(); err != nil {
			return true, err
		}
	}
	// linkat with AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH; the /proc link
	// of the descriptor does not.
	proc := "/proc/self/fd/" + strconv.Itoa(fd)
	err = unix.Linkat(unix.AT_FDCWD, proc, unix.AT_FDCWD, path, unix.AT_SYMLINK_FOLLOW)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrExist):
		return true, ErrExists
	case errors.Is(err, fs.ErrNotExist):
		if _, serr := os.Stat(proc); serr != nil {
			return false, nil // no /proc
		}
	}
	return true, fmt.Errorf("link: %w", err)
}

// datasync is fdatasync(2): the data and the metadata needed to read it
// (the size), not the times.
func datasync(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}
