package statedbcmd

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/steadystate/steadystate/statedb"
)

// keysHelpTimeout bounds the question that `db help` asks the program.
const keysHelpTimeout = 2 * time.Second

// addKeysHelp makes the help of db and of its commands that take a key
// end with the running program's tables, each index with its key format
// and an example (asked from the program, so that it is what the program
// really parses; if it does not answer, the help says so).
func (c *cli) addKeysHelp(db *cobra.Command) {
	base := db.HelpFunc()
	db.SetHelpFunc(func(cmd *cobra.Command, args []string) {
		if cmd != db && !takesKey(cmd) {
			base(cmd, args)
			return
		}
		long := cmd.Long
		defer func() { cmd.Long = long }()
		if cmd.Long == "" {
			cmd.Long = cmd.Short
		}
		var b strings.Builder
		c.writeKeys(cmd.Context(), &b)
		cmd.Long += "\n\n" + strings.TrimRight(b.String(), "\n")
		base(cmd, args)
	})
}

// takesKey tells whether cmd is a query command (whose third argument is
// a key).
func takesKey(cmd *cobra.Command) bool {
	return strings.Contains(cmd.Use, " INDEX ")
}

// writeKeys writes the program's tables and their indexes' key formats,
// or why they are unknown.
func (c *cli) writeKeys(ctx context.Context, w io.Writer) {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, keysHelpTimeout)
	defer cancel()
	infos, err := c.tableInfos(ctx)
	if err != nil {
		fmt.Fprintf(w, "The program's tables and their key formats are listed here when it answers; now: %v\n", err)
		return
	}
	fmt.Fprintln(w, "The program's tables, and the key format of each index with an example:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, t := range infos {
		fmt.Fprintf(tw, "  %s\n", t.Name)
		for _, f := range t.KeyFormats {
			fmt.Fprintf(tw, "    %s\t%s\n", f.Index, describeKey(f))
		}
	}
	tw.Flush()
}

// describeKey says how to write a key of the index, and what kind of index
// it is when that matters to the commands.
func describeKey(f statedb.KeyFormat) string {
	s := f.String()
	if s == "" {
		s = "(format not documented)"
	}
	var notes []string
	switch {
	case f.Primary:
		notes = append(notes, "primary")
	case f.LPM:
		notes = append(notes, "longest prefix match: db lpm")
	case !f.Unique:
		notes = append(notes, "non-unique: db get prints every match")
	}
	if len(notes) > 0 {
		s += " (" + strings.Join(notes, "; ") + ")"
	}
	return s
}
