//go:build !amd64

package statedb

import "runtime"

// callerPC returns the program counter in the caller of the function that
// calls it (a return address, as runtime.Callers gives): where a WriteTxn
// was opened, reported if it is dropped.
//
//go:noinline
func callerPC() uintptr {
	var pc [1]uintptr
	runtime.Callers(3, pc[:])
	return pc[0]
}
