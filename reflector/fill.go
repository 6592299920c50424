package reflector

import (
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/internal/later"
	"github.com/steadystate/steadystate/internal/names"
	"github.com/steadystate/steadystate/internal/shrink"
	"github.com/steadystate/steadystate/statedb"
)

// filler fills one table of a reflector; the reflector calls it from Run's
// goroutine only, within a write transaction that locks its table. Every
// change to its memory is undone by rollback unless keep follows.
type filler[In any] interface {
	name() string
	meta() statedb.TableMeta
	register(db *statedb.DB, reflector string)
	// put and del apply one event of key; they return how many objects
	// they wrote and whether the value was rejected.
	put(txn statedb.WriteTxn, key string, v In) (written int, rejected bool)
	// putRun applies a list's Puts, all of the fill's table, as put would
	// one after the other; it returns how many objects they wrote and how
	// many values were rejected.
	putRun(txn statedb.WriteTxn, evs []Event[In]) (written, rejected int)
	del(txn statedb.WriteTxn, key string) (written int)
	// known returns every key stored or rejected, for a relist's deletes.
	known() iter.Seq[string]
	initialized(txn statedb.WriteTxn) // marks the table initialized, once
	// begin starts a commit of about expect events; initial: a list's,
	// whose Puts have distinct keys.
	begin(expect int, initial bool)
	settle()   // waits for the maps a first list deferred (see putNew)
	keep()     // the commit succeeded: forget the undo log
	rollback() // the commit did not happen: undo the memory's changes
	objects() int
	rejections() []Rejection
}

// kept is what the reflector remembers of one source key: its latest
// accepted value and the primary key of its object.
type kept[In any] struct {
	val In
	pk  string
}

// fill is the filler of an Into.
type fill[In, Obj any] struct {
	spec    Into[In, Obj]
	log     *slog.Logger
	init    func(statedb.WriteTxn) // nil once a commit marked the table initialized
	initNow bool                   // the commit under way marks it

	held map[string]kept[In] // by source key
	// owners are, by primary key, the source keys whose value has that
	// primary key, the most recently written last: its value is in the
	// table.
	owners   map[string][]string
	rejected map[string]string // by source key: why its latest value was rejected
	undo     []undoEntry[In]
	// fresh: the memory was empty when the commit under way began (the
	// first list), so a rollback empties it again and nothing is logged.
	fresh bool
	// peaks are the most keys each map held after a commit since it was
	// made (see shrink.Map: memory follows live data).
	peaks struct{ held, owners, rejected int }

	// A first list into an empty table is written without held and
	// owners (see putNew): its keys are staged, and the maps are made
	// from them after the commit, in the background, once idle is closed
	// or the next use of the maps (settle) comes.
	idle      <-chan struct{}
	checkFast bool                     // the first Put of the commit decides fast
	fast      bool                     // the commit under way puts putNew's way
	staged    []staged[In]             // fast's keys, until keep hands them to the build
	build     *later.Result[built[In]] // the maps of the staged keys; nil without a build
	building  int                      // how many keys build makes
}

// staged is a key that putNew wrote: its value and its object's primary
// key, to be made its held entry and the sole owner of that key.
type staged[In any] struct {
	key string
	val In
	pk  string
}

// built is what a build makes of staged keys.
type built[In any] struct {
	held   map[string]kept[In]
	owners map[string][]string
}

// enter makes each staged key its held entry and the sole owner of its
// primary key.
func enter[In any](held map[string]kept[In], owners map[string][]string, st []staged[In]) {
	for _, e := range st {
		held[e.key] = kept[In]{val: e.val, pk: e.pk}
		owners[e.pk] = []string{e.key}
	}
}

// undoEntry restores one entry of one of fill's maps.
type undoEntry[In any] struct {
	what   uint8 // undoHeld, undoOwners, undoRejected
	key    string
	had    bool
	held   kept[In]
	owners []string
	reason string
}

const (
	undoHeld uint8 = iota
	undoOwners
	undoRejected
)

func (i Into[In, Obj]) newFill(log *slog.Logger, idle <-chan struct{}) (filler[In], error) {
	var errs []error
	if i.Writer.Table == nil || i.Writer.Equal == nil || i.Writer.SetObjectStatus == nil {
		errs = append(errs, errors.New("the Writer needs Table, Equal and SetObjectStatus"))
	}
	if i.Transform == nil {
		errs = append(errs, errors.New("a Transform is required"))
	}
	if err := errors.Join(errs...); err != nil {
		if i.Table != "" {
			err = fmt.Errorf("table %q: %w", i.Table, err)
		}
		return nil, err
	}
	return &fill[In, Obj]{spec: i, log: log, idle: idle, held: map[string]kept[In]{}, owners: map[string][]string{}, rejected: map[string]string{}}, nil
}

