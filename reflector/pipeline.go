package reflector

import (
	"runtime"
	"runtime/debug"
	"sync"

	"github.com/steadystate/steadystate/statedb"
)

// A first list's Puts into an empty table (a start's, 50,000 routes) are
// prepared (Filter, Transform, primary key: a quarter of the time of its
// writes) on a goroutine of their own, a chunk ahead of the writes, on the
// core that was idle meanwhile: putRun.

// pipelineAbove is the least number of a table's Puts that putRun
// prepares ahead; fewer are prepared as they are written. (A variable
// for tests.)
var pipelineAbove = 2048

// pipelineChunk is how many Puts a prepared chunk holds, and
// pipelineSlots how many chunks are prepared ahead at most.
const (
	pipelineChunk = 256
	pipelineSlots = 4
)

// putRun applies Puts evs, all of this fill's table, and returns how many
// objects they wrote and how many values were rejected: those of a first
// list into an empty table prepared ahead on a goroutine of its own (see
// above), in order, with the same outcome as one put after the other.
// Filter and Transform run on that goroutine (their panics reject the
// value, as in put); a panic in the primary index's key, or
// runtime.Goexit, is raised on the caller's goroutine when its Put comes.
func (f *fill[In, Obj]) putRun(txn statedb.WriteTxn, evs []Event[In]) (written, rejected int) {
	f.decideFast(txn)
	if !f.fast || len(evs) < pipelineAbove || runtime.GOMAXPROCS(0) < 2 {
		for _, ev := range evs {
			n, r := f.put(txn, ev.Key, ev.Value)
			written += n
			if r {
				rejected++
			}
		}
		return written, rejected
	}
	type slot struct {
		preps    []prepared[Obj]
		n        int  // how many of the chunk's Puts were prepared
		panicked any  // why the next was not: a panic,
		exited   bool // or runtime.Goexit
	}
	var slots [pipelineSlots]slot
	for i := range slots {
		slots[i].preps = make([]prepared[Obj], pipelineChunk)
	}
	chunks := (len(evs) + pipelineChunk - 1) / pipelineChunk
	ready := make(chan int, pipelineSlots) // chunks prepared, in order
	free := make(chan int, pipelineSlots)  // slots to prepare into
	for i := range pipelineSlots {
		free <- i
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	defer func() {
		close(quit) // a panic or the end: the goroutine stops, and is waited for
		wg.Wait()
	}()
	wg.Go(func() {
		for c := range chunks {
			select {
			case <-quit:
				return // the caller stopped: prepare no more
			default:
			}
			var i int
			select {
			case i = <-free:
			case <-quit:
				return
			}
			sl := &slots[i]
			part := evs[c*pipelineChunk : min(len(evs), (c+1)*pipelineChunk)]
			func() {
				sl.n, sl.panicked, sl.exited = 0, nil, false
				handed := false
				defer func() {
					if handed {
						return
					}
					// A panic, or runtime.Goexit in Filter or Transform
					// (recover returns nil then, and this goroutine ends
					// after this function): the caller does the same at
					// its Put, as one put after the other would have.
					if sl.panicked = recover(); sl.panicked != nil {
						f.log.Error("Preparing a value of the source panicked; the commit raises it", "table", f.spec.Table, "key", part[sl.n].Key, "panic", sl.panicked, "stack", string(debug.Stack()))
					} else {
						sl.exited = true
					}
					ready <- i
				}()
				for k, ev := range part {
					sl.preps[k] = f.prepare(ev.Key, ev.Value)
					sl.n = k + 1
				}
				handed = true
				ready <- i
			}()
			if sl.n < len(part) {
				return
			}
		}
	})
	for c := range chunks {
		i := <-ready
		sl := &slots[i]
		part := evs[c*pipelineChunk : min(len(evs), (c+1)*pipelineChunk)]
		for k, ev := range part {
			if k == sl.n {
				if sl.exited {
					runtime.Goexit()
				}
				panic(sl.panicked)
			}
			p := sl.preps[k]
			sl.preps[k] = prepared[Obj]{} // let go of the object
			n, r := f.putPrepared(txn, ev.Key, ev.Value, p)
			written += n
			if r {
				rejected++
			}
		}
		free <- i
	}
	return written, rejected
}

// prepared is what a Put's value makes before anything is written, with
// no table: Filter's verdict, Transform's object and its primary key.
type prepared[Obj any] struct {
	keep bool
	obj  Obj
	pk   string
	err  error // Filter's or Transform's: the value is rejected
}

// prepare runs Filter and Transform on a Put's value and takes the
// object's primary key.
func (f *fill[In, Obj]) prepare(key string, v In) (p prepared[Obj]) {
	p.keep, p.err = f.filter(key, v)
	if p.err != nil || !p.keep {
		return p
	}
	if p.obj, p.err = f.transform(key, v); p.err == nil {
		p.pk = string(f.spec.Writer.Table.PrimaryKey(p.obj))
	}
	return p
}
