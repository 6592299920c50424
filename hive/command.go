package hive

import (
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/steadystate/steadystate/hive/internal/build"
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

// PrintCells populates the hive and prints its cell tree to w: modules,
// what each provides, invokes and decorates, configs with their flags, and
// the lifecycle hooks each module appended while it was constructed, in
// start order.
func (h *Hive) PrintCells(w io.Writer) error {
	if err := h.Populate(); err != nil {
		return err
	}
	return build.WriteTree(w, h.root, h.lc.hookNames())
}
