package reconcilertest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// Reconciler is a reconciler running in the background of a test. It is
// a reconciler.Reconciler (Prune and WaitUntilReconciled work as usual;
// Run is already running) with helpers that wait within Timeout.
type Reconciler[Obj any] struct {
	reconciler.Reconciler[Obj]

	tb     testing.TB
	db     *statedb.DB
	table  statedb.Table[Obj]
	cancel context.CancelFunc
	done   chan struct{} // closed when Run has returned
	err    error         // what Run returned; read after done
	stop   sync.Once
}

// Start creates a reconciler from cfg with reconciler.New and runs it in a
// goroutine until Stop is called or tb ends, whichever comes first. A bad
// cfg fails tb at once.
func Start[Obj any](tb testing.TB, db *statedb.DB, cfg reconciler.Config[Obj]) *Reconciler[Obj] {
	tb.Helper()
	rec, err := reconciler.New(db, cfg)
	if err != nil {
		tb.Fatalf("reconcilertest.Start: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Reconciler[Obj]{
		Reconciler: rec,
		tb:         tb,
		db:         db,
		table:      cfg.Table,
		cancel:     cancel,
		done:       make(chan struct{}),
	}
	go func() {
		defer close(r.done)
		r.err = rec.Run(ctx)
	}()
	tb.Cleanup(r.Stop)
	return r
}

// Stop cancels Run's context and waits for Run to return, so that no
// goroutine of the reconciler outlives the call. It fails the test if Run
// returned an error or did not return within Timeout. Stop may be called
// more than once; Start registers it with tb.Cleanup.
func (r *Reconciler[Obj]) Stop() {
	r.tb.Helper()
	r.stop.Do(func() {
		r.cancel()
		timeout := time.NewTimer(Timeout)
		defer timeout.Stop()
		select {
		case <-r.done:
			if r.err != nil {
				r.tb.Errorf("reconcilertest: Run returned %v", r.err)
			}
		case <-timeout.C:
			r.tb.Errorf("reconcilertest: Run did not return within %v of its context's cancellation", Timeout)
		}
	})
}

// Stopped returns a channel that is closed once Run has returned.
func (r *Reconciler[Obj]) Stopped() <-chan struct{} { return r.done }

// Reconciled waits until the reconciler has attempted every change
// committed to its table so far and returns WaitUntilReconciled's error:
// nil, or one wrapping reconciler.ErrNotAllReconciled when objects failed
// their latest attempt. It fails the test if that takes longer than
// Timeout, or if Run has stopped.
func (r *Reconciler[Obj]) Reconciled() error {
	r.tb.Helper()
	want := r.table.Revision(r.db.ReadTxn())
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	go func() {
		// A stopped reconciler never gets there: end the wait at once.
		select {
		case <-r.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	reached, err := r.WaitUntilReconciled(ctx, want)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		r.tb.Fatalf("reconcilertest: the reconciler did not reach revision %d within %v (it is at %d)", want, Timeout, reached)
	case errors.Is(err, context.Canceled):
		r.tb.Fatalf("reconcilertest: the reconciler stopped at revision %d before reaching %d", reached, want)
	}
	return err
}
