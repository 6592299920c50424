package main

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/steadystate/steadystate/hive"
	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/job"
	"github.com/steadystate/steadystate/statedb"
)

// fakeKinds are kinds whose readiness the test sets, each change closing
// the channel that their watch returns.
type fakeKinds struct {
	mu    sync.Mutex
	ready []bool
	ch    chan struct{}
}

func (f *fakeKinds) set(i int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ready[i] = true
	close(f.ch)
	f.ch = make(chan struct{})
}

func (f *fakeKinds) in() kindsIn {
	var in kindsIn
	for i := range kinds {
		in.Kinds = append(in.Kinds, kindRuntime{
			order: i,
			ready: func(statedb.ReadTxn) error {
				f.mu.Lock()
				defer f.mu.Unlock()
				if !f.ready[i] {
					return fmt.Errorf("kind %d not ready", i)
				}
				return nil
			},
			watch: func(statedb.ReadTxn) <-chan struct{} {
				f.mu.Lock()
				defer f.mu.Unlock()
				return f.ch
			},
		})
	}
	return in
}

// gateFixture runs watchFirstRounds on fake kinds in a hive; open settles
// and tells whether the prunes' gate is open.
type gateFixture struct {
	kinds  *fakeKinds
	loaded *firstLoad
	rounds *firstRounds
}

func startGate(t *testing.T) *gateFixture {
	g := &gateFixture{
		kinds:  &fakeKinds{ready: make([]bool, len(kinds)), ch: make(chan struct{})},
		loaded: newFirstLoad(),
		rounds: newFirstRounds(),
	}
	db := statedb.New()
	h := hive.New(cell.Invoke(func(jobs job.Group) error {
		return watchFirstRounds(jobs, db, g.kinds.in(), g.loaded, g.rounds)
	}))
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return g
}

func (g *gateFixture) open() bool {
	synctest.Wait()
	select {
	case <-g.rounds.Done():
		return true
	default:
		return false
	}
}

// The prunes' gate (firstRounds) opens once the first desired state is
// loaded and every table is ready, not before: not before the load with
// every table ready, not after it with one table not ready.
func TestFirstRoundsWaitForEveryTable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := startGate(t)
		for i := range kinds {
			g.kinds.set(i)
		}
		if g.open() {
			t.Fatal("the prunes' gate opened before the first load")
		}
		g.loaded.close()
		if !g.open() {
			t.Fatal("the prunes' gate stayed closed after the load with every table ready")
		}
	})
	synctest.Test(t, func(t *testing.T) {
		g := startGate(t)
		g.loaded.close()
		for i := range len(kinds) - 1 {
			g.kinds.set(i)
		}
		if g.open() {
			t.Fatal("the prunes' gate opened with a table not ready")
		}
		g.kinds.set(len(kinds) - 1)
		if !g.open() {
			t.Fatal("the prunes' gate stayed closed with every table ready")
		}
	})
}
