package statedb

import (
	"runtime"
	"testing"
)

// pcs returns callerPC's answer and runtime.Callers' for the caller of pcs.
//
//go:noinline
func pcs() (fast, slow uintptr) {
	var pc [1]uintptr
	runtime.Callers(2, pc[:])
	return callerPC(), pc[0]
}

func TestCallerPC(t *testing.T) {
	fast, slow := pcs()
	ff, _ := runtime.CallersFrames([]uintptr{fast}).Next()
	sf, _ := runtime.CallersFrames([]uintptr{slow}).Next()
	if fast != slow || ff.Function != sf.Function || ff.Line != sf.Line {
		t.Fatalf("callerPC = %#x (%s:%d), runtime.Callers = %#x (%s:%d)", fast, ff.Function, ff.Line, slow, sf.Function, sf.Line)
	}
	if ff.Function != "github.com/steadystate/steadystate/statedb.TestCallerPC" {
		t.Fatalf("callerPC found %s", ff.Function)
	}
}
