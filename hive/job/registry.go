package job

import (
	"log/slog"

	"github.com/steadystate/steadystate/hive/cell"
)

// registry is the default Registry.
type registry struct {
	log        *slog.Logger
	shutdowner cell.Shutdowner
}

// NewRegistry returns a Registry whose groups log to log (nil: discard) and
// shut the hive down through shutdowner for jobs that ask for it (nil:
// such jobs only report their failure).
func NewRegistry(log *slog.Logger, shutdowner cell.Shutdowner) Registry {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &registry{log: log, shutdowner: shutdowner}
}

// NewGroup returns a group reporting under health and hooked into lc.
func (r *registry) NewGroup(health cell.Health, lc cell.Lifecycle, opts ...GroupOption) Group {
	o := groupOptions{log: r.log}
	for _, opt := range opts {
		opt(&o)
	}
	g := &group{health: health, lc: lc, log: o.log, shutdowner: r.shutdowner}
	lc.Append(&groupHook{g})
	return g
}
