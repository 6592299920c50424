// Package shrink gives back the room that a burst left in a map: Go's maps
// keep their room after deletes, so without it a program's memory would
// follow the largest burst it ever took, not its live data.
package shrink

// Above is the smallest peak whose room Map gives back.
const Above = 1024

// Map returns m, or, once m holds less than a quarter of the most it held
// (*peak, which Map keeps: call it after each batch of changes), a copy of
// m made at its size.
func Map[M ~map[K]V, K comparable, V any](m M, peak *int) M {
	n := len(m)
	switch {
	case n > *peak:
		*peak = n
	case *peak > Above && n < *peak/4:
		out := make(M, n)
		for k, v := range m {
			out[k] = v
		}
		*peak = n
		return out
	}
	return m
}
