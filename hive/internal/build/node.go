package build

import "github.com/spf13/pflag"

// Kind says what a Node is. The values are the words of the tree printout.
type Kind string

// The kinds of cells.
const (
	KindModule         Kind = "module"
	KindProvide        Kind = "provide"
	KindProvidePrivate Kind = "provide-private"
	KindInvoke         Kind = "invoke"
	KindDecorate       Kind = "decorate"
	KindGroup          Kind = "group"
	KindConfig         Kind = "config"
	KindWhen           Kind = "when"
)

// Node is one cell as plain data. Nodes are never changed after package
// cell made them.
type Node struct {
	Kind Kind
	// ID and Title of a module; Title also says what a when node's
	// condition is.
	ID, Title string
	// Funcs are the constructors of a provide node, the functions of an
	// invoke node, or the one decorator of a decorate node.
	Funcs []any
	// Config is the value of a config node.
	Config Config
	// Cond decides whether the cells of a when node are built; invoke
	// calls a function with values of the scope (its config).
	Cond func(invoke func(fn any) error) (bool, error)
	// Children are the cells inside a module, decorate or group node. A nil
	// entry stands for a nil Cell, which Build reports.
	Children []*Node
}

// Cell is how the builder reads a cell of package cell: each hands over
// its Node.
type Cell interface {
	BuildNode() *Node
}

// NodeOf returns the Node of c, a cell of package cell, or nil if c is nil
// or not such a cell.
func NodeOf(c any) *Node {
	if bc, ok := c.(Cell); ok {
		return bc.BuildNode()
	}
	return nil
}

// Flagger is a configuration that declares its flags; package cell's
// Flagger has the same method.
type Flagger interface {
	Flags(*pflag.FlagSet)
}

// Config is the value of a config cell with its type parameter hidden.
type Config interface {
	// TypeName names the config type in errors and in the tree printout.
	TypeName() string
	// RegisterFlags declares the config's flags on fs. A flag that fs
	// already has is ErrDuplicateFlag.
	RegisterFlags(fs *pflag.FlagSet) error
	// Constructor loads the config from the flags parsed into fs (nil: the
	// defaults) and returns a constructor that provides it.
	Constructor(fs *pflag.FlagSet) (any, error)
	// Usage describes each flag: "--name=default  usage".
	Usage() []string
}
