package reflector

import (
	"context"

	"github.com/steadystate/steadystate/statedb"
)

// Reflector fills one table from a Source; see the package doc. It is a
// Multi of one table that ignores the source's table names.
type Reflector[In, Obj any] struct {
	m *Multi[In]
}

// New validates cfg and registers an initializer of the table, done when
// the first list is committed. Call Run.
func New[In, Obj any](db *statedb.DB, cfg Config[In, Obj]) (*Reflector[In, Obj], error) {
	m, err := newMulti(db, MultiConfig[In]{
		Name:   cfg.Name,
		Source: cfg.Source,
		Tables: []TableSpec[In]{Into[In, Obj]{Writer: cfg.Writer, Filter: cfg.Filter, Transform: cfg.Transform}},

		BatchSize:       cfg.BatchSize,
		BatchInterval:   cfg.BatchInterval,
		RetryBackoffMin: cfg.RetryBackoffMin,
		RetryBackoffMax: cfg.RetryBackoffMax,
		Metrics:         cfg.Metrics,
		Health:          cfg.Health,
		Logger:          cfg.Logger,
		Idle:            cfg.Idle,
	}, true)
	if err != nil {
		return nil, err
	}
	return &Reflector[In, Obj]{m: m}, nil
}

// Run lists and watches the source until ctx ends; it returns nil then
// (see Multi.Run).
func (r *Reflector[In, Obj]) Run(ctx context.Context) error { return r.m.Run(ctx) }

// Revision returns the source revision that the table reflects: every
// change of the source up to it is committed to the table (0 before the
// first list). It moves with each commit, and with each Progress event of
// the source (see the package doc), so it may pass the revision of the
// table's latest change. Safe for concurrent use.
func (r *Reflector[In, Obj]) Revision() uint64 { return r.m.Revision() }

// RevisionWatch returns Revision and a channel that closes when it moves.
func (r *Reflector[In, Obj]) RevisionWatch() (uint64, <-chan struct{}) { return r.m.RevisionWatch() }

// Rejected returns the source's keys whose latest value was rejected, with
// why, as "KEY: ERROR" in key order (the table keeps the last good version
// of each, if any). A node counts them as not applied. Safe for concurrent
// use.
func (r *Reflector[In, Obj]) Rejected() []string {
	var out []string
	for _, rej := range r.m.Rejected() {
		out = append(out, rej.Key+": "+rej.Error)
	}
	return out
}
