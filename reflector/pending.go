package reflector

import "time"

// pending holds the events received and not yet committed, in the order
// they came (their revisions never decrease), and what is known of the
// source's revisions: events[:ready] are of whole revisions (at or below
// complete) and may be committed; the rest are of the latest revision,
// which may still have events to come.
type pending[In any] struct {
	events   []timedEvent[In]
	ready    int
	complete uint64    // every event at or below it was received
	last     uint64    // the revision of the latest event received
	lastAt   time.Time // when it came, moved on by the time the reflector spent committing since
	quiet    uint64    // the revision last made whole by quiet (expire)
	// latest is take's scratch map: the index of each key's latest event.
	latest map[tableKey]int
}

type timedEvent[In any] struct {
	Event[In]
	at time.Time
}

type tableKey struct{ table, key string }

// reset forgets every pending event: a list at rev holds every change up
// to it.
func (p *pending[In]) reset(rev uint64) {
	clear(p.events)
	p.events, p.ready = p.events[:0], 0
	p.complete, p.last, p.quiet = rev, rev, 0
}

// What add did with an event.
type addResult uint8

const (
	added addResult = iota
	stale           // of a revision known whole, or older than the latest: dropped
	late            // of the revision quiet made whole: the source paused within it
)

// add takes a Put or Delete.
func (p *pending[In]) add(ev Event[In], now time.Time) addResult {
	if ev.Revision == p.quiet && ev.Revision == p.last {
		return late
	}
	if ev.Revision <= p.complete || ev.Revision < p.last {
		return stale
	}
	if ev.Revision > p.last {
		p.completeTo(ev.Revision - 1) // the revisions before it are whole
		p.last = ev.Revision
	}
	p.events = append(p.events, timedEvent[In]{Event: ev, at: now})
	p.lastAt = now
	return added
}

// busy says that the reflector did not listen for d (a commit): quiet is
// measured only while it listens, so a slow commit never makes the open
// revision look whole.
func (p *pending[In]) busy(d time.Duration) {
	if p.ready < len(p.events) {
		p.lastAt = p.lastAt.Add(d)
	}
}

// progress records the source's word that every event at or below rev was
// sent.
func (p *pending[In]) progress(rev uint64) {
	if rev >= p.quiet {
		p.quiet = 0 // what comes at that revision now is a duplicate
	}
	p.completeTo(rev)
}

// completeTo records that every event at or below rev was received.
func (p *pending[In]) completeTo(rev uint64) {
	if rev <= p.complete {
		return
	}
	p.complete = rev
	for p.ready < len(p.events) && p.events[p.ready].Revision <= rev {
		p.ready++
	}
}

// expire makes the latest revision whole once the source has been quiet
// for interval after its last event.
func (p *pending[In]) expire(now time.Time, interval time.Duration) {
	if p.ready < len(p.events) && !now.Before(p.lastAt.Add(interval)) {
		p.completeTo(p.last)
		p.quiet = p.last
	}
}

// due tells whether the ready events have waited interval (the oldest is
// the first).
func (p *pending[In]) due(now time.Time, interval time.Duration) bool {
	return p.ready > 0 && !now.Before(p.events[0].at.Add(interval))
}

// deadline is when a timer must next look at the batch: when the oldest
// ready event has waited interval, or (if quiet ends a revision) when the
// latest revision becomes whole by quiet; false if nothing is pending.
func (p *pending[In]) deadline(interval time.Duration, quiet bool) (time.Time, bool) {
	var d time.Time
	ok := false
	if p.ready > 0 {
		d, ok = p.events[0].at.Add(interval), true
	}
	if quiet && p.ready < len(p.events) {
		if q := p.lastAt.Add(interval); !ok || q.Before(d) {
			d, ok = q, true
		}
	}
	return d, ok
}

// take removes the ready events and returns them coalesced: the latest
// event of each key, in the order of those latest events; and when the
// oldest of them came.
func (p *pending[In]) take() ([]Event[In], time.Time) {
	if p.ready == 0 {
		return nil, time.Time{}
	}
	if p.latest == nil {
		p.latest = map[tableKey]int{}
	}
	for i, ev := range p.events[:p.ready] {
		p.latest[tableKey{ev.Table, ev.Key}] = i
	}
	out := make([]Event[In], 0, len(p.latest))
	for i, ev := range p.events[:p.ready] {
		if p.latest[tableKey{ev.Table, ev.Key}] == i {
			out = append(out, ev.Event)
		}
	}
	oldest := p.events[0].at
	n := copy(p.events, p.events[p.ready:])
	clear(p.events[n:])
	p.events, p.ready = p.events[:n], 0
	// What a burst grew is not kept for good: memory follows live data.
	if len(p.latest) > shrinkAbove {
		p.latest = nil
	} else {
		clear(p.latest)
	}
	if cap(p.events) > shrinkAbove && n < cap(p.events)/4 {
		p.events = append([]timedEvent[In](nil), p.events...)
	}
	return out, oldest
}

// shrinkAbove is the size above which pending's buffers are given back
// after a burst.
const shrinkAbove = 1024
