// Package reconcilertest runs a reconciler in the background of a test or
// benchmark of an example target.
package reconcilertest

import (
	"context"
	"sync"
	"testing"

	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// Start creates a reconciler for cfg and runs it until stop is called or tb
// ends, whichever comes first; stop waits for Run to return and may be
// called more than once. A bad cfg fails tb.
func Start[Obj any](tb testing.TB, db *statedb.DB, cfg reconciler.Config[Obj]) (r reconciler.Reconciler[Obj], stop func()) {
	tb.Helper()
	r, err := reconciler.New(db, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := r.Run(ctx); err != nil {
			tb.Error(err)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	tb.Cleanup(stop)
	return r, stop
}
