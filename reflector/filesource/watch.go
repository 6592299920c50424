package filesource

import (
	"context"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/steadystate/steadystate/reflector"
)

// watch reads the file at once, after each burst of events in its
// directory has settled (at once after a rename into place), every
// PollInterval, and on Reload; each new good version goes to send (if
// set; false from it ends the watch). It returns nil once until (if set)
// says so, or ctx's error when ctx ends.
func (s *Source[In]) watch(ctx context.Context, epoch uint64, send func([]reflector.Event[In], uint64) bool, until func() bool) error {
	s.watches.Add(1)
	path := s.cfg.Path
	dir := filepath.Dir(path)
	w, err := fsnotify.NewWatcher()
	if err != nil {
		s.cfg.Logger.Warn("Watching the desired file's directory failed; polling", "file", path, "every", s.cfg.PollInterval, "error", err)
	}
	var events <-chan fsnotify.Event
	var errs <-chan error
	if w != nil {
		defer w.Close()
		events, errs = w.Events, w.Errors
	}
	watching := false
	add := func() {
		if w != nil && !watching && w.Add(dir) == nil {
			watching = true
		}
	}
	add()

	timer := time.NewTimer(0) // the first read at once
	defer timer.Stop()
	armed, renamed := true, false
	arm := func(d time.Duration) {
		timer.Reset(d)
		armed = true
	}
	poll := time.NewTicker(s.cfg.PollInterval)
	defer poll.Stop()
	// load reads the file; it returns false when the watch must end.
	load := func(wasRenamed bool) bool {
		evs, rev, retry := s.read(epoch, wasRenamed, send != nil)
		if retry {
			arm(s.cfg.SettleTime)
		}
		if len(evs) > 0 && send != nil && !send(evs, rev) {
			return false
		}
		return until == nil || !until()
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			switch {
			case ev.Name == dir && ev.Has(fsnotify.Remove|fsnotify.Rename):
				watching = false // the kernel dropped the watch; the poll adds it back
				arm(s.cfg.SettleTime)
			case ev.Name == path && ev.Has(fsnotify.Create):
				// Renamed into place (or created): whole, unless a writer
				// still holds it, which the read sees.
				renamed = true
				arm(0)
			default:
				renamed = false
				arm(s.cfg.SettleTime)
			}
		case _, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			// An overflow means events were lost: read again after settling.
			arm(s.cfg.SettleTime)
		case <-s.reload:
			arm(0)
		case <-poll.C:
			add()
			if !armed && !load(false) {
				return nil
			}
		case <-timer.C:
			armed = false
			add()
			r := renamed
			renamed = false
			if !load(r) {
				return nil
			}
		}
	}
}
