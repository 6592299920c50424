// Package names holds the one rule for the names that appear in metrics
// labels, health paths, logs and the HTTP API: tables, indexes, reconcilers,
// hive modules and jobs. A name starts with a lower-case letter, continues
// with lower-case letters, digits, '-' and '_', and is at most 64 bytes.
package names

import (
	"errors"
	"fmt"
)

// Pattern is the rule as a regular expression, for error messages and docs.
const Pattern = `[a-z][a-z0-9_-]{0,63}`

// ErrInvalid is wrapped by the errors of Check.
var ErrInvalid = errors.New("invalid name")

// Valid reports whether name follows the rule.
func Valid(name string) bool {
	if len(name) == 0 || len(name) > 64 || name[0] < 'a' || name[0] > 'z' {
		return false
	}
	for i := 1; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// Check returns nil if name follows the rule, else an error wrapping
// ErrInvalid that says what kind of name it is and why it is wrong.
func Check(kind, name string) error {
	if Valid(name) {
		return nil
	}
	return fmt.Errorf("%w: %s %q must match %s", ErrInvalid, kind, name, Pattern)
}
