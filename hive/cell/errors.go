package cell

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"go.uber.org/dig"
)

var (
	// ErrInvalidModuleID is returned by Build for a module id that does not
	// match [a-z][a-z0-9-]*.
	ErrInvalidModuleID = errors.New("invalid module id")

	// ErrDuplicateModule is returned by Build when two sibling modules share
	// an id.
	ErrDuplicateModule = errors.New("duplicate module")

	// ErrProvide is returned by Build when a constructor cannot be added to
	// the graph: it is not a function, or a type it returns is already
	// provided. The message names the module, the constructor and the type.
	ErrProvide = errors.New("provide failed")

	// ErrInvoke is returned by Build when an invoke function fails: a type
	// it needs (directly or through constructors) is missing, a constructor
	// returned an error, or the function itself did. The message names the
	// module, the function and the missing type.
	ErrInvoke = errors.New("invoke failed")

	// ErrDecorate is returned by Build for a decorator dig rejects.
	ErrDecorate = errors.New("decorate failed")

	// ErrDuplicateFlag is returned by RegisterFlags when two config cells
	// declare the same flag.
	ErrDuplicateFlag = errors.New("duplicate flag")

	// ErrInvalidFlagValue is returned when a flag's value (from the command
	// line or the environment) cannot be parsed into its config field. The
	// message names the flag.
	ErrInvalidFlagValue = errors.New("invalid flag value")

	// ErrConfigField is returned by Build when a flag of a struct config
	// matches no exported field (see Config for the matching rule), or the
	// field's type is not supported.
	ErrConfigField = errors.New("config flag has no usable field")

	// ErrInvalidConfig wraps the error of a config's Validate method.
	ErrInvalidConfig = errors.New("invalid config")
)

var (
	// quotedPkg matches dig's `"import/path/pkg".Func` function names.
	quotedPkg = regexp.MustCompile(`"(?:[^"]*/)?([^"/]+)"\.`)
	// location matches the " (/path/file.go:12)" dig appends to functions.
	location    = regexp.MustCompile(` \([^()]*\.go:\d+\)`)
	failedBuild = regexp.MustCompile(`failed to build ([^:]+):`)
	ctorFailed  = regexp.MustCompile(`received non-nil error from function ([^:]+):`)
)

// shortenDig removes source locations and import paths from dig text.
func shortenDig(msg string) string {
	return quotedPkg.ReplaceAllString(location.ReplaceAllString(msg, ""), "$1.")
}

// digMessage turns a dig error into one readable line: the root cause (the
// missing type, the duplicate type and its other provider, the error of a
// constructor) followed by the chain of types being built.
func digMessage(err error) string {
	full := shortenDig(err.Error())
	if rest, ok := strings.CutPrefix(full, "cannot provide function "); ok {
		if _, after, ok := strings.Cut(rest, ": "); ok {
			return after
		}
		return full
	}
	msg := shortenDig(dig.RootCause(err).Error())
	if m := ctorFailed.FindStringSubmatch(full); m != nil {
		msg = m[1] + " failed: " + msg
	}
	var chain []string
	for _, m := range failedBuild.FindAllStringSubmatch(full, -1) {
		chain = append(chain, m[1])
	}
	if len(chain) > 0 {
		msg += " (while building " + strings.Join(chain, " → ") + ")"
	}
	return msg
}

// shortError prints a shortened dig message but still unwraps to the full
// dig error, so dig's own helpers keep working on it.
type shortError struct {
	msg string
	err error
}

// Error returns the short message.
func (e shortError) Error() string { return e.msg }

// Unwrap returns the dig error.
func (e shortError) Unwrap() error { return e.err }

// wrapDig builds "<module prefix><what> <fn>: <dig message>" wrapping both
// sentinel and the dig error.
func wrapDig(sentinel error, s scope, what, fn string, err error) error {
	return fmt.Errorf("%w: %s%s %s: %w", sentinel, s.prefix(), what, fn, shortError{digMessage(err), err})
}
