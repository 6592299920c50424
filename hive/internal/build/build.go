package build

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"go.uber.org/dig"

	"github.com/steadystate/steadystate/internal/names"
)

// Options configure Build.
type Options struct {
	// Flags holds the flags of the config cells, declared with
	// RegisterFlags and already parsed. Nil means every config keeps its
	// defaults.
	Flags *pflag.FlagSet

	// ModuleProviders returns the constructors provided privately at the
	// root and again in every module, so that each module gets its own
	// values (its ids, a logger, a health scope, a lifecycle, a job group).
	// id is the module's own id and path the ids from the root to it; both
	// are empty at the root. Nil means none.
	ModuleProviders func(id string, path []string) []any
}

// builder carries the state of one Build.
type builder struct {
	opts      Options
	invokes   []pendingInvoke
	modules   map[string]bool
	providers map[string]string // constructor name → module path, for errors
}

// pendingInvoke is an invoke function waiting for all cells to be applied.
type pendingInvoke struct {
	fn    any
	scope scope
}

// scope is where a cell is applied: the dig scope for constructors and
// invokes (a decorate cell opens a child), the enclosing module's scope for
// private providers, and the module path for error messages.
type scope struct {
	dig    digScope
	module digScope
	path   []string
}

// digScope is what *dig.Container and *dig.Scope have in common.
type digScope interface {
	Provide(ctor any, opts ...dig.ProvideOption) error
	Invoke(fn any, opts ...dig.InvokeOption) error
	Decorate(dtor any, opts ...dig.DecorateOption) error
	Scope(name string, opts ...dig.ScopeOption) *dig.Scope
}

// prefix is the error prefix for the scope: "module a.b: " or "".
func (s scope) prefix() string {
	if len(s.path) == 0 {
		return ""
	}
	return "module " + strings.Join(s.path, ".") + ": "
}

// Build registers the cells below root in c and then calls the invoke
// functions in tree order. Everything is registered before anything is
// invoked, so the order of cells does not matter for visibility. Configs
// are loaded while their cell is registered, so a bad flag value fails
// Build even if nothing uses the config. Errors: ErrInvalidModuleID,
// ErrDuplicateModule, ErrNilCell, ErrProvide, ErrDecorate, ErrInvoke,
// ErrInvalidFlagValue, ErrConfigField, ErrInvalidConfig.
func Build(c *dig.Container, opts Options, root *Node) error {
	b := &builder{opts: opts, modules: map[string]bool{}, providers: map[string]string{}}
	s := scope{dig: c, module: c}
	if err := b.provideModuleValues(s, ""); err != nil {
		return err
	}
	if err := b.apply(root, s); err != nil {
		return err
	}
	for _, inv := range b.invokes {
		if err := inv.scope.dig.Invoke(inv.fn); err != nil {
			return wrapDig(ErrInvoke, inv.scope, "invoke", FuncName(inv.fn), err)
		}
	}
	return nil
}

// provideModuleValues provides the module providers privately in the
// module's scope.
func (b *builder) provideModuleValues(s scope, id string) error {
	if b.opts.ModuleProviders == nil {
		return nil
	}
	for _, ctor := range b.opts.ModuleProviders(id, slices.Clone(s.path)) {
		if err := s.module.Provide(ctor); err != nil {
			return wrapDig(ErrProvide, s, "provide", FuncName(ctor), err)
		}
	}
	return nil
}

