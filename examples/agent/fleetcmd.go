package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.yaml.in/yaml/v3"

	"github.com/steadystate/steadystate/etcd"
)

// fleetCommand is `agent fleet`: the fleet's desired state and status in
// etcd, for the operator (agents in fleet mode read and write the same
// keys; see fleet.go).
func fleetCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fleet",
		Short: "The fleet in etcd: apply a desired file to every node or one, see what is applied where",
		Long: `The fleet's desired state and status in etcd, shared by every agent run with
--etcd-endpoints. Each table's objects are kept fleet-wide (every node) and
per node (one node; where both have an object of the same name, the node's
wins).

  agent fleet apply -f desired.yaml [--node NAME]   replace the desired state (fleet-wide, or one node's)
  agent fleet status                                 every live node: revision reached, objects by status, errors
  agent fleet watch                                  the same, again at every change`,
	}
	var opts etcdOptions
	opts.flags(cmd.PersistentFlags())
	cmd.AddCommand(fleetApplyCommand(&opts), fleetStatusCommand(&opts), fleetWatchCommand(&opts))
	return cmd
}

// fleetApplyCommand is `agent fleet apply`.
func fleetApplyCommand(opts *etcdOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "apply -f FILE [--node NAME]",
		Short: "Validate a desired-state file like an agent's loader and make it the fleet's (or one node's) desired state",
		Long: `Validate a desired-state file exactly as an agent's loader does and make it
the desired state of every node (or, with --node, of that node alone),
replacing what that scope held: objects not in the file are removed.

A file that does not parse or validate writes nothing. The three tables'
new state is written with etcd.ApplyTables: a small change in one
transaction, a large one staged under new generations and put in force by
one transaction for all of them, so that an agent sees the old or the new
state whole, never a mix; a failure leaves the old state in force.
It prints the etcd revision at which the new state is in force; ` + "`agent fleet\nstatus`" + ` says which nodes have applied it.`,
		Args: cobra.NoArgs,
	}
	file := cmd.Flags().StringP("filename", "f", "", "the desired-state file (YAML, or JSON if it ends in .json)")
	node := cmd.Flags().String("node", "", "apply to this node alone (default: every node)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *file == "" {
			return exitError{code: exitUsage, err: errors.New("-f: give the desired-state file to apply")}
		}
		data, err := os.ReadFile(*file)
		if err != nil {
			return err
		}
		f, err := decodeDesired(*file, data)
		if err == nil {
			err = validateDesired(*file, f)
		}
		if err != nil {
			return fmt.Errorf("not applied: %w", err)
		}
		objects, err := desiredObjects(f)
		if err != nil {
			return fmt.Errorf("not applied: %w", err)
		}
		if cmd.Flags().Changed("node") && *node == "" {
			return exitError{code: exitUsage, err: errors.New("--node \"\": give a node name, or leave --node out to apply to every node")}
		}
		if strings.ContainsAny(*node, "/\x00") {
			return exitError{code: exitUsage, err: fmt.Errorf("--node %q: a node name has no '/'", *node)}
		}
		scope := etcd.ScopeAll
		if *node != "" {
			scope = etcd.NodeScope(*node)
		}
		c, err := opts.client()
		if err != nil {
			return err
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
		defer cancel()
		rev, err := etcd.ApplyTables(ctx, c, opts.layout(), scope, objects)
		if err != nil {
			return fmt.Errorf("applying %s to %s (nothing changed): %w", *file, scopeName(*node), err)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "applied %s to %s: %d sysctls, %d routes, %d rules; in force at revision %d\n",
			*file, scopeName(*node), len(f.Sysctls), len(f.Routes), len(f.Rules), rev)
		return nil
	}
	return cmd
}

func scopeName(node string) string {
	if node == "" {
		return "every node"
	}
	return "node " + node
}

// fleetReport is what `fleet status` prints.
type fleetReport struct {
	Summary  string       `json:"summary" yaml:"summary"`
	Revision int64        `json:"revision" yaml:"revision"` // the latest desired state's
	Applied  int          `json:"applied" yaml:"applied"`
	Nodes    []nodeReport `json:"nodes" yaml:"nodes"`
	read     int64        // the etcd revision it was read at
}

