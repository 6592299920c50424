package cell

import (
	"context"
	"strings"

	"github.com/spf13/pflag"
	"go.uber.org/dig"

	"github.com/steadystate/steadystate/hive/internal/build"
)

// Cell is one node of an application's cell tree. The set of cells is
// closed: cells are made with Module, Provide, ProvidePrivate, Invoke,
// Decorate, Group and Config, and the hive builds them. A cell holds no
// per-hive state, so one cell may be used in many hives.
type Cell interface {
	node() *build.Node
}

// In marks a struct of constructor or invoke parameters: each exported field
// is one dependency. Tag a field `optional:"true"` to receive the zero value
// when nothing provides its type, or `group:"name"` (on a slice) to receive
// every value of a value group. It is dig.In, so code using cells does not
// import the injector.
type In = dig.In

// Out marks a struct of constructor results: each exported field is
// provided as a value of its type (or, tagged `group:"name"`, added to a
// value group). It is dig.Out.
type Out = dig.Out

// Flagger is implemented by configuration structs: Flags declares one flag
// per field on the flag set. See Config for how values reach the fields.
type Flagger interface {
	Flags(*pflag.FlagSet)
}

// ModuleID is the id of the module a constructor runs in ("" outside every
// module). It is provided privately in every module.
type ModuleID string

// FullModuleID is the path of module ids from the root to the module a
// constructor runs in (empty outside every module). It is provided privately
// in every module.
type FullModuleID []string

// String joins the path with dots, e.g. "agent.routes".
func (id FullModuleID) String() string { return strings.Join(id, ".") }

// HookInterface is a lifecycle hook: Start runs when the hive starts, Stop
// when it stops. Both must return promptly once their context is done; the
// context carries the hive's start or stop deadline.
type HookInterface interface {
	Start(context.Context) error
	Stop(context.Context) error
}

// Hook is a HookInterface made of two optional functions.
type Hook struct {
	OnStart func(context.Context) error
	OnStop  func(context.Context) error
}

// Start calls OnStart if it is set.
func (h Hook) Start(ctx context.Context) error {
	if h.OnStart == nil {
		return nil
	}
	return h.OnStart(ctx)
}

// Stop calls OnStop if it is set.
func (h Hook) Stop(ctx context.Context) error {
	if h.OnStop == nil {
		return nil
	}
	return h.OnStop(ctx)
}

// HookNamer may be implemented by a hook to choose its own name. Without it
// a hook is named after the function that appended it. The runtime prefixes
// the name with the module id.
type HookNamer interface {
	HookName() string
}

// Lifecycle collects the hooks of a hive. Hooks start in the order they were
// appended (which follows construction order, i.e. dependency order) and
// stop in reverse. It is provided in every module; each module's Lifecycle
// tags its hooks with the module id. Append hooks while the hive is being
// constructed: a hook appended after the hive started is not started.
type Lifecycle interface {
	Append(HookInterface)
}

// Health is one scope in the hive's health tree. Every module gets its own
// scope (provided privately as Health); jobs and components open sub-scopes
// with NewScope. A scope reads Unknown until it first reports (package
// health holds the tree and its levels). All methods are safe for
// concurrent use, and all are no-ops once the scope is closed.
type Health interface {
	// OK marks the scope healthy, with a short status.
	OK(status string)
	// Degraded marks the scope unhealthy with a reason and the last error.
	Degraded(reason string, err error)
	// Stopped marks the scope as finished on purpose.
	Stopped(reason string)
	// NewScope opens a child scope. A name already used by a live sibling
	// gets a "#n" suffix, so two children never share an id.
	NewScope(name string) Health
	// Close removes this scope and its children from the tree.
	Close()
}

// Shutdowner requests that the hive stop, optionally with an error that the
// hive's Run returns. The hive provides one to every cell.
type Shutdowner interface {
	Shutdown(opts ...ShutdownOption)
}

// ShutdownOption adjusts a shutdown request.
type ShutdownOption func(*ShutdownRequest)

// ShutdownRequest is a shutdown request after its options are applied.
type ShutdownRequest struct {
	// Err is the reason for the shutdown; nil for a normal one.
	Err error
}

// ShutdownWithError makes the shutdown carry err (Run returns it).
func ShutdownWithError(err error) ShutdownOption {
	return func(r *ShutdownRequest) { r.Err = err }
}

// NewShutdownRequest applies opts to an empty request.
func NewShutdownRequest(opts ...ShutdownOption) ShutdownRequest {
	var r ShutdownRequest
	for _, o := range opts {
		o(&r)
	}
	return r
}
