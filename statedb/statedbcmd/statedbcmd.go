// Package statedbcmd is a reusable `db` command set for programs built on
// statedb: mount it on a cobra root and it inspects a running program's
// tables through the statedb HTTP API (statedb.NewHTTPHandler), over a
// unix socket (--socket) or TCP (--addr):
//
//	db tables                          every table: objects, revision, indexes, initialized
//	db show TABLE [--columns a,b]      every object of a table
//	db get TABLE INDEX KEY             every object with exactly KEY in INDEX
//	db prefix TABLE INDEX PREFIX       the objects whose key in INDEX starts with PREFIX
//	db lowerbound TABLE INDEX KEY      the objects whose key in INDEX is KEY or after
//	db lpm TABLE INDEX ADDRESS         the objects of the longest prefix in INDEX covering ADDRESS
//	db last TABLE INDEX [PREFIX]       the last object of INDEX (or of PREFIX)
//	db reverse-lowerbound TABLE INDEX KEY  the objects whose key in INDEX is KEY or before, last first
//	db watch TABLE                     the objects, then every change as it happens
//	db initialized [TABLE...]          exit 0 once the tables are initialized (--wait)
//
// Keys are the indexes' text forms (as the HTTP API takes them); `db help`
// lists each index of the running program's tables with its key format
// and an example (statedb.TableInfo.KeyFormats), and the error for a
// malformed key names them. On a non-unique index get prints every match
// (as `kubectl get -l` does). Objects print as an aligned table, JSON or
// YAML (--format); --columns picks the fields shown, by name or dotted
// path (status.kind). Table and index names complete in the shell
// (cobra's completion command).
//
// db watch follows the program across restarts: when it reconnects to a
// new database (another statedb.DB.ID), it says so on stderr and lists the
// table again from the start, then goes on with the new changes.
//
// The package is glue: it imports cobra; statedb does not import it.
package statedbcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/steadystate/steadystate/statedb"
)

// Options configures the command set.
type Options struct {
	// Use is the command's name; default "db".
	Use string
	// DefaultSocket is the unix socket used when neither --socket nor
	// --addr is given. Empty means one of them is required.
	DefaultSocket func() string
	// PathPrefix is where the program serves the statedb HTTP API, for
	// example "/statedb"; "" means at the root.
	PathPrefix string
}

// New returns the `db` command with its subcommands.
func New(opts Options) *cobra.Command {
	if opts.Use == "" {
		opts.Use = "db"
	}
	c := &cli{opts: opts}
	cmd := &cobra.Command{
		Use:   opts.Use,
		Short: "Inspect the running program's statedb tables",
		Long: "Inspect the running program's statedb tables through its statedb HTTP API,\n" +
			"over a unix socket (--socket) or TCP (--addr HOST:PORT). Keys are the indexes' text forms.",
	}
	cmd.PersistentFlags().StringVar(&c.socket, "socket", "", "unix socket of the program's API")
	cmd.PersistentFlags().StringVar(&c.addr, "addr", "", "TCP address (HOST:PORT) of the program's API")
	cmd.MarkFlagsMutuallyExclusive("socket", "addr")

	cmd.AddCommand(c.tablesCmd(), c.showCmd())
	for _, q := range []struct {
		use, short string
		op         statedb.QueryOp
	}{
		// get lists: on a non-unique index, every object with the key.
		{"get TABLE INDEX KEY", "Print every object with exactly KEY in INDEX", statedb.QueryList},
		{"prefix TABLE INDEX PREFIX", "Print the objects whose key in INDEX starts with PREFIX", statedb.QueryPrefix},
		{"lowerbound TABLE INDEX KEY", "Print the objects whose key in INDEX is KEY or after, in order", statedb.QueryLowerBound},
		{"lpm TABLE INDEX ADDRESS", "Print the objects of the longest prefix in INDEX that covers ADDRESS (or PREFIX)", statedb.QueryLPM},
		{"last TABLE INDEX [PREFIX]", "Print the last object of INDEX (or of those whose key starts with PREFIX)", statedb.QueryLast},
		{"reverse-lowerbound TABLE INDEX KEY", "Print the objects whose key in INDEX is KEY or before, last first", statedb.QueryReverseLowerBound},
	} {
		cmd.AddCommand(c.queryCmd(q.use, q.short, q.op))
	}
	cmd.AddCommand(c.watchCmd(), c.initializedCmd())
	c.addKeysHelp(cmd)
	return cmd
}

// cli holds the connection flags.
type cli struct {
	opts         Options
	socket, addr string
}

// client returns the API client the flags name.
func (c *cli) client() (*statedb.Client, error) {
	switch {
	case c.addr != "":
		return statedb.NewClient("http://"+c.addr+c.opts.PathPrefix, nil), nil
	case c.socket != "":
		return statedb.NewUnixClient(c.socket, c.opts.PathPrefix), nil
	case c.opts.DefaultSocket != nil:
		if s := c.opts.DefaultSocket(); s != "" {
			return statedb.NewUnixClient(s, c.opts.PathPrefix), nil
		}
	}
	return nil, errors.New("say where the program's API is: --socket PATH or --addr HOST:PORT")
}

