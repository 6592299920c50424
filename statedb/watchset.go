package statedb

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"
)

// WatchSet is a set of watch channels (from the ...Watch reads, or any
// channel that is closed to signal) to wait on together: Wait returns once
// any of them closes, and says which did. A program that watches several
// queries adds their channels, waits, and reads again the queries whose
// channels closed.
//
// Waiting starts no goroutine for sets of up to 65535 channels (a larger
// set uses one per 65535). It is safe for concurrent use; a channel added
// while a Wait is in progress counts from the next Wait.
type WatchSet struct {
	mu    sync.Mutex
	chans []<-chan struct{}
	// index holds the channels of large sets, to keep Add free of
	// duplicates without a scan.
	index map[<-chan struct{}]struct{}
}

// watchSetIndexFrom is the size from which a WatchSet keeps an index.
const watchSetIndexFrom = 16

// maxSelectCases is the most cases one reflect.Select takes (its limit is
// 65536); one of them is the context's.
const maxSelectCases = 65535

// NewWatchSet returns an empty set.
func NewWatchSet() *WatchSet { return &WatchSet{} }

// Add adds channels to the set. A channel already in the set is kept once;
// nil channels, which never close, are ignored.
func (ws *WatchSet) Add(chans ...<-chan struct{}) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, ch := range chans {
		if ch == nil || ws.has(ch) {
			continue
		}
		ws.chans = append(ws.chans, ch)
		if ws.index != nil {
			ws.index[ch] = struct{}{}
		} else if len(ws.chans) >= watchSetIndexFrom {
			ws.index = make(map[<-chan struct{}]struct{}, 2*len(ws.chans))
			for _, c := range ws.chans {
				ws.index[c] = struct{}{}
			}
		}
	}
}

// Has tells whether ch is in the set.
func (ws *WatchSet) Has(ch <-chan struct{}) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.has(ch)
}

func (ws *WatchSet) has(ch <-chan struct{}) bool {
	if ws.index != nil {
		_, ok := ws.index[ch]
		return ok
	}
	return slices.Contains(ws.chans, ch)
}

// Len returns the number of channels in the set.
func (ws *WatchSet) Len() int {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return len(ws.chans)
}

// Clear removes every channel.
func (ws *WatchSet) Clear() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	clear(ws.chans)
	ws.chans, ws.index = ws.chans[:0], nil
}

// Wait blocks until a channel of the set is closed or ctx ends. With
// settle > 0 it then waits settle longer (or until ctx ends), so that
// channels closed by the same burst of commits are reported together. It
// returns the channels it found closed, which it removes from the set.
//
// The error is non-nil only when no channel was closed: it wraps
// ctx.Err() when ctx ended first, and ErrWatchSetEmpty, at once, for a
// set without channels. A ctx that ends while settling only cuts the
// settling short.
func (ws *WatchSet) Wait(ctx context.Context, settle time.Duration) ([]<-chan struct{}, error) {
	ws.mu.Lock()
	chans := slices.Clone(ws.chans)
	ws.mu.Unlock()
	if len(chans) == 0 {
		return nil, ErrWatchSetEmpty
	}
	closed := pollClosed(nil, chans)
	if len(closed) == 0 {
		if err := waitAny(ctx, chans); err != nil {
			return nil, fmt.Errorf("statedb: waiting on %d watch channels: %w", len(chans), err)
		}
		if settle <= 0 {
			closed = pollClosed(closed, chans)
		}
	}
	if settle > 0 {
		t := time.NewTimer(settle)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		closed = pollClosed(closed[:0], chans)
	}
	ws.remove(closed)
	return closed, nil
}

// remove drops the given channels from the set.
func (ws *WatchSet) remove(chans []<-chan struct{}) {
	if len(chans) == 0 {
		return
	}
	gone := func(ch <-chan struct{}) bool { return slices.Contains(chans, ch) }
	if len(chans) > watchSetIndexFrom {
		set := make(map[<-chan struct{}]bool, len(chans))
		for _, ch := range chans {
			set[ch] = true
		}
		gone = func(ch <-chan struct{}) bool { return set[ch] }
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, ch := range chans {
		if ws.index != nil {
			delete(ws.index, ch)
		}
	}
	ws.chans = slices.DeleteFunc(ws.chans, gone)
	if ws.index != nil && len(ws.chans) < watchSetIndexFrom/2 {
		ws.index = nil
	}
}

// pollClosed appends to dst the channels of chans that are closed, without
// blocking.
func pollClosed(dst, chans []<-chan struct{}) []<-chan struct{} {
	for _, ch := range chans {
		select {
		case <-ch:
			dst = append(dst, ch)
		default:
		}
	}
	return dst
}

// waitAny blocks until a channel of chans is closed (nil) or ctx ends (its
// error). Sets of up to four channels use a plain select; larger ones
// reflect.Select, in chunks of maxSelectCases, each but the first in a
// goroutine of its own.
func waitAny(ctx context.Context, chans []<-chan struct{}) error {
	done := ctx.Done()
	switch len(chans) {
	case 1:
		select {
		case <-chans[0]:
		case <-done:
			return ctx.Err()
		}
		return nil
	case 2:
		select {
		case <-chans[0]:
		case <-chans[1]:
		case <-done:
			return ctx.Err()
		}
		return nil
	case 3:
		select {
		case <-chans[0]:
		case <-chans[1]:
		case <-chans[2]:
		case <-done:
			return ctx.Err()
		}
		return nil
	case 4:
		select {
		case <-chans[0]:
		case <-chans[1]:
		case <-chans[2]:
		case <-chans[3]:
		case <-done:
			return ctx.Err()
		}
		return nil
	}
	if len(chans) <= maxSelectCases {
		if !selectChunk(done, chans) {
			return ctx.Err()
		}
		return nil
	}
	// More channels than one select takes: one goroutine per further
	// chunk, all stopped (and waited for) when the first chunk fires.
	stop := make(chan struct{})
	fired := make(chan struct{}, 1)
	var wg sync.WaitGroup
	// The first chunk leaves a case for fired, which the others signal.
	first := chans[: maxSelectCases-1 : maxSelectCases-1]
	for start := len(first); start < len(chans); start += maxSelectCases {
		chunk := chans[start:min(start+maxSelectCases, len(chans))]
		wg.Go(func() {
			if selectChunk(stop, chunk) {
				select {
				case fired <- struct{}{}:
				default:
				}
			}
		})
	}
	ok := selectChunk(done, append(first, fired))
	close(stop)
	wg.Wait()
	if !ok {
		return ctx.Err()
	}
	return nil
}

// selectChunk blocks until a channel of chans is closed (true) or stop is
// (false).
func selectChunk(stop <-chan struct{}, chans []<-chan struct{}) bool {
	cases := make([]reflect.SelectCase, len(chans)+1)
	cases[0] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(stop)}
	for i, ch := range chans {
		cases[i+1] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)}
	}
	chosen, _, _ := reflect.Select(cases)
	return chosen != 0
}
