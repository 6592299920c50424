package cell

// decorator wraps values for the cells below it.
type decorator struct {
	dtor  any
	cells []Cell
}

// Decorate applies dtor to the cells given: constructors and invokes among
// them that ask for a type dtor returns receive dtor's result instead of
// the value seen outside. dtor takes the original value (and any other
// dependencies) and returns the replacement. Cells outside are unaffected.
func Decorate(dtor any, cells ...Cell) Cell {
	return &decorator{dtor: dtor, cells: cells}
}

func (d *decorator) apply(b *builder, s scope) error {
	child := s.dig.Scope("decorate")
	if err := child.Decorate(d.dtor); err != nil {
		return wrapDig(ErrDecorate, s, "decorate", funcName(d.dtor), err)
	}
	inner := scope{dig: child, module: s.module, path: s.path}
	for _, c := range d.cells {
		if err := c.apply(b, inner); err != nil {
			return err
		}
	}
	return nil
}

// Info describes the decorator and the cells it applies to.
func (d *decorator) Info() Info {
	return Info{Kind: KindDecorate, Details: []string{funcSignature(d.dtor)}, Children: infos(d.cells)}
}
