package statedb

// callerPC returns the program counter in the caller of the function that
// calls it (a return address, as runtime.Callers gives): where a WriteTxn
// was opened, reported if it is dropped. On amd64 it reads the frame
// pointer (callerpc_amd64.s), one load instead of the ~130 ns of an unwind
// by runtime.Callers on every transaction; TestCallerPC checks that both
// agree.
func callerPC() uintptr
