package cell

import (
	"github.com/spf13/pflag"
	"go.uber.org/dig"
)

// BuildOptions configure Build.
type BuildOptions struct {
	// Flags holds the flags of the Config cells, registered with
	// RegisterFlags and already parsed. Nil means every config keeps its
	// defaults.
	Flags *pflag.FlagSet

	// ModuleProviders are constructors provided privately at the root and
	// again in every module, so that each module gets its own value (a
	// logger, a health scope, a lifecycle, a job group). They may depend on
	// ModuleID and FullModuleID, and on each other.
	ModuleProviders []any
}

// builder carries the state of one Build.
type builder struct {
	opts      BuildOptions
	invokes   []pendingInvoke
	modules   map[string]bool
	providers map[string]string // constructor name → module path, for errors
}

// pendingInvoke is an Invoke function waiting for all cells to be applied.
type pendingInvoke struct {
	fn    any
	scope scope
}

// Build registers cells in the container and then calls the Invoke
// functions in tree order. Everything is registered before anything is
// invoked, so the order of cells does not matter for visibility. Possible
// errors: ErrInvalidModuleID, ErrDuplicateModule, ErrProvide, ErrDecorate,
// ErrInvoke, ErrInvalidFlagValue, ErrConfigField, ErrInvalidConfig. Configs
// are loaded while their cell is registered, so a bad flag value fails
// Build even if nothing uses the config.
func Build(c *dig.Container, opts BuildOptions, cells ...Cell) error {
	b := &builder{opts: opts, modules: map[string]bool{}, providers: map[string]string{}}
	s := scope{dig: c, module: c, path: nil}
	if err := b.provideModuleValues(s, ""); err != nil {
		return err
	}
	for _, cell := range cells {
		if err := cell.apply(b, s); err != nil {
			return err
		}
	}
	for _, inv := range b.invokes {
		if err := inv.scope.dig.Invoke(inv.fn); err != nil {
			return wrapDig(ErrInvoke, inv.scope, "invoke", funcName(inv.fn), err)
		}
	}
	return nil
}

// provideModuleValues provides ModuleID, FullModuleID and the module
// providers privately in the module's scope.
func (b *builder) provideModuleValues(s scope, id ModuleID) error {
	full := s.path
	ctors := append([]any{
		func() ModuleID { return id },
		func() FullModuleID { return full },
	}, b.opts.ModuleProviders...)
	for _, ctor := range ctors {
		if err := s.module.Provide(ctor); err != nil {
			return wrapDig(ErrProvide, s, "provide", funcName(ctor), err)
		}
	}
	return nil
}

// RegisterFlags declares the flags of every Config cell in the tree on fs.
// Two configs declaring one flag is ErrDuplicateFlag.
func RegisterFlags(fs *pflag.FlagSet, cells ...Cell) error {
	for _, c := range cells {
		if err := registerFlags(fs, c); err != nil {
			return err
		}
	}
	return nil
}

// flagRegistrar is implemented by config cells.
type flagRegistrar interface {
	registerFlags(fs *pflag.FlagSet) error
}

func registerFlags(fs *pflag.FlagSet, c Cell) error {
	switch c := c.(type) {
	case flagRegistrar:
		return c.registerFlags(fs)
	case *module:
		return RegisterFlags(fs, c.cells...)
	case *decorator:
		return RegisterFlags(fs, c.cells...)
	case group:
		return RegisterFlags(fs, c...)
	}
	return nil
}