func (f *fill[In, Obj]) name() string            { return f.spec.Table }
func (f *fill[In, Obj]) meta() statedb.TableMeta { return f.spec.Writer.Table }
func (f *fill[In, Obj]) objects() int            { return len(f.owners) + f.building + len(f.staged) }

func (f *fill[In, Obj]) register(db *statedb.DB, reflector string) {
	wtxn := db.WriteTxn(f.spec.Writer.Table)
	f.init = f.spec.Writer.Table.RegisterInitializer(wtxn, "reflector-"+reflector)
	wtxn.Commit()
}

func (f *fill[In, Obj]) initialized(txn statedb.WriteTxn) {
	if f.init != nil {
		f.init(txn)
		f.initNow = true
	}
}

func (f *fill[In, Obj]) known() iter.Seq[string] {
	f.settle()
	return func(yield func(string) bool) {
		for k := range f.held {
			if !yield(k) {
				return
			}
		}
		for k := range f.rejected {
			if _, ok := f.held[k]; !ok && !yield(k) {
				return
			}
		}
	}
}

// put applies a Put of key: the value filtered and transformed, its object
// written (it is the most recent value of its primary key), and the
// object the key held before released if its primary key changed.
func (f *fill[In, Obj]) put(txn statedb.WriteTxn, key string, v In) (int, bool) {
	f.decideFast(txn)
	return f.putPrepared(txn, key, v, f.prepare(key, v))
}

// decideFast decides, at the commit's first Put, whether it puts putNew's
// way: a first list into an empty table.
func (f *fill[In, Obj]) decideFast(txn statedb.WriteTxn) {
	if f.checkFast {
		f.checkFast = false
		f.fast = f.spec.Writer.Table.NumObjects(txn) == 0
	}
}

// putPrepared applies a Put of key whose value v made p.
func (f *fill[In, Obj]) putPrepared(txn statedb.WriteTxn, key string, v In, p prepared[Obj]) (int, bool) {
	if f.fast {
		return f.putNew(txn, key, v, p)
	}
	if p.err == nil && !p.keep {
		return f.del(txn, key), false
	}
	obj, pk, err := p.obj, p.pk, p.err
	written := 0
	if err == nil {
		var wrote bool
		if wrote, err = f.spec.Writer.Upsert(txn, obj); wrote {
			written++
		}
	}
	if err != nil {
		// Rejected: the last good version (if any) stays.
		f.setRejected(key, err.Error())
		f.log.Warn("Rejected an object of the source; its last good version stays", "table", f.spec.Table, "key", key, "error", err)
		return written, true
	}
	f.delRejected(key)
	old, had := f.held[key]
	if had && old.pk == pk && written == 0 {
		// An equal object (a relist of what did not change): the value
		// kept makes it as well as this one.
		if owners := f.owners[pk]; owners[len(owners)-1] != key {
			f.setOwners(pk, append(without(owners, key), key))
		}
		return 0, false
	}
	f.setHeld(key, kept[In]{val: v, pk: pk})
	f.setOwners(pk, append(without(f.owners[pk], key), key))
	if had && old.pk != pk {
		written += f.release(txn, key, old.pk)
	}
	return written, false
}

// putNew is put in a first list's commit into an empty table (a start's):
// its keys are distinct, the table has none of their objects and the maps
// are empty, so it writes without looking first (DesiredWriter.Put) and
// stages the key instead of entering it in held and owners, two lookups
// and two inserts into maps of 50,000 keys for each of a start's routes,
// on its critical path. Two keys whose objects have one primary key are
// seen by the write (the second replaces the first): the staged keys then
// go into the maps, and put goes on its usual way.
func (f *fill[In, Obj]) putNew(txn statedb.WriteTxn, key string, v In, p prepared[Obj]) (int, bool) {
	if p.err == nil && !p.keep {
		return 0, false // never held: nothing to delete
	}
	obj, pk, err := p.obj, p.pk, p.err
	var old Obj
	var hadOld bool
	if err == nil {
		old, hadOld, err = f.spec.Writer.Put(txn, obj)
	}
	if err != nil {
		f.setRejected(key, err.Error())
		f.log.Warn("Rejected an object of the source; its last good version stays", "table", f.spec.Table, "key", key, "error", err)
		return 0, true
	}
	if !hadOld {
		f.staged = append(f.staged, staged[In]{key: key, val: v, pk: pk})
		return 1, false
	}
	// Another key of the list has this primary key: the maps from now on.
	f.fast = false
	enter(f.held, f.owners, f.staged)
	f.staged = nil
	f.setHeld(key, kept[In]{val: v, pk: pk})
	f.setOwners(pk, append(without(f.owners[pk], key), key))
	if f.spec.Writer.Equal(old, obj) {
		return 0, false // written again within the commit: no change
	}
	return 1, false
}