type nodeReport struct {
	etcd.NodeStatus `yaml:",inline"`
	// NotDone are the node's objects not Done, by table and name, when it
	// keeps object statuses (agent run --object-status) and --objects
	// asked for them.
	NotDone map[string]map[string]etcd.ObjectStatus `json:"notDone,omitempty" yaml:"notDone,omitempty"`
	// Desired is the revision of the node's desired state (fleet-wide
	// and its own); Applied says whether the node has applied it.
	Desired int64 `json:"desired" yaml:"desired"`
	Applied bool  `json:"applied" yaml:"applied"`
}

// readFleet reads every live node's status and its desired revision.
func readFleet(ctx context.Context, c *clientv3.Client, l etcd.Layout, objects bool) (fleetReport, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	view, err := etcd.Fleet(ctx, c, l)
	if err != nil {
		return fleetReport{}, err
	}
	rep := fleetReport{Nodes: []nodeReport{}, read: view.Revision}
	// The fleet-wide state's revision counts even with no node up.
	all, err := fleetWideRevision(ctx, c, l)
	if err != nil {
		return fleetReport{}, err
	}
	rep.Revision = all
	for _, st := range view.Nodes {
		want, err := etcd.DesiredRevision(ctx, c, l, fleetTables, st.Node)
		if err != nil {
			return fleetReport{}, err
		}
		n := nodeReport{NodeStatus: st, Desired: want, Applied: st.Applied(want)}
		if objects {
			all, err := etcd.ObjectStatuses(ctx, c, l, st.Node)
			if err != nil {
				return fleetReport{}, err
			}
			for table, byName := range all {
				for name, ost := range byName {
					if ost.Kind == "Done" {
						continue
					}
					if n.NotDone == nil {
						n.NotDone = map[string]map[string]etcd.ObjectStatus{}
					}
					if n.NotDone[table] == nil {
						n.NotDone[table] = map[string]etcd.ObjectStatus{}
					}
					n.NotDone[table][name] = ost
				}
			}
		}
		if n.Applied {
			rep.Applied++
		}
		rep.Revision = max(rep.Revision, want)
		rep.Nodes = append(rep.Nodes, n)
	}
	rep.Summary = fmt.Sprintf("applied on %d of %d nodes at revision %d", rep.Applied, len(rep.Nodes), rep.Revision)
	return rep, nil
}

// fleetWideRevision is the revision of the last change to the fleet-wide
// desired state: the latest ModRevision of the tables' current keys of
// scope all (as etcd.DesiredRevision, which always adds a node's scope),
// read in one transaction.
func fleetWideRevision(ctx context.Context, c *clientv3.Client, l etcd.Layout) (int64, error) {
	var ops []clientv3.Op
	for _, t := range fleetTables {
		ops = append(ops, clientv3.OpGet(l.Current(t, etcd.ScopeAll)))
	}
	resp, err := c.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return 0, fmt.Errorf("reading the fleet-wide desired state: %w", err)
	}
	var rev int64
	for _, r := range resp.Responses {
		for _, kv := range r.GetResponseRange().Kvs {
			rev = max(rev, kv.ModRevision)
		}
	}
	return rev, nil
}

