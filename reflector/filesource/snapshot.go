package filesource

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// snapshot is one read of the file.
type snapshot struct {
	data []byte
	info os.FileInfo
}

// stillSame reports whether path is still the file s read, with the same
// bytes (s.same of a new read), and whether some process holds it open for
// writing. It compares as it reads, a block at a time, rather than reading
// the file whole again: a second 3.6 MB buffer per version of a large file
// was a tenth of a start's allocation, and its pages were faulted in only
// to be compared once.
func (s snapshot) stillSame(path string) (same, writing bool, err error) {
	f, err := openRead(path)
	if err != nil {
		return false, false, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return false, false, err
	}
	if !info.Mode().IsRegular() {
		return false, false, fmt.Errorf("%s: not a regular file", path)
	}
	writing = openForWriting(f)
	if !os.SameFile(s.info, info) || s.info.Size() != info.Size() || !s.info.ModTime().Equal(info.ModTime()) {
		return false, writing, nil
	}
	buf := make([]byte, 64<<10)
	rest := s.data
	for {
		n, err := f.Read(buf)
		if n > len(rest) || !bytes.Equal(buf[:n], rest[:n]) {
			return false, writing, nil
		}
		rest = rest[n:]
		if errors.Is(err, io.EOF) {
			return len(rest) == 0, writing, nil
		}
		if err != nil {
			return false, writing, err
		}
	}
}

// openRead opens path for reading without blocking: a FIFO put in the
// file's place would block an open (and the source's lock) until some
// process opened it for writing; so it is opened, found not regular and
// refused. (On a regular file O_NONBLOCK changes nothing.)
func openRead(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK, 0)
}

// readSnapshot reads path and stats what it read. writing says that some
// process holds the file open for writing (false when that cannot be
// told).
func readSnapshot(path string) (s snapshot, writing bool, err error) {
	f, err := openRead(path)
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

// ReadFile reads path as a Source reads its file: a regular file only (a
// FIFO or a device put in its place is refused, never waited on). A
// program that reads the file ahead of the source (to decode it while it
// starts, say) reads what the source will compare with its own read.
func ReadFile(path string) ([]byte, error) {
	s, _, err := readSnapshot(path)
	return s.data, err
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
