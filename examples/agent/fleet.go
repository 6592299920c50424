package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/steadystate/steadystate/etcd/fleetcell"
	"github.com/steadystate/steadystate/etcd/fleetcmd"
	"github.com/steadystate/steadystate/examples/iptables"
	"github.com/steadystate/steadystate/examples/routes"
	"github.com/steadystate/steadystate/examples/sysctl"
	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/job"
)

// Fleet mode (--etcd-endpoints): the desired state comes from etcd instead
// of a file, and the node's status goes back to etcd.
//
// The path of a desired object: `agent fleet apply` validates a desired
// file like the loader and writes the three tables' objects with
// etcd.ApplyTables, one etcd key per object (its name: fleetName of its
// primary key, its value: the object as JSON, without status), fleet-wide
// or for one node; each agent's one reflector (a reflector.Multi) lists and
// watches the three tables' keys through one etcd.Source and commits each
// etcd revision to all three tables in one transaction, through their
// DesiredWriters, so the node switches from one apply to the next whole;
// the reconcilers apply them as in file mode; the status reporter
// publishes the node's summary (the revision reached: one number, the
// reflector's; counts by status; the latest errors) under a lease, and
// `agent fleet status` reads every node's.
//
// Everything else is the same as with a file: the namespace, the status
// API, the durable record, prune only after the first complete list.

// fleetTables are the tables fleet mode fills, as named in etcd.
var fleetTables = []string{sysctl.TableName, routes.TableName, iptables.TableName}

// fleetName is the etcd name of an object whose primary key reads key
// (a name may not hold '/', which route and rule keys have).
func fleetName(key string) string { return fleetcell.ObjectName(key) }

// The primary keys of the three kinds as text.
func sysctlKey(s *sysctl.Sysctl) string { return s.Name }
func routeKey(r *routes.Route) string   { return r.Key().String() }
func ruleKey(r *iptables.Rule) string   { return r.Key() }

// decodeObject is the reflector's transform of one kind: the value
// decoded strictly (an unknown field is an error), validated like a file's
// entry, and stored under its own name.
func decodeObject[T any, PT interface {
	*T
	Validate() error
}](key func(PT) string) func(name string, v []byte) (PT, error) {
	return func(name string, v []byte) (PT, error) {
		obj := PT(new(T))
		dec := json.NewDecoder(bytes.NewReader(v))
		dec.DisallowUnknownFields()
		if err := dec.Decode(obj); err != nil {
			return nil, fmt.Errorf("decoding: %w", err)
		}
		if err := obj.Validate(); err != nil {
			return nil, err
		}
		if want := fleetName(key(obj)); want != name {
			return nil, fmt.Errorf("stored under the name %q, but the object's name is %q", name, want)
		}
		return obj, nil
	}
}

// desiredObjects turns a validated desired file into each table's objects
// by name, as `fleet apply` writes them (and file mode reads them).
func desiredObjects(f *desiredFile) (map[string]map[string][]byte, error) {
	out := map[string]map[string][]byte{}
	var errs []error
	for _, k := range kinds {
		objs := map[string][]byte{}
		for _, obj := range f.of(k) {
			name, v, err := k.encode(obj)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s %s: %w", k.tableName(), name, err))
				continue
			}
			objs[name] = v
		}
		out[k.tableName()] = objs
	}
	return out, errors.Join(errs...)
}

// fleetCells are fleet mode's part of the agent: the node side
// (fleetcell.Cell), fed with the kinds' tables (kindCells provides them);
// the hive builds them only with --etcd-endpoints.
var fleetCells = cell.Group(
	fleetcell.Cell,
	cell.Invoke(closeFirstLoad),
)

// closeFirstLoad makes /readyz follow the node: ready once every table was
// listed from etcd (and, as in file mode, every object tried).
func closeFirstLoad(jobs job.Group, n *fleetcell.Node, first *firstLoad) error {
	return jobs.Add(job.OneShot("first-list", func(ctx context.Context, _ cell.Health) error {
		select {
		case <-n.Listed():
			first.close()
		case <-ctx.Done():
		}
		return nil
	}))
}

// fleetCommand is `agent fleet`: fleetcmd's command set over the agent's
// three tables, validating a desired file as the loader does.
func fleetCommand() *cobra.Command {
	return fleetcmd.Command(fleetcmd.Config{Tables: fleetTables, Program: "agent", Decode: func(path string, data []byte) (map[string]map[string][]byte, error) {
		f, err := decodeDesired(path, data)
		if err == nil {
			_, err = validateDesired(path, f)
		}
		if err != nil {
			return nil, err
		}
		return desiredObjects(f)
	}})
}