// tableInfos fetches the tables, for completion and checks.
func (c *cli) tableInfos(ctx context.Context) ([]statedb.TableInfo, error) {
	cl, err := c.client()
	if err != nil {
		return nil, err
	}
	return cl.Tables(ctx)
}

// complete completes a table name as the first argument and an index name
// of that table as the second.
func (c *cli) complete(maxArgs int) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) >= maxArgs || len(args) > 1 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Second)
		defer cancel()
		infos, err := c.tableInfos(ctx)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var out []cobra.Completion
		for _, t := range infos {
			switch {
			case len(args) == 0:
				out = append(out, t.Name)
			case t.Name == args[0]:
				out = append(out, t.Indexes...)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// formatFlag adds --format and returns a check of its value.
func formatFlag(cmd *cobra.Command, allowed ...string) (*string, func() error) {
	f := cmd.Flags().String("format", allowed[0], "output format: "+strings.Join(allowed, ", "))
	_ = cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions(allowed, cobra.ShellCompDirectiveNoFileComp))
	return f, func() error {
		if !slices.Contains(allowed, *f) {
			return fmt.Errorf("--format %q: must be one of %s", *f, strings.Join(allowed, ", "))
		}
		return nil
	}
}

func (c *cli) tablesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tables",
		Short: "List the tables with their objects, revision, indexes and initialization",
		Args:  cobra.NoArgs,
	}
	format, check := formatFlag(cmd, "table", "json", "yaml")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := check(); err != nil {
			return err
		}
		infos, err := c.tableInfos(cmd.Context())
		if err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		switch *format {
		case "json":
			return writeJSON(out, infos)
		case "yaml":
			return yaml.NewEncoder(out).Encode(infos)
		}
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tOBJECTS\tREVISION\tINDEXES\tINITIALIZED")
		for _, t := range infos {
			init := "yes"
			if !t.Initialized {
				init = "no (waiting for " + strings.Join(t.PendingInitializers, ", ") + ")"
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", t.Name, t.Objects, t.Revision, strings.Join(t.Indexes, ","), init)
		}
		return tw.Flush()
	}
	return cmd
}

func (c *cli) showCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:               "show TABLE",
		Short:             "Print every object of a table",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: c.complete(1),
	}
	format, check := formatFlag(cmd, "table", "json", "yaml")
	columns := cmd.Flags().StringSlice("columns", nil, "fields to show, by name or dotted path (e.g. name,status.kind)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := check(); err != nil {
			return err
		}
		cl, err := c.client()
		if err != nil {
			return err
		}
		objs, err := cl.Dump(cmd.Context(), args[0])
		if err != nil {
			return c.explain(cmd.Context(), err)
		}
		return writeObjects(cmd.OutOrStdout(), objs, *format, *columns)
	}
	return cmd
}

func (c *cli) queryCmd(use, short string, op statedb.QueryOp) *cobra.Command {
	args := cobra.ExactArgs(3)
	if op == statedb.QueryLast {
		args = cobra.RangeArgs(2, 3)
	}
	cmd := &cobra.Command{
		Use:               use,
		Short:             short,
		Args:              args,
		ValidArgsFunction: c.complete(2),
	}
	format, check := formatFlag(cmd, "table", "json", "yaml")
	columns := cmd.Flags().StringSlice("columns", nil, "fields to show, by name or dotted path")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := check(); err != nil {
			return err
		}
		cl, err := c.client()
		if err != nil {
			return err
		}
		key := ""
		if len(args) == 3 {
			key = args[2]
		}
		objs, err := cl.Query(cmd.Context(), args[0], op, args[1], key)
		if err != nil {
			return c.explain(cmd.Context(), err)
		}
		return writeObjects(cmd.OutOrStdout(), objs, *format, *columns)
	}
	return cmd
}

// explain adds the table names to an error about an unknown table.
func (c *cli) explain(ctx context.Context, err error) error {
	var apiErr *statedb.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		return err
	}
	infos, lerr := c.tableInfos(ctx)
	if lerr != nil {
		return err
	}
	var names []string
	for _, t := range infos {
		names = append(names, t.Name)
	}
	return fmt.Errorf("%w (tables: %s)", err, strings.Join(names, ", "))
}

