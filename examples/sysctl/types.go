package sysctl

import (
	"fmt"
	"strings"

	"github.com/steadystate/steadystate/reconciler"
)

// Sysctl is one desired kernel setting. Objects are immutable once
// inserted into a table: clone, modify the clone, insert it.
type Sysctl struct {
	// Name is the dotted key, e.g. "net.ipv4.ip_forward". See Validate.
	Name string `json:"name" yaml:"name"`
	// Value is what to write. Runs of spaces and tabs are equivalent
	// ("4096 87380" equals "4096\t87380"), as the kernel parses them so.
	Value string `json:"value" yaml:"value"`
	// Status is the reconciliation status, written by the reconciler.
	Status reconciler.Status `json:"status,omitzero" yaml:"status,omitempty"`
}

// Limits of Validate.
const (
	// MaxNameLen is the longest accepted Name.
	MaxNameLen = 255
	// MaxValueLen is the longest accepted Value.
	MaxValueLen = 4096
)

// Clone returns a shallow copy (all fields are values).
func (s *Sysctl) Clone() *Sysctl {
	c := *s
	return &c
}

// GetStatus returns the reconciliation status.
func (s *Sysctl) GetStatus() reconciler.Status { return s.Status }

// SetStatus sets the status on s (which must be a clone, never a stored
// object) and returns s.
func (s *Sysctl) SetStatus(st reconciler.Status) *Sysctl {
	s.Status = st
	return s
}

// Equal reports whether s and o describe the same desired setting; the
// status is ignored and values are compared with normalized whitespace.
func (s *Sysctl) Equal(o *Sysctl) bool {
	if s == nil || o == nil {
		return s == o
	}
	return s.Name == o.Name && normalize(s.Value) == normalize(o.Value)
}

// String returns "name=value".
func (s *Sysctl) String() string { return s.Name + "=" + s.Value }

// Validate checks the name and the value. A name is dot-separated
// components of letters, digits and "_-+:@", so it can name no file
// outside the sysctl tree ("..", "/" and empty components are refused).
// Interface names that contain a dot cannot be expressed. A value is one
// line of printable text. Errors wrap ErrInvalid and name the field.
func (s *Sysctl) Validate() error {
	if _, err := keyPath(s.Name); err != nil {
		return err
	}
	v := s.Value
	switch {
	case strings.TrimSpace(v) == "":
		return fmt.Errorf("%w %q: field value: must not be empty", ErrInvalid, s.Name)
	case len(v) > MaxValueLen:
		return fmt.Errorf("%w %q: field value: longer than %d bytes", ErrInvalid, s.Name, MaxValueLen)
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return fmt.Errorf("%w %q: field value: control character %q at byte %d (one line of text expected)", ErrInvalid, s.Name, c, i)
		}
	}
	return nil
}

// keyPath checks name and returns its path relative to the sysctl root,
// e.g. "net/ipv4/ip_forward". Errors wrap ErrInvalid and name the field.
func keyPath(name string) (string, error) {
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("%w: field name %q: %s", ErrInvalid, name, why)
	}
	if name == "" {
		return bad("must not be empty")
	}
	if len(name) > MaxNameLen {
		return bad(fmt.Sprintf("longer than %d bytes", MaxNameLen))
	}
	if strings.Contains(name, "/") {
		return bad(`must not contain "/" (use dots: net.ipv4.ip_forward)`)
	}
	start := 0
	for i := 0; i <= len(name); i++ {
		if i < len(name) && name[i] != '.' {
			if !nameChar(name[i]) {
				return bad(fmt.Sprintf("character %q at byte %d is not allowed (letters, digits, \"_-+:@\" and dots)", name[i], i))
			}
			continue
		}
		if i == start {
			return bad("empty component (leading, trailing or double dot)")
		}
		start = i + 1
	}
	return strings.ReplaceAll(name, ".", "/"), nil
}

func nameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '_' || c == '-' || c == '+' || c == ':' || c == '@'
}

// normalize collapses runs of whitespace, as the kernel's multi-value
// sysctls print tabs but accept any blanks.
func normalize(v string) string { return strings.Join(strings.Fields(v), " ") }
