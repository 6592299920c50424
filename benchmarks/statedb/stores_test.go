package statedb_test

import (
	"fmt"

	"github.com/steadystate/steadystate/benchmarks/internal/stores"
)

// object is what every implementation stores (see package stores).
type object = stores.Object

// --- objects ---

// newObjects returns n objects with IDs 0..n-1; ten objects share each name,
// so a name index is not unique.
func newObjects(n int) []*object {
	objs := make([]*object, n)
	for i := range objs {
		objs[i] = &object{ID: uint64(i), Name: fmt.Sprintf("name-%04d", i/10), Value: i}
	}
	return objs
}
