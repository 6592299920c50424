// Package soak runs the shape of the example agent for a long time and
// prints the live heap as it goes: three desired-state tables (sysctls,
// routes, rules), a loader that rewrites them through DesiredWriter the way
// the agent's loader does on every change of its file, a Deriver, a change
// iterator that follows one table, and three reconcilers that write statuses
// back, against in-memory targets (one of which fails now and then, so
// retries run too) with periodic full reconciliations.
//
// It is not part of `make test`: run it with `make soak` (SOAK_DURATION,
// default 30m). TestSoak fails if the live heap at the end exceeds the one
// after the warm-up by more than a small slack: memory must depend on live
// data, never on how many transactions ran.
package soak
