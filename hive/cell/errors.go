package cell

import "github.com/steadystate/steadystate/hive/internal/build"

// The errors that a hive's Populate (and so Start and Run) returns for bad
// cells. Each message names the module ("module a.b: ...") and the id,
// function, type or flag concerned.
var (
	// ErrInvalidModuleID: a module id that breaks the name rule (see
	// Module).
	ErrInvalidModuleID = build.ErrInvalidModuleID

	// ErrDuplicateModule: two sibling modules share an id.
	ErrDuplicateModule = build.ErrDuplicateModule

	// ErrNilCell: a nil Cell among the cells of a hive, module, decorator or
	// group.
	ErrNilCell = build.ErrNilCell

	// ErrProvide: a constructor cannot be added to the graph: it is not a
	// function, or a type it returns is already provided. The message names
	// the constructor, the type and the module of the other provider.
	ErrProvide = build.ErrProvide

	// ErrInvoke: an invoke function failed: a type it needs (directly or
	// through constructors) is missing, a constructor returned an error, or
	// the function itself did. The message names the function, the missing
	// type and the chain of types being built.
	ErrInvoke = build.ErrInvoke

	// ErrDecorate: a decorator that the injector rejects.
	ErrDecorate = build.ErrDecorate

	// ErrDuplicateFlag: two config cells declare the same flag.
	ErrDuplicateFlag = build.ErrDuplicateFlag

	// ErrInvalidFlagValue: a flag's value (from the command line or the
	// environment) does not parse into its config field.
	ErrInvalidFlagValue = build.ErrInvalidFlagValue

	// ErrConfigField: a flag of a struct config matches no exported field
	// (see Config for the rule), or the field's type is not supported.
	ErrConfigField = build.ErrConfigField

	// ErrInvalidConfig wraps the error of a config's Validate method.
	ErrInvalidConfig = build.ErrInvalidConfig
)
