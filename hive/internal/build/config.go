package build

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/spf13/pflag"
)

// config is the Config of a cell.Config[Cfg] cell. The matching rules of
// flags to fields are documented on cell.Config.
type config[Cfg Flagger] struct {
	defaults Cfg
}

// NewConfig returns the Config of a config cell with these defaults.
func NewConfig[Cfg Flagger](defaults Cfg) Config {
	return &config[Cfg]{defaults: defaults}
}

// fresh returns a copy of the defaults that shares no memory with them
// through the top-level pointer, so each hive binds flags to its own copy.
func (c *config[Cfg]) fresh() Cfg {
	v := reflect.ValueOf(&c.defaults).Elem()
	if v.Kind() != reflect.Pointer {
		return c.defaults
	}
	cp := reflect.New(v.Type().Elem())
	if !v.IsNil() {
		cp.Elem().Set(v.Elem())
	}
	return cp.Interface().(Cfg)
}

// TypeName implements Config.
func (c *config[Cfg]) TypeName() string { return reflect.TypeFor[Cfg]().String() }

// RegisterFlags implements Config.
func (c *config[Cfg]) RegisterFlags(fs *pflag.FlagSet) error {
	scratch := pflag.NewFlagSet(c.TypeName(), pflag.ContinueOnError)
	c.fresh().Flags(scratch)
	var err error
	scratch.VisitAll(func(f *pflag.Flag) {
		if err == nil && fs.Lookup(f.Name) != nil {
			err = fmt.Errorf("%w: --%s declared by config %s is already declared", ErrDuplicateFlag, f.Name, c.TypeName())
		}
	})
	if err != nil {
		return err
	}
	fs.AddFlagSet(scratch)
	return nil
}

// Constructor implements Config. It loads the config at once, so that a bad
// value fails Build even if nothing asks for the config.
func (c *config[Cfg]) Constructor(fs *pflag.FlagSet) (any, error) {
	cfg, err := c.load(fs)
	if err != nil {
		return nil, err
	}
	return func() Cfg { return cfg }, nil
}

// load builds a Cfg from the defaults and the parsed flags in fs.
func (c *config[Cfg]) load(fs *pflag.FlagSet) (Cfg, error) {
	cfg := c.fresh()
	scratch := pflag.NewFlagSet(c.TypeName(), pflag.ContinueOnError)
	cfg.Flags(scratch)

	bind := reflect.TypeFor[Cfg]().Kind() == reflect.Pointer
	var fields reflect.Value
	if !bind {
		fields = reflect.ValueOf(&cfg).Elem()
		if fields.Kind() != reflect.Struct {
			return cfg, fmt.Errorf("%w: config %s is not a struct or a pointer to one", ErrConfigField, c.TypeName())
		}
	}
	var err error
	scratch.VisitAll(func(f *pflag.Flag) {
		if err != nil {
			return
		}
		var parsed *pflag.Flag
		if fs != nil {
			if pf := fs.Lookup(f.Name); pf != nil && pf.Changed {
				parsed = pf
			}
		}
		if bind {
			if parsed != nil {
				err = copyFlagValue(f, parsed)
			}
			return
		}
		field, ferr := fieldForFlag(fields, f.Name)
		if ferr != nil {
			err = fmt.Errorf("%w: config %s: flag --%s: %v", ErrConfigField, c.TypeName(), f.Name, ferr)
			return
		}
		if parsed != nil {
			err = setField(field, parsed)
		}
	})
	if err != nil {
		return cfg, err
	}
	if err := validate(&cfg); err != nil {
		return cfg, fmt.Errorf("%w: config %s: %w", ErrInvalidConfig, c.TypeName(), err)
	}
	return cfg, nil
}

// validate calls Validate on *p or on p if either has it.
func validate[Cfg any](p *Cfg) error {
	type validator interface{ Validate() error }
	if v, ok := any(*p).(validator); ok {
		return v.Validate()
	}
	if v, ok := any(p).(validator); ok {
		return v.Validate()
	}
	return nil
}

// Usage implements Config: the flags in declaration order.
func (c *config[Cfg]) Usage() []string {
	fs := pflag.NewFlagSet("", pflag.ContinueOnError)
	fs.SortFlags = false
	c.fresh().Flags(fs)
	var lines []string
	fs.VisitAll(func(f *pflag.Flag) {
		lines = append(lines, fmt.Sprintf("--%s=%s  %s", f.Name, f.DefValue, strings.TrimSpace(f.Usage)))
	})
	return lines
}
