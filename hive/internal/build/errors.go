package build

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"go.uber.org/dig"
)

// The errors of Build and RegisterFlags. Package cell exports each under
// the same name with its documentation.
var (
	ErrInvalidModuleID  = errors.New("invalid module id")
	ErrDuplicateModule  = errors.New("duplicate module")
	ErrNilCell          = errors.New("nil cell")
	ErrProvide          = errors.New("provide failed")
	ErrInvoke           = errors.New("invoke failed")
	ErrDecorate         = errors.New("decorate failed")
	ErrDuplicateFlag    = errors.New("duplicate flag")
	ErrInvalidFlagValue = errors.New("invalid flag value")
	ErrConfigField      = errors.New("config flag has no usable field")
	ErrInvalidConfig    = errors.New("invalid config")
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
