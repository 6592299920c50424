package statedb

import (
	"reflect"
	"unsafe"

	iradix "github.com/steadystate/steadystate/internal/radix"
)

// The persistent radix tree behind every index. All of statedb reaches the
// tree implementation through these aliases, so it can be exchanged here.
type (
	tree         = iradix.Tree[object]
	treeTxn      = iradix.Txn[object]
	treeNode     = iradix.Node[object]
	treeIterator = iradix.Iterator[object]
)

func newTree() tree { return iradix.Empty[object]() }

// closedWatch returns a channel that is closed already: the watch channel
// of what has happened. It is the radix tree's own (that of a nil node).
func closedWatch() <-chan struct{} { return (*treeNode)(nil).Watch() }

// object is what every index stores: the user's object and the revision at
// which it was written (for objects in the graveyard: deleted). The object
// is held as one pointer rather than an interface, which would take a
// second word for its type (the table knows it): 16 bytes, which keeps a
// tree leaf at 32 (see radix.Node). For a pointer-shaped Obj (a pointer,
// map, channel or func) ptr is the value itself, for any other type a
// pointer to a copy of it (as an interface would hold it); see storeObject
// and loadObject.
type object struct {
	ptr      unsafe.Pointer
	revision Revision
}

// pointerShaped reports whether a value of type Obj is a single pointer
// word, which an object can hold as it is.
func pointerShaped[Obj any]() bool {
	switch reflect.TypeFor[Obj]().Kind() {
	case reflect.Pointer, reflect.Map, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return true
	}
	return false
}

// storeObject returns the object that holds obj at revision rev; direct is
// pointerShaped[Obj]().
func storeObject[Obj any](direct bool, obj Obj, rev Revision) object {
	if direct {
		return object{ptr: *(*unsafe.Pointer)(unsafe.Pointer(&obj)), revision: rev}
	}
	p := new(Obj)
	*p = obj
	return object{ptr: unsafe.Pointer(p), revision: rev}
}

// loadObject returns the Obj that o holds; direct is pointerShaped[Obj]().
func loadObject[Obj any](direct bool, o object) Obj {
	if direct {
		return *(*Obj)(unsafe.Pointer(&o.ptr))
	}
	return *(*Obj)(o.ptr)
}
