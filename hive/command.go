package hive

import (
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"

	"github.com/steadystate/steadystate/hive/cell"
)

// Command returns a cobra command that runs the hive (see Run). Its flags
// are those of the config cells (persistent, so subcommands take them too).
// Subcommand "cells" prints the cell tree after populating the hive.
func (h *Hive) Command() *cobra.Command {
	cmd := &cobra.Command{
		Use:          filepath.Base(os.Args[0]),
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE:         func(*cobra.Command, []string) error { return h.Run() },
	}
	h.RegisterFlags(cmd.PersistentFlags())
	cmd.AddCommand(&cobra.Command{
		Use:   "cells",
		Short: "Print the cell tree: modules, what each provides and invokes, configs and lifecycle hooks",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return h.PrintCells(cmd.OutOrStdout())
		},
	})
	return cmd
}

// PrintCells populates the hive and prints its cell tree to w, with the
// lifecycle hooks each module appended while it was constructed.
func (h *Hive) PrintCells(w io.Writer) error {
	if err := h.Populate(); err != nil {
		return err
	}
	return cell.WriteTree(w, h.Info())
}

// Info describes the hive's cell tree. After Populate, each module (and the
// root) has a child listing its lifecycle hooks in start order.
func (h *Hive) Info() cell.Info {
	root := cell.Info{Kind: cell.KindRoot}
	for _, c := range h.cells {
		root.Children = append(root.Children, c.Info())
	}
	hooks := h.lc.hookNames()
	addHooks(&root, nil, hooks)
	return root
}

// addHooks appends a hooks node to every module in the tree below i.
func addHooks(i *cell.Info, path []string, hooks map[string][]string) {
	if i.Kind == cell.KindModule {
		path = append(slices.Clone(path), i.Name)
	}
	for k := range i.Children {
		addHooks(&i.Children[k], path, hooks)
	}
	if i.Kind == cell.KindModule || i.Kind == cell.KindRoot {
		if names := hooks[cell.FullModuleID(path).String()]; len(names) > 0 {
			i.Children = append(i.Children, cell.Info{Kind: cell.KindHook, Details: names})
		}
	}
}