// startBuild makes the maps of the staged keys in the background, once
// idle is closed or settle asks for them.
func (f *fill[In, Obj]) startBuild() {
	st := f.staged
	f.staged = nil
	f.building = len(st)
	f.build = later.Start(f.idle, func() built[In] {
		b := built[In]{held: make(map[string]kept[In], len(st)), owners: make(map[string][]string, len(st))}
		enter(b.held, b.owners, st)
		return b
	})
}

// settle waits for the build under way, if any, and takes its maps. The
// maps are the build's until then: every use of held and owners comes
// after settle (a commit's, through begin). The commit that staged the
// keys put none into them, so the build's maps are the whole of them.
func (f *fill[In, Obj]) settle() {
	if f.build == nil {
		return
	}
	b := f.build.Wait()
	f.build, f.building = nil, 0
	f.held, f.owners = b.held, b.owners
	f.peaks.held, f.peaks.owners = len(b.held), len(b.owners)
}

// del applies a Delete of key.
func (f *fill[In, Obj]) del(txn statedb.WriteTxn, key string) int {
	f.delRejected(key)
	old, had := f.held[key]
	if !had {
		return 0
	}
	f.delHeld(key)
	return f.release(txn, key, old.pk)
}

// release takes key off the owners of pk: the object is deleted if no key
// holds it any more; if key's value was the one in the table, the most
// recent other owner's value is written.
func (f *fill[In, Obj]) release(txn statedb.WriteTxn, key, pk string) int {
	owners := f.owners[pk]
	rest := without(owners, key)
	if len(rest) == len(owners) {
		return 0 // not an owner
	}
	if len(rest) == 0 {
		f.setOwners(pk, nil)
		return f.deleteObject(txn, pk)
	}
	if owners[len(owners)-1] != key {
		f.setOwners(pk, rest)
		return 0 // another key's value is in the table, and stays
	}
	// Write the most recent other owner's value again. It took before; a
	// Transform that changed its mind rejects that key, and the next one
	// is tried.
	for len(rest) > 0 {
		next := rest[len(rest)-1]
		obj, err := f.transform(next, f.held[next].val)
		if err == nil {
			var wrote bool
			if wrote, err = f.spec.Writer.Upsert(txn, obj); err == nil {
				f.setOwners(pk, rest)
				if wrote {
					return 1
				}
				return 0
			}
		}
		f.log.Error("Writing again the value of a key that holds the object failed", "table", f.spec.Table, "key", next, "error", err)
		f.setRejected(next, err.Error())
		f.delHeld(next)
		rest = rest[:len(rest)-1]
	}
	f.setOwners(pk, nil)
	return f.deleteObject(txn, pk)
}

func (f *fill[In, Obj]) deleteObject(txn statedb.WriteTxn, pk string) int {
	t := f.spec.Writer.Table
	cur, _, found := t.Get(txn, statedb.QueryByPrimaryKey[Obj](t, index.Key(pk)))
	if !found {
		return 0
	}
	if _, err := f.spec.Writer.Delete(txn, cur); err != nil {
		f.log.Error("Delete failed", "table", f.spec.Table, "error", err)
		return 0
	}
	return 1
}

// filter runs Filter (true without one); a panic is an error.
func (f *fill[In, Obj]) filter(key string, v In) (keep bool, err error) {
	if f.spec.Filter == nil {
		return true, nil
	}
	defer f.recoverAs(&err, "Filter", key)
	return f.spec.Filter(key, v), nil
}

// transform runs Transform; a panic is an error.
func (f *fill[In, Obj]) transform(key string, v In) (obj Obj, err error) {
	defer f.recoverAs(&err, "Transform", key)
	return f.spec.Transform(key, v)
}

func (f *fill[In, Obj]) recoverAs(err *error, what, key string) {
	if p := recover(); p != nil {
		*err = fmt.Errorf("%s panicked: %v", what, p)
		f.log.Error(what+" panicked; the value is rejected", "table", f.spec.Table, "key", key, "panic", p, "stack", string(debug.Stack()))
	}
}

