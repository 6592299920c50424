package cell

import (
	"fmt"
	"regexp"
	"slices"
)

var moduleIDPattern = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// module is a named group of cells with its own dig scope.
type module struct {
	id, title string
	cells     []Cell
}

// Module groups cells under an id and a one-line title. The id must match
// [a-z][a-z0-9-]* (checked by Build, which returns ErrInvalidModuleID). The
// module gets its own scope: private providers in it are visible only to
// it and its sub-modules, and it gets its own ModuleID, FullModuleID and
// the runtime's per-module values (logger, health scope, lifecycle, job
// group).
func Module(id, title string, cells ...Cell) Cell {
	return &module{id: id, title: title, cells: cells}
}

func (m *module) apply(b *builder, s scope) error {
	if !moduleIDPattern.MatchString(m.id) {
		return fmt.Errorf("%w: %s%q (want lowercase letters, digits and '-', starting with a letter)",
			ErrInvalidModuleID, s.prefix(), m.id)
	}
	path := append(slices.Clone(s.path), m.id)
	key := path.String()
	if b.modules[key] {
		return fmt.Errorf("%w: %s%q appears twice", ErrDuplicateModule, s.prefix(), m.id)
	}
	b.modules[key] = true

	child := s.dig.Scope(m.id)
	inner := scope{dig: child, module: child, path: path}
	if err := b.provideModuleValues(inner, ModuleID(m.id)); err != nil {
		return err
	}
	for _, c := range m.cells {
		if err := c.apply(b, inner); err != nil {
			return err
		}
	}
	return nil
}

// Info describes the module and its cells.
func (m *module) Info() Info {
	return Info{Kind: KindModule, Name: m.id, Title: m.title, Children: infos(m.cells)}
}
