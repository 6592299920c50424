package cell

// invoker registers functions to call once the graph is complete.
type invoker struct {
	funcs []any
}

// Invoke registers functions that Build calls, in tree order, after every
// cell is registered. Their parameters are constructed on demand, which is
// what makes constructors run (and append their lifecycle hooks). A function
// may return an error, which fails Build with ErrInvoke.
func Invoke(funcs ...any) Cell { return &invoker{funcs: funcs} }

func (i *invoker) apply(b *builder, s scope) error {
	for _, fn := range i.funcs {
		b.invokes = append(b.invokes, pendingInvoke{fn: fn, scope: s})
	}
	return nil
}

// Info lists the functions with their parameter types.
func (i *invoker) Info() Info {
	info := Info{Kind: KindInvoke}
	for _, fn := range i.funcs {
		info.Details = append(info.Details, funcSignature(fn))
	}
	return info
}