func (f *fill[In, Obj]) rejections() []Rejection {
	out := make([]Rejection, 0, len(f.rejected))
	for _, k := range slices.Sorted(maps.Keys(f.rejected)) {
		out = append(out, Rejection{Table: f.spec.Table, Key: k, Error: f.rejected[k]})
	}
	return out
}

// The memory's changes, each with its undo.

func (f *fill[In, Obj]) setHeld(key string, h kept[In]) {
	if !f.fresh {
		old, had := f.held[key]
		f.undo = append(f.undo, undoEntry[In]{what: undoHeld, key: key, had: had, held: old})
	}
	f.held[key] = h
}

func (f *fill[In, Obj]) delHeld(key string) {
	if old, had := f.held[key]; had {
		if !f.fresh {
			f.undo = append(f.undo, undoEntry[In]{what: undoHeld, key: key, had: true, held: old})
		}
		delete(f.held, key)
	}
}

// setOwners sets pk's owners to a slice that is not changed afterwards
// (nil deletes them): the undo log keeps the old one.
func (f *fill[In, Obj]) setOwners(pk string, owners []string) {
	if !f.fresh {
		old, had := f.owners[pk]
		f.undo = append(f.undo, undoEntry[In]{what: undoOwners, key: pk, had: had, owners: old})
	}
	if len(owners) == 0 {
		delete(f.owners, pk)
	} else {
		f.owners[pk] = owners
	}
}

func (f *fill[In, Obj]) setRejected(key, reason string) {
	if !f.fresh {
		old, had := f.rejected[key]
		f.undo = append(f.undo, undoEntry[In]{what: undoRejected, key: key, had: had, reason: old})
	}
	f.rejected[key] = reason
}

func (f *fill[In, Obj]) delRejected(key string) {
	if old, had := f.rejected[key]; had {
		if !f.fresh {
			f.undo = append(f.undo, undoEntry[In]{what: undoRejected, key: key, had: true, reason: old})
		}
		delete(f.rejected, key)
	}
}

func (f *fill[In, Obj]) begin(expect int, initial bool) {
	f.settle()
	f.fresh = len(f.held) == 0 && len(f.owners) == 0 && len(f.rejected) == 0
	f.checkFast = f.fresh && initial
	if f.checkFast && expect > 0 {
		f.staged = make([]staged[In], 0, expect)
	} else if f.fresh && expect > 0 {
		// Sized once for the list, rather than grown.
		f.held, f.owners = make(map[string]kept[In], expect), make(map[string][]string, expect)
	}
}

func (f *fill[In, Obj]) keep() {
	f.fast, f.checkFast = false, false
	if len(f.staged) > 0 {
		f.startBuild()
	}
	f.staged = nil
	f.fresh = false
	if f.initNow {
		f.init, f.initNow = nil, false
	}
	f.held = shrink.Map(f.held, &f.peaks.held)
	f.owners = shrink.Map(f.owners, &f.peaks.owners)
	f.rejected = shrink.Map(f.rejected, &f.peaks.rejected)
	// A large batch's log is not kept for good: memory follows live data.
	if cap(f.undo) > shrinkAbove {
		f.undo = nil
	} else {
		clear(f.undo)
		f.undo = f.undo[:0]
	}
}

func (f *fill[In, Obj]) rollback() {
	f.staged = nil // written in the aborted transaction only
	if f.fresh {
		clear(f.held)
		clear(f.owners)
		clear(f.rejected)
	}
	for i := len(f.undo) - 1; i >= 0; i-- {
		u := f.undo[i]
		switch u.what {
		case undoHeld:
			restore(f.held, u.key, u.held, u.had)
		case undoOwners:
			restore(f.owners, u.key, u.owners, u.had)
		case undoRejected:
			restore(f.rejected, u.key, u.reason, u.had)
		}
	}
	f.initNow = false // the aborted transaction did not mark it: the next list's commit does
	f.keep()
}

func restore[V any](m map[string]V, key string, v V, had bool) {
	if had {
		m[key] = v
	} else {
		delete(m, key)
	}
}

// without returns s without key, as a new slice (s is not changed).
func without(s []string, key string) []string {
	i := slices.Index(s, key)
	if i < 0 {
		return slices.Clip(s)
	}
	out := make([]string, 0, len(s))
	out = append(out, s[:i]...)
	return append(out, s[i+1:]...)
}

// checkName is the name rule of reflectors.
func checkName(name string) error { return names.Check("reflector", name) }