// apply registers one cell in s; invokes are queued.
func (b *builder) apply(n *Node, s scope) error {
	if n == nil {
		return fmt.Errorf("%w: %sa cell in the list is nil", ErrNilCell, s.prefix())
	}
	switch n.Kind {
	case KindModule:
		return b.module(n, s)
	case KindProvide, KindProvidePrivate:
		return b.provide(n, s)
	case KindInvoke:
		for _, fn := range n.Funcs {
			b.invokes = append(b.invokes, pendingInvoke{fn: fn, scope: s})
		}
		return nil
	case KindDecorate:
		return b.decorate(n, s)
	case KindConfig:
		ctor, err := n.Config.Constructor(b.opts.Flags)
		if err != nil {
			return fmt.Errorf("%s%w", s.prefix(), err)
		}
		if err := s.dig.Provide(ctor, dig.Export(true)); err != nil {
			return wrapDig(ErrProvide, s, "config", n.Config.TypeName(), err)
		}
		return nil
	case KindWhen:
		ok, err := n.Cond(func(fn any) error { return s.dig.Invoke(fn) })
		if err != nil {
			return wrapDig(ErrInvoke, s, "when", n.Title, err)
		}
		if !ok {
			return nil
		}
		return b.applyAll(n.Children, s)
	default: // KindGroup
		return b.applyAll(n.Children, s)
	}
}

func (b *builder) applyAll(nodes []*Node, s scope) error {
	for _, n := range nodes {
		if err := b.apply(n, s); err != nil {
			return err
		}
	}
	return nil
}

// module opens a dig scope of its own for the module's cells, after
// checking its id against the one name rule.
func (b *builder) module(n *Node, s scope) error {
	if !names.Valid(n.ID) {
		return fmt.Errorf("%w: %s%q must match %s (lower-case letters, digits, '-' and '_', starting with a letter)",
			ErrInvalidModuleID, s.prefix(), n.ID, names.Pattern)
	}
	path := append(slices.Clone(s.path), n.ID)
	key := strings.Join(path, ".")
	if b.modules[key] {
		return fmt.Errorf("%w: %s%q appears twice", ErrDuplicateModule, s.prefix(), n.ID)
	}
	b.modules[key] = true

	child := s.dig.Scope(n.ID)
	inner := scope{dig: child, module: child, path: path}
	if err := b.provideModuleValues(inner, n.ID); err != nil {
		return err
	}
	return b.applyAll(n.Children, inner)
}

// provide registers constructors: exported to the whole hive, or private to
// the enclosing module's scope.
func (b *builder) provide(n *Node, s scope) error {
	for _, ctor := range n.Funcs {
		var err error
		if n.Kind == KindProvidePrivate {
			err = s.module.Provide(ctor)
		} else {
			err = s.dig.Provide(ctor, dig.Export(true))
		}
		if err != nil {
			return b.nameOtherProvider(wrapDig(ErrProvide, s, "provide", FuncName(ctor), err))
		}
		if _, ok := b.providers[FuncName(ctor)]; !ok {
			b.providers[FuncName(ctor)] = strings.Join(s.path, ".")
		}
	}
	return nil
}

var alreadyProvided = regexp.MustCompile(`already provided by (\S+)$`)

// nameOtherProvider adds the module of the conflicting constructor to a
// duplicate-type error.
func (b *builder) nameOtherProvider(err error) error {
	m := alreadyProvided.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	if mod, ok := b.providers[m[1]]; ok && mod != "" {
		return fmt.Errorf("%w (in module %s)", err, mod)
	}
	return err
}

// decorate opens a child dig scope in which the decorator replaces the
// values it returns, for the cells inside only.
func (b *builder) decorate(n *Node, s scope) error {
	dtor := n.Funcs[0]
	child := s.dig.Scope("decorate")
	if err := child.Decorate(dtor); err != nil {
		return wrapDig(ErrDecorate, s, "decorate", FuncName(dtor), err)
	}
	return b.applyAll(n.Children, scope{dig: child, module: s.module, path: s.path})
}

// RegisterFlags declares on fs the flags of every config cell below root.
// Two configs declaring one flag is ErrDuplicateFlag.
func RegisterFlags(fs *pflag.FlagSet, root *Node) error {
	if root == nil {
		return nil // Build reports it
	}
	if root.Kind == KindConfig {
		return root.Config.RegisterFlags(fs)
	}
	for _, c := range root.Children {
		if err := RegisterFlags(fs, c); err != nil {
			return err
		}
	}
	return nil
}
