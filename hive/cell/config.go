package cell

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/spf13/pflag"
	"go.uber.org/dig"
)

// config provides a Cfg filled from flags.
type config[Cfg Flagger] struct {
	defaults Cfg
}

// Config provides a value of type Cfg to the whole hive, starting from
// defaults and overridden by flags (and, through the hive, environment
// variables). Cfg declares its flags in Flags; the hive registers them on
// its command line.
//
// Two forms are supported:
//
//   - Cfg is a struct and Flags has a value receiver, declaring each flag
//     with its default from the receiver (fs.Duration("interval",
//     def.Interval, "...")). After parsing, each flag is stored in the
//     exported field whose name equals the flag name when case, '-', '_'
//     and '.' are ignored ("metrics-addr" fills MetricsAddr), or in the
//     field tagged `flag:"metrics-addr"`. Supported field types: string,
//     bool, integers, floats, time.Duration, encoding.TextUnmarshaler,
//     slices of those (from slice flags) and map[string]string (from
//     string-to-string flags). A flag without a usable field is
//     ErrConfigField.
//   - Cfg is a pointer to a struct and Flags has a pointer receiver that
//     binds each field with the fs.XxxVar functions. Each hive gets its own
//     copy of *defaults.
//
// If Cfg (or *Cfg) has a method Validate() error, it is called after the
// flags are applied; its error is wrapped in ErrInvalidConfig and should
// name the flag at fault. A value that does not parse is
// ErrInvalidFlagValue naming the flag.
func Config[Cfg Flagger](defaults Cfg) Cell {
	return &config[Cfg]{defaults: defaults}
}

// fresh returns a copy of the defaults that shares no memory with them
// through the top-level pointer.
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

func (c *config[Cfg]) typeName() string { return reflect.TypeFor[Cfg]().String() }

func (c *config[Cfg]) registerFlags(fs *pflag.FlagSet) error {
	scratch := pflag.NewFlagSet(c.typeName(), pflag.ContinueOnError)
	c.fresh().Flags(scratch)
	var err error
	scratch.VisitAll(func(f *pflag.Flag) {
		if err == nil && fs.Lookup(f.Name) != nil {
			err = fmt.Errorf("%w: --%s declared by config %s is already declared", ErrDuplicateFlag, f.Name, c.typeName())
		}
	})
	if err != nil {
		return err
	}
	fs.AddFlagSet(scratch)
	return nil
}

// load builds a Cfg from the defaults and the parsed flags in fs.
func (c *config[Cfg]) load(fs *pflag.FlagSet) (Cfg, error) {
	cfg := c.fresh()
	scratch := pflag.NewFlagSet(c.typeName(), pflag.ContinueOnError)
	cfg.Flags(scratch)

	bind := reflect.TypeFor[Cfg]().Kind() == reflect.Pointer
	var fields reflect.Value
	if !bind {
		fields = reflect.ValueOf(&cfg).Elem()
		if fields.Kind() != reflect.Struct {
			return cfg, fmt.Errorf("%w: config %s is not a struct or a pointer to one", ErrConfigField, c.typeName())
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
			err = fmt.Errorf("%w: config %s: flag --%s: %v", ErrConfigField, c.typeName(), f.Name, ferr)
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
		return cfg, fmt.Errorf("%w: config %s: %w", ErrInvalidConfig, c.typeName(), err)
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

func (c *config[Cfg]) apply(b *builder, s scope) error {
	// Loaded eagerly so that a bad value fails Build even if nothing asks
	// for the config.
	cfg, err := c.load(b.opts.Flags)
	if err != nil {
		return fmt.Errorf("%s%w", s.prefix(), err)
	}
	ctor := func() Cfg { return cfg }
	if err := s.dig.Provide(ctor, dig.Export(true)); err != nil {
		return wrapDig(ErrProvide, s, "config", c.typeName(), err)
	}
	return nil
}

// Info lists the flags with their defaults and usage.
func (c *config[Cfg]) Info() Info {
	i := Info{Kind: KindConfig, Name: c.typeName()}
	fs := pflag.NewFlagSet("", pflag.ContinueOnError)
	fs.SortFlags = false
	c.fresh().Flags(fs)
	fs.VisitAll(func(f *pflag.Flag) {
		i.Details = append(i.Details, fmt.Sprintf("--%s=%s  %s", f.Name, f.DefValue, strings.TrimSpace(f.Usage)))
	})
	return i
}
