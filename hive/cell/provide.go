package cell

import (
	"fmt"
	"regexp"

	"go.uber.org/dig"
)

// provider registers constructors, exported to the whole hive or private to
// the enclosing module.
type provider struct {
	ctors   []any
	private bool
}

// Provide registers constructors whose results are visible to the whole
// hive. A constructor is a function returning one or more values and
// optionally an error; it runs at most once, when something first needs
// one of its results, with its parameters resolved from the scope it was
// provided in (so it gets its own module's logger, health and lifecycle).
// Two constructors of the same type are an error (ErrProvide) naming both.
func Provide(ctors ...any) Cell { return &provider{ctors: ctors} }

// ProvidePrivate registers constructors whose results are visible only
// inside the enclosing module and its sub-modules (the whole hive when used
// outside any module). Inside a Decorate cell it still provides to the whole
// module, and its parameters are resolved without that decorator.
func ProvidePrivate(ctors ...any) Cell { return &provider{ctors: ctors, private: true} }

func (p *provider) apply(b *builder, s scope) error {
	for _, ctor := range p.ctors {
		var err error
		if p.private {
			err = s.module.Provide(ctor)
		} else {
			err = s.dig.Provide(ctor, dig.Export(true))
		}
		if err != nil {
			err = wrapDig(ErrProvide, s, "provide", funcName(ctor), err)
			return b.nameOtherProvider(err)
		}
		if _, ok := b.providers[funcName(ctor)]; !ok {
			b.providers[funcName(ctor)] = s.path.String()
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

// Info lists the constructors with their parameter and result types.
func (p *provider) Info() Info {
	kind := KindProvide
	if p.private {
		kind = KindProvidePrivate
	}
	i := Info{Kind: kind}
	for _, c := range p.ctors {
		i.Details = append(i.Details, funcSignature(c))
	}
	return i
}
