package filesource

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// snapshot is one read of the file.
type snapshot struct {
	data []byte
	info os.FileInfo
}

// same reports whether two reads saw the same file with the same bytes.
func (s snapshot) same(o snapshot) bool {
	return os.SameFile(s.info, o.info) && s.info.Size() == o.info.Size() &&
		s.info.ModTime().Equal(o.info.ModTime()) && bytes.Equal(s.data, o.data)
}

// readSnapshot reads path and stats what it read. writing says that some
// process holds the file open for writing (false when that cannot be
// told).
func readSnapshot(path string) (s snapshot, writing bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return snapshot{}, false, err
	}
	defer f.Close()
	if s.info, err = f.Stat(); err != nil {
		return snapshot{}, false, err
	}
	if !s.info.Mode().IsRegular() {
		return snapshot{}, false, fmt.Errorf("%s: not a regular file", path)
	}
	writing = openForWriting(f)
	// Read into a buffer of the file's size (a large file read with
	// io.ReadAll is copied a dozen times as its buffer grows).
	buf := bytes.NewBuffer(make([]byte, 0, s.info.Size()+bytes.MinRead))
	if _, err := buf.ReadFrom(f); err != nil {
		return snapshot{}, false, err
	}
	s.data = buf.Bytes()
	return s, writing, nil
}

// openForWriting reports whether another process holds f's file open for
// writing: Linux refuses a read lease then (EAGAIN). A lease needs the
// file's owner or CAP_LEASE and a file system that has leases; without
// them this reports false. The lease is dropped at once, so a writer
// opening the file meanwhile waits microseconds at most.
func openForWriting(f *os.File) bool {
	fd := f.Fd()
	if _, err := unix.FcntlInt(fd, unix.F_SETLEASE, unix.F_RDLCK); err != nil {
		return errors.Is(err, unix.EAGAIN)
	}
	_, _ = unix.FcntlInt(fd, unix.F_SETLEASE, unix.F_UNLCK)
	return false
}