func (c *cli) watchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "watch TABLE",
		Short: "Print a table's objects, then every change as it happens (Ctrl-C to stop)",
		Long: "Print a table's objects, then every change as it happens, one line each:\n" +
			"\"+ rev=N OBJECT\" for an insert or update, \"- rev=N OBJECT\" for a delete (--format json: one JSON\n" +
			"change per line). When the program drops the stream (a reader too slow for it), watch\n" +
			"reconnects and goes on after the last revision it printed; deletes made while it was\n" +
			"disconnected are not shown (the fresh listing no longer has the objects). When it\n" +
			"reconnects to a new instance of the program's database (the program restarted), it says\n" +
			"so on stderr and prints the table's listing again, then the new changes: objects of the\n" +
			"old instance missing from that listing are gone.",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: c.complete(1),
	}
	format, check := formatFlag(cmd, "text", "json")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := check(); err != nil {
			return err
		}
		cl, err := c.client()
		if err != nil {
			return err
		}
		ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return watch(ctx, cl, args[0], *format, cmd.OutOrStdout(), cmd.ErrOrStderr())
	}
	return cmd
}

// watch prints the changes of table until ctx ends, reconnecting when the
// server ends the stream: to the same database it goes on after the last
// revision printed; to a new one (another DB ID: the program restarted)
// it says so and prints the new database's listing and changes.
func watch(ctx context.Context, cl *statedb.Client, table, format string, out, errOut io.Writer) error {
	var last statedb.Revision
	var dbID string
	delay := 100 * time.Millisecond
	for attempt := 0; ; attempt++ {
		got := false
		stream, err := cl.OpenChanges(ctx, table)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil
		case err != nil && attempt == 0:
			return err // the first connection failed: say why
		case err != nil:
			fmt.Fprintf(errOut, "# reconnecting failed: %v\n", err)
		default:
			if attempt > 0 && stream.DBID != dbID {
				fmt.Fprintf(errOut, "# a new instance of the program's database (ID %s, was %s): it restarted; listing %s again\n", stream.DBID, dbID, table)
				last = 0
			}
			dbID = stream.DBID
			got, last = printChanges(stream, last, format, out, errOut)
			stream.Close()
			if ctx.Err() == nil {
				fmt.Fprintf(errOut, "# the stream ended; reconnecting after revision %d\n", last)
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		if got {
			delay = 100 * time.Millisecond
		} else {
			delay = min(2*delay, 5*time.Second)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
	}
}

// printChanges prints the stream's changes after revision last until it
// ends, and returns whether it got any and the last revision printed.
func printChanges(stream *statedb.ChangeStream, last statedb.Revision, format string, out, errOut io.Writer) (bool, statedb.Revision) {
	got := false
	for ch, err := range stream.All() {
		if err != nil {
			fmt.Fprintf(errOut, "# stream failed: %v\n", err)
			break
		}
		got = true
		if ch.Revision <= last {
			continue // seen before the reconnection
		}
		last = ch.Revision
		if format == "json" {
			line, _ := json.Marshal(ch)
			fmt.Fprintf(out, "%s\n", line)
			continue
		}
		op := "+"
		if ch.Deleted {
			op = "-"
		}
		fmt.Fprintf(out, "%s rev=%d %s\n", op, ch.Revision, ch.Object)
	}
	return got, last
}

func (c *cli) initializedCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "initialized [TABLE...]",
		Short: "Exit 0 if the tables (default: all) are initialized, 1 if not (--wait: until they are)",
		Args:  cobra.ArbitraryArgs,
		ValidArgsFunction: func(cmd *cobra.Command, args []string, s string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return c.complete(1)(cmd, nil, s)
		},
		SilenceUsage: true,
	}
	wait := cmd.Flags().Duration("wait", 0, "wait up to this long for the tables to be initialized")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		deadline := time.Now().Add(*wait)
		for {
			pending, err := c.uninitialized(cmd.Context(), args)
			if err != nil {
				return err
			}
			if len(pending) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "initialized")
				return nil
			}
			if time.Now().After(deadline) {
				return &NotInitializedError{Pending: pending}
			}
			select {
			case <-cmd.Context().Done():
				return cmd.Context().Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return cmd
}

// NotInitializedError is the error of `db initialized` when some tables
// are not initialized: a program maps it to exit status 1.
type NotInitializedError struct {
	Pending []string // "table (waiting for a, b)"
}

func (e *NotInitializedError) Error() string {
	return "not initialized: " + strings.Join(e.Pending, "; ")
}

// uninitialized returns the named tables (all if none) that are not
// initialized, with what they wait for.
func (c *cli) uninitialized(ctx context.Context, names []string) ([]string, error) {
	infos, err := c.tableInfos(ctx)
	if err != nil {
		return nil, err
	}
	var known []string
	for _, t := range infos {
		known = append(known, t.Name)
	}
	for _, n := range names {
		if !slices.Contains(known, n) {
			return nil, fmt.Errorf("no table %q (tables: %s)", n, strings.Join(known, ", "))
		}
	}
	var pending []string
	for _, t := range infos {
		if (len(names) == 0 || slices.Contains(names, t.Name)) && !t.Initialized {
			pending = append(pending, fmt.Sprintf("%s (waiting for %s)", t.Name, strings.Join(t.PendingInitializers, ", ")))
		}
	}
	return pending, nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
