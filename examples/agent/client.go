package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/steadystate/steadystate/examples/iptables"
	"github.com/steadystate/steadystate/examples/routes"
	"github.com/steadystate/steadystate/examples/sysctl"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb/statedbcmd"
)

// The client commands talk to a running agent over its socket, found as
// `agent run` makes it: --socket, else the socket of --netns (see
// clientSocket).

// connFlags adds --socket and --netns to cmd and its subcommands and
// returns the socket they name.
func connFlags(cmd *cobra.Command) func() string {
	socket := cmd.PersistentFlags().String("socket", "", "unix socket of the running agent's status API (default: the one of --netns)")
	netns := cmd.PersistentFlags().String("netns", "", `the namespace the agent manages ("sandbox", "host" or a name), to find its socket (default: $`+envNetNS+` or sandbox)`)
	return func() string { return clientSocket(*socket, *netns) }
}

func unixHTTPClient(socket string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}}
}

func statusCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the running agent's health tree and its tables' objects by status",
		Args:  cobra.NoArgs,
	}
	socket := connFlags(cmd)
	format := cmd.Flags().String("format", "table", "output format: table, json or yaml")
	_ = cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions([]string{"table", "json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
	asJSON := cmd.Flags().Bool("json", false, "same as --format json")
	_ = cmd.Flags().MarkDeprecated("json", "use --format json")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *asJSON {
			*format = "json"
		}
		if err := validFormat(*format); err != nil {
			return err
		}
		report, err := fetchStatus(cmd.Context(), socket())
		if err != nil {
			return err
		}
		switch *format {
		case "json":
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(report)
		case "yaml":
			// Through JSON, so that the field names are the JSON ones.
			b, err := json.Marshal(report)
			if err != nil {
				return err
			}
			var v any
			if err := json.Unmarshal(b, &v); err != nil {
				return err
			}
			return yaml.NewEncoder(cmd.OutOrStdout()).Encode(v)
		}
		return writeStatus(cmd.OutOrStdout(), report)
	}
	return cmd
}

func fetchStatus(ctx context.Context, socket string) (*statusReport, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://agent/status", nil)
	if err != nil {
		return nil, err
	}
	resp, err := unixHTTPClient(socket).Do(req)
	if err != nil {
		return nil, fmt.Errorf("is the agent running? %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("status API: HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	var report statusReport
	if err := json.NewDecoder(resp.Body).Decode(&report); err != nil {
		return nil, fmt.Errorf("status API: %w", err)
	}
	return &report, nil
}

// validFormat checks an output format of the agent's commands: table,
// json or yaml.
func validFormat(format string) error {
	switch format {
	case "table", "json", "yaml":
		return nil
	}
	return fmt.Errorf("--format %q: must be one of table, json, yaml", format)
}

// writeStatus prints the health tree, then one line per table with its
// objects counted by status.
func writeStatus(w io.Writer, r *statusReport) error {
	fmt.Fprintln(w, "Health:")
	if err := r.Health.WriteText(w); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nTables:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TABLE\tOBJECTS\tBY STATUS\tDRIFT REPAIRED\tPRUNED")
	for _, t := range r.Tables {
		kinds := make([]string, 0, len(t.ByStatus))
		for k := range t.ByStatus {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		parts := make([]string, 0, len(kinds))
		for _, k := range kinds {
			name := k
			if name == "" {
				name = "Unset"
			}
			parts = append(parts, fmt.Sprintf("%s=%d", name, t.ByStatus[k]))
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\n", t.Name, t.Objects, strings.Join(parts, " "), t.DriftRepaired, t.Pruned)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := writeRepairs(w, r.Tables); err != nil {
		return err
	}
	if f := r.Fleet; f != nil {
		_, err := fmt.Fprintf(w, "\nFleet: node %s, revision %d reached and reported\n", f.Node, f.Revision)
		return err
	}
	return nil
}

// writeRepairs prints the latest repairs of drift of every table, newest
// first: when, the table, how the drift was found, the object and what was
// changed back. Nothing when there were none.
func writeRepairs(w io.Writer, tables []tableStatus) error {
	var rows []struct {
		table string
		rep   reconciler.Repair
	}
	for _, t := range tables {
		for _, rep := range t.RecentRepairs {
			rows = append(rows, struct {
				table string
				rep   reconciler.Repair
			}{t.Name, rep})
		}
	}
	if len(rows) == 0 {
		return nil
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].rep.At.After(rows[j].rep.At) })
	fmt.Fprintln(w, "\nDrift repaired (latest first):")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WHEN\tTABLE\tFOUND BY\tOBJECT\tCHANGED BACK")
	for _, row := range rows {
		changes := make([]string, len(row.rep.Changes))
		for i, c := range row.rep.Changes {
			changes[i] = c.String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", row.rep.At.Local().Format(time.DateTime), row.table, row.rep.FoundBy,
			row.rep.Object, strings.Join(changes, "; "))
	}
	return tw.Flush()
}

// dbCommand is statedbcmd's command set on the agent's socket (--netns or
// --socket), whose status API serves the statedb HTTP API at /statedb.
func dbCommand() *cobra.Command {
	var socket func() string
	cmd := statedbcmd.New(statedbcmd.Options{
		DefaultSocket: func() string { return socket() },
		PathPrefix:    "/statedb",
	})
	cmd.Short = "Inspect the running agent's tables (sysctls, routes, iptables-rules)"
	cmd.Long += "\n\nThe agent's tables and their indexes (table and index names also complete in the shell;\n" +
		"while the agent runs, this help ends with each index's key format and an example):\n" +
		fmt.Sprintf("  %-15s name, status\n", sysctl.TableName) +
		fmt.Sprintf("  %-15s key, status, covering (longest prefix match: db lpm routes covering ADDRESS)\n", routes.TableName) +
		fmt.Sprintf("  %-15s key, status", iptables.TableName)
	// statedbcmd has --socket; the agent adds --netns to find it.
	netns := cmd.PersistentFlags().String("netns", "", `the namespace the agent manages ("sandbox", "host" or a name), to find its socket (default: $`+envNetNS+` or sandbox)`)
	socket = func() string { return clientSocket("", *netns) }
	return cmd
}
