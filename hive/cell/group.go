package cell

// group is a list of cells applied in the same scope.
type group []Cell

// Group bundles cells without opening a scope, so a package can export one
// Cell that holds several.
func Group(cells ...Cell) Cell { return group(cells) }

func (g group) apply(b *builder, s scope) error {
	for _, c := range g {
		if err := c.apply(b, s); err != nil {
			return err
		}
	}
	return nil
}

// Info describes the cells of the group.
func (g group) Info() Info { return Info{Kind: KindGroup, Children: infos(g)} }
