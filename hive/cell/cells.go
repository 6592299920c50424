package cell

import "github.com/steadystate/steadystate/hive/internal/build"

// cellNode is the one implementation of Cell: a plain description of the
// cell, which the hive builds.
type cellNode struct{ n *build.Node }

func (c cellNode) node() *build.Node { return c.n }

// BuildNode hands the description to the hive's builder; it is not part of
// the API (cellNode is unexported, so users never see it).
func (c cellNode) BuildNode() *build.Node { return c.n }

func newCell(n build.Node, children []Cell) Cell {
	for _, c := range children {
		var child *build.Node // a nil Cell stays nil; Populate reports it
		if c != nil {
			child = c.node()
		}
		n.Children = append(n.Children, child)
	}
	return cellNode{&n}
}

// Module groups cells under an id and a one-line title. The id follows the
// name rule of the whole project: a lower-case letter, then lower-case
// letters, digits, '-' and '_', at most 64 bytes ([a-z][a-z0-9_-]{0,63});
// Populate returns ErrInvalidModuleID for another id and ErrDuplicateModule
// for two sibling modules of one id. The module gets its own scope: private
// providers in it are visible only to it and its sub-modules, and it gets
// its own ModuleID, FullModuleID and the hive's per-module values (logger,
// Health scope, Lifecycle, job group).
func Module(id, title string, cells ...Cell) Cell {
	return newCell(build.Node{Kind: build.KindModule, ID: id, Title: title}, cells)
}

// Provide registers constructors whose results are visible to the whole
// hive. A constructor is a function returning one or more values and
// optionally an error; it runs at most once, when something first needs
// one of its results, with its parameters resolved from the scope it was
// provided in (so it gets its own module's logger, health and lifecycle).
// Parameters and results may be bundled in structs that embed In and Out.
// Two constructors of the same type are ErrProvide naming both modules.
func Provide(ctors ...any) Cell {
	return newCell(build.Node{Kind: build.KindProvide, Funcs: ctors}, nil)
}

// ProvidePrivate registers constructors whose results are visible only
// inside the enclosing module and its sub-modules (the whole hive when used
// outside any module). Inside a Decorate cell it still provides to the whole
// module, and its parameters are resolved without that decorator.
func ProvidePrivate(ctors ...any) Cell {
	return newCell(build.Node{Kind: build.KindProvidePrivate, Funcs: ctors}, nil)
}

// Invoke registers functions that Populate calls, in tree order, after
// every cell is registered. Their parameters are constructed on demand,
// which is what makes constructors run (and append their lifecycle hooks).
// A function may return an error, which fails Populate with ErrInvoke.
func Invoke(funcs ...any) Cell {
	return newCell(build.Node{Kind: build.KindInvoke, Funcs: funcs}, nil)
}

// Decorate applies dtor to the cells given: constructors and invokes among
// them that ask for a type dtor returns receive dtor's result instead of
// the value seen outside. dtor takes the original value (and any other
// dependencies) and returns the replacement. Cells outside are unaffected.
func Decorate(dtor any, cells ...Cell) Cell {
	return newCell(build.Node{Kind: build.KindDecorate, Funcs: []any{dtor}}, cells)
}

// Group bundles cells without opening a scope, so a package can export one
// Cell that holds several.
func Group(cells ...Cell) Cell {
	return newCell(build.Node{Kind: build.KindGroup}, cells)
}

// When builds cells only if cond holds for the config Cfg (provided by a
// Config cell earlier in tree order): a program with modes includes only
// the active mode's modules, so an inactive one neither runs nor shows in
// health. The config cells inside are declared either way (their flags
// exist in every mode); what describes the condition for the tree
// printout. A Cfg that is not provided fails Populate with ErrInvoke.
func When[Cfg any](what string, cond func(Cfg) bool, cells ...Cell) Cell {
	return newCell(build.Node{Kind: build.KindWhen, Title: what, Cond: func(invoke func(any) error) (bool, error) {
		var ok bool
		err := invoke(func(c Cfg) { ok = cond(c) })
		return ok, err
	}}, cells)
}
