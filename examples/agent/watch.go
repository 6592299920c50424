package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	"golang.org/x/sys/unix"

	"github.com/steadystate/steadystate/hive/cell"
)

// How the desired file is watched, and why a half-written file is never
// applied:
//
//   - fsnotify watches the file's directory, not the file: an editor that
//     saves by renaming a new file over the old one replaces the inode,
//     and a ConfigMap-style update swaps a symlink; both are events in the
//     directory. Any event there (re)starts the settle timer.
//   - The file is read once it has been quiet for --settle-time: no event
//     for that long and a modification time at least that old.
//   - After parsing, the file is looked at again: it must still be the
//     same file (device, inode, size, modification time) with the same
//     bytes, and no process may hold it open for writing (a read lease,
//     fcntl F_SETLEASE, is refused while one does; where a lease cannot be
//     taken, the settle time alone guards). Otherwise the read is put off
//     by another settle time: nothing is applied and nothing is reported.
//   - A slow poll (--reload-interval) reads the file too, for what
//     notifications miss: a directory removed and made again (the watch is
//     added back), a file system without notifications, a symlink whose
//     target lives elsewhere.
//
// Writing the file via rename (write a temporary file in the same
// directory, then rename it over the desired file) is always safe. A
// writer that closes the file between pieces and pauses for longer than
// the settle time can still be read half-way; an empty or whitespace-only
// file is rejected (write `{}` to remove all desired state).

// snapshot is one read of the desired file.
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
	if s.data, err = io.ReadAll(f); err != nil {
		return snapshot{}, false, err
	}
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

// watchFile calls load when path may have changed: at start, after each
// burst of events in its directory has settled, every pollInterval, and
// when reload receives. load returns true when the file was not ready
// (still being written): it is called again after another settle time.
func watchFile(ctx context.Context, path string, settle, pollInterval time.Duration, reload <-chan struct{},
	health cell.Health, log *slog.Logger, load func() (retry bool)) error {
	dir := filepath.Dir(path)
	w, err := fsnotify.NewWatcher()
	if err != nil {
		health.Degraded("watching the desired file's directory failed; polling every "+pollInterval.String(), err)
	}
	var events <-chan fsnotify.Event
	var errs <-chan error
	if w != nil {
		defer w.Close()
		events, errs = w.Events, w.Errors
	}
	watching := false
	watch := func() {
		if w == nil || watching {
			return
		}
		if err := w.Add(dir); err == nil {
			watching = true
		}
	}
	watch()

	timer := time.NewTimer(0) // the first load at once
	defer timer.Stop()
	armed := true
	arm := func(d time.Duration) {
		timer.Reset(d)
		armed = true
	}
	poll := time.NewTicker(pollInterval)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if ev.Name == dir && ev.Has(fsnotify.Remove|fsnotify.Rename) {
				watching = false // the kernel dropped the watch; the poll adds it back
			}
			arm(settle)
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			// An overflow means events were lost: read again after settling.
			log.Debug("Watching the desired file", "error", err)
			arm(settle)
		case <-reload:
			arm(0)
		case <-poll.C:
			watch()
			if !armed && load() {
				arm(settle)
			}
		case <-timer.C:
			armed = false
			watch()
			if load() {
				arm(settle)
			}
		}
	}
}