// printFleet writes rep as a table, JSON or YAML.
func printFleet(w io.Writer, rep fleetReport, format string) error {
	switch format {
	case "json":
		b, err := json.Marshal(rep)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case "yaml":
		b, err := yaml.Marshal(rep)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "---\n%s", b)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tREACHED\tDESIRED\tAPPLIED\tOBJECTS\tERRORS")
	for _, n := range rep.Nodes {
		applied := "no"
		if n.Applied {
			applied = "yes"
		}
		var counts []string
		for _, k := range slices.Sorted(maps.Keys(n.Objects)) {
			counts = append(counts, fmt.Sprintf("%s=%d", k, n.Objects[k]))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\n", n.Node, n.Revision, n.Desired, applied, strings.Join(counts, " "), strings.Join(n.Errors, "; "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range rep.Nodes {
		for _, table := range slices.Sorted(maps.Keys(n.NotDone)) {
			for _, name := range slices.Sorted(maps.Keys(n.NotDone[table])) {
				ost := n.NotDone[table][name]
				key, _ := url.PathUnescape(name)
				fmt.Fprintf(w, "  %s: %s %s: %s %s\n", n.Node, table, key, ost.Kind, ost.Error)
			}
		}
	}
	_, err := fmt.Fprintln(w, rep.Summary)
	return err
}

// checkFormat is the check of fleet's --format: an exit-2 usage error.
func checkFormat(format string) error {
	if err := validFormat(format); err != nil {
		return exitError{code: exitUsage, err: err}
	}
	return nil
}

// fleetStatusCommand is `agent fleet status`.
func fleetStatusCommand(opts *etcdOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status",
		Short: `Every live node: revision reached, objects by status, errors; and "applied on N of M nodes at revision R"`,
		Long: `Print every live node (its status is kept under a lease: a node whose agent
died leaves within its --status-ttl): the etcd revision of the desired state
it has reached, the revision of its desired state (the fleet-wide one and
its own), whether it has applied it (reached it, and nothing is pending or
failing), its objects by status and its latest errors; then the summary
"applied on N of M nodes at revision R", R being the latest desired state.`,
		Args: cobra.NoArgs,
	}
	format := cmd.Flags().String("format", "table", "output format: table, json or yaml")
	objects := cmd.Flags().Bool("objects", false, "also list each node's objects not Done (nodes run with --object-status)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := checkFormat(*format); err != nil {
			return err
		}
		c, err := opts.client()
		if err != nil {
			return err
		}
		defer c.Close()
		rep, err := readFleet(cmd.Context(), c, opts.layout(), *objects)
		if err != nil {
			return err
		}
		return printFleet(cmd.OutOrStdout(), rep, *format)
	}
	return cmd
}

// fleetWatchCommand is `agent fleet watch`.
func fleetWatchCommand(opts *etcdOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Print the fleet status, then again whenever a node's status or the desired state changes (Ctrl-C ends)",
		Args:  cobra.NoArgs,
	}
	format := cmd.Flags().String("format", "table", "output format: table, json (one object per line) or yaml")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := checkFormat(*format); err != nil {
			return err
		}
		c, err := opts.client()
		if err != nil {
			return err
		}
		defer c.Close()
		ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return watchFleet(ctx, c, opts.layout(), cmd.OutOrStdout(), *format)
	}
	return cmd
}

// watchFleet prints the fleet status at once and after every change of the
// keys under the prefix (statuses, desired state) from the revision it
// read, changes within 100ms printed once, and every 10s in any case (a
// node whose lease expired, etcd unreachable: said on stderr), until ctx
// ends. A lost watch is opened again.
func watchFleet(ctx context.Context, c *clientv3.Client, l etcd.Layout, w io.Writer, format string) error {
	prefix := strings.TrimSuffix(l.StatusPrefix(), "status/")
	var last string
	var rev int64
	show := func() error {
		rep, err := readFleet(ctx, c, l, false)
		if err != nil {
			fmt.Fprintf(os.Stderr, "reading the fleet: %v (trying again)\n", err)
			return err
		}
		rev = rep.read
		var b strings.Builder
		if err := printFleet(&b, rep, format); err != nil {
			return err
		}
		if b.String() == last {
			return nil
		}
		last = b.String()
		if format == "table" {
			fmt.Fprintf(w, "--- %s\n", time.Now().Format(time.TimeOnly))
		}
		_, err = io.WriteString(w, last)
		return err
	}
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for ctx.Err() == nil {
		if show() != nil {
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		wctx, cancel := context.WithCancel(ctx)
		events := c.Watch(clientv3.WithRequireLeader(wctx), prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	watching:
		for {
			select {
			case <-ctx.Done():
				break watching
			case <-tick.C:
				show()
			case resp, ok := <-events:
				if !ok || resp.Err() != nil {
					break watching
				}
				// Let a burst settle: one print for an apply's transactions.
				settle := time.After(100 * time.Millisecond)
			drain:
				for {
					select {
					case <-settle:
						break drain
					case _, ok := <-events:
						if !ok {
							break drain
						}
					}
				}
				show()
			}
		}
		cancel()
	}
	return nil
}
