package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/steadystate/steadystate/statedb"
)

// The client commands talk to a running agent over its socket.

func socketFlag(cmd *cobra.Command) *string {
	return cmd.PersistentFlags().String("socket", defaultSocket(), "unix socket of the running agent's status API")
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
	socket := socketFlag(cmd)
	asJSON := cmd.Flags().Bool("json", false, "print the raw status report as JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		report, err := fetchStatus(cmd.Context(), *socket)
		if err != nil {
			return err
		}
		if *asJSON {
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(report)
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

// writeStatus prints the health tree, then one line per table with its
// objects counted by status.
func writeStatus(w io.Writer, r *statusReport) error {
	fmt.Fprintln(w, "Health:")
	if err := r.Health.WriteText(w); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nTables:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TABLE\tOBJECTS\tBY STATUS")
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
		fmt.Fprintf(tw, "%s\t%d\t%s\n", t.Name, t.Objects, strings.Join(parts, " "))
	}
	return tw.Flush()
}

func dbCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "db", Short: "Inspect the running agent's tables"}
	socket := socketFlag(cmd)

	show := &cobra.Command{
		Use:   "show TABLE",
		Short: "Print every object of a table",
		Args:  cobra.ExactArgs(1),
	}
	format := show.Flags().String("format", "table", "output format: table, json or yaml")
	show.RunE = func(cmd *cobra.Command, args []string) error {
		switch *format {
		case "table", "json", "yaml":
		default:
			return fmt.Errorf("--format %q: must be table, json or yaml", *format)
		}
		c := statedb.NewUnixClient(*socket, "/statedb")
		objs, err := c.Dump(cmd.Context(), args[0])
		if err != nil {
			return err
		}
		return writeObjects(cmd.OutOrStdout(), objs, *format)
	}

	watch := &cobra.Command{
		Use:   "watch TABLE",
		Short: "Print a table's objects, then every change as it happens (Ctrl-C to stop)",
		Args:  cobra.ExactArgs(1),
	}
	watch.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		c := statedb.NewUnixClient(*socket, "/statedb")
		out := cmd.OutOrStdout()
		for ch, err := range c.Watch(ctx, args[0]) {
			if err != nil {
				return err
			}
			op := "+"
			if ch.Deleted {
				op = "-"
			}
			fmt.Fprintf(out, "%s rev=%d %s\n", op, ch.Revision, ch.Object)
		}
		return nil
	}
	cmd.AddCommand(show, watch)
	return cmd
}

// writeObjects prints objects as a table (the same renderer as the HTTP
// API's ?format=table), as JSON or as YAML.
func writeObjects(w io.Writer, objs []statedb.ObjectJSON, format string) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(objs)
	case "yaml":
		var plain []any
		for _, o := range objs {
			var v any
			if err := json.Unmarshal(o.Object, &v); err != nil {
				return err
			}
			plain = append(plain, map[string]any{"revision": o.Revision, "object": v})
		}
		return yaml.NewEncoder(w).Encode(plain)
	default:
		return statedb.RenderTable(w, objs)
	}
}
