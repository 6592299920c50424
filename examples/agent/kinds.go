package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"go.yaml.in/yaml/v3"

	"github.com/steadystate/steadystate/etcd/fleetcell"
	"github.com/steadystate/steadystate/examples/iptables"
	"github.com/steadystate/steadystate/examples/routes"
	"github.com/steadystate/steadystate/examples/sysctl"
	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/job"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reflector"
	"github.com/steadystate/steadystate/statedb"
)

// kinds are the kinds of desired object the agent keeps, declared once: the
// desired file's keys, the codec that file and fleet mode share, the one
// reflector's tables in either mode, the status API, readiness and the
// progress log loop over them. A fourth kind is a line here and its target
// package (whose cell provides its table and reconciler).
var kinds = []agentKind{
	kindOf[sysctl.Sysctl, *sysctl.Sysctl]{file: "sysctls", table: sysctl.TableName, noun: "sysctl", key: func(s *sysctl.Sysctl) string { return s.Name }, newTbl: sysctl.NewTable},
	kindOf[routes.Route, *routes.Route]{file: "routes", table: routes.TableName, noun: "route", key: func(r *routes.Route) string { return r.Key().String() }, newTbl: routes.NewTable},
	kindOf[iptables.Rule, *iptables.Rule]{file: "rules", table: iptables.TableName, noun: "rule", key: (*iptables.Rule).Key, newTbl: iptables.NewTable},
}

// kindConstructors are the kinds' constructors in the agent's hive, in the
// order of kinds: instantiated here, outside generic code, so that `agent
// run cells` names them (kindCells checks that they match kinds).
var kindConstructors = []any{
	kindRuntimeOf[sysctl.Sysctl, *sysctl.Sysctl],
	kindRuntimeOf[routes.Route, *routes.Route],
	kindRuntimeOf[iptables.Rule, *iptables.Rule],
}

// kindTargets are the kinds' target packages in the agent's hive, in the
// order of kinds: each one's cell, given the agent's intervals and durable
// record (withAgent), and its target's config, in the namespace of --netns.
var kindTargets = []cell.Cell{
	cell.Group(cell.Provide(sysctlTarget), cell.Decorate(withAgent[*sysctl.Sysctl], sysctl.Cell)),
	cell.Group(cell.Provide(routesTarget), cell.Decorate(withAgent[*routes.Route], routes.Cell)),
	cell.Group(cell.Provide(iptablesTarget), cell.Decorate(withAgent[*iptables.Rule], iptables.Cell)),
}

// kindDryRuns are the kinds' dry runs for `agent diff`, in the order of
// kinds: the kind's target made outside the hive (with rec, nil when no
// record is read), planning what it would change for the objects of table
// (the kind's, in db).
var kindDryRuns = []func(ctx context.Context, db *statedb.DB, table statedb.TableMeta, ns *Namespace, cfg AgentConfig, rec *stateRecord) (reconciler.Plan, error){
	func(ctx context.Context, db *statedb.DB, table statedb.TableMeta, ns *Namespace, cfg AgentConfig, rec *stateRecord) (reconciler.Plan, error) {
		t, err := sysctl.NewTarget(sysctlTarget(ns, cfg, rec))
		if err != nil {
			return nil, err
		}
		return reconciler.DryRun(ctx, db, table.(statedb.RWTable[*sysctl.Sysctl]).ToTable(), reconciler.Target[*sysctl.Sysctl](t))
	},
	func(ctx context.Context, db *statedb.DB, table statedb.TableMeta, ns *Namespace, _ AgentConfig, _ *stateRecord) (reconciler.Plan, error) {
		t, err := routes.NewTarget(routesTarget(ns))
		if err != nil {
			return nil, err
		}
		defer t.Close()
		return reconciler.DryRun(ctx, db, table.(statedb.RWTable[*routes.Route]).ToTable(), reconciler.Target[*routes.Route](t))
	},
	func(ctx context.Context, db *statedb.DB, table statedb.TableMeta, ns *Namespace, _ AgentConfig, rec *stateRecord) (reconciler.Plan, error) {
		rules := table.(statedb.RWTable[*iptables.Rule])
		tc := iptablesTarget(ns, rec)
		tc.Rules = rules
		t, err := iptables.NewTarget(tc)
		if err != nil {
			return nil, err
		}
		return reconciler.DryRun(ctx, db, rules.ToTable(), reconciler.Target[*iptables.Rule](t))
	},
}

// sysctlTarget manages the agent's namespace. Outside --netns host only
// net.* sysctls: the others are the whole machine's, in any namespace.
// The original values live in the state record, so that a restarted agent
// restores what an earlier run changed.
// (agent diff without a record has none: nil.)
func sysctlTarget(ns *Namespace, cfg AgentConfig, rec *stateRecord) sysctl.TargetConfig {
	tc := sysctl.TargetConfig{NetNS: ns.Path, NetworkOnly: cfg.NetNS != netnsHost}
	if rec != nil {
		tc.Originals = rec
	}
	return tc
}

func routesTarget(ns *Namespace) routes.TargetConfig {
	return routes.TargetConfig{NetNS: ns.Path}
}

// iptablesTarget leaves Rules to iptables.Cell, which uses its table. How
// iptables shows the rules is kept in the state record, so that a
// restarted agent recognizes the rules in place at once (agent diff
// without a record learns them: nil).
func iptablesTarget(ns *Namespace, rec *stateRecord) iptables.TargetConfig {
	tc := iptables.TargetConfig{NetNS: ns.Path}
	if rec != nil {
		tc.Texts = rec
	}
	return tc
}

// agentKind is one kind: what is done with its objects without their type.
type agentKind interface {
	fileKey() string   // its key in the desired file: "routes"
	tableName() string // its table's name, in etcd too
	// decodeYAML and decodeJSON read the kind's list of a desired file;
	// each error says where (LINE: KIND[i].FIELD: problem).
	decodeYAML(node *yaml.Node) (objs []any, lines []int, err error)
	decodeJSON(data json.RawMessage) ([]any, error)
	// directList decodes the kind's entries of a file of the block shape
	// without nodes (see fastdecode.go).
	directList() directList
	// validate checks the entries and finds duplicates ("line 7:
	// routes[2]: ...", with lines, each entry's line, if known). With no
	// error, names holds each entry's name (name's).
	validate(objs []any, lines []int) (names []string, errs []error)
	// encode is an object's name and value in the codec of both modes.
	encode(obj any) (name string, value []byte, err error)
	// name is an object's name in that codec (encode's name).
	name(obj any) string
	// same tells whether a and b, objects of the kind, are the same
	// desired object (status aside); ok is false when either is not of
	// the kind.
	same(a, b any) (equal, ok bool)
	// decodes tells whether a value decodes as the reflector decodes it.
	decodes(name string, v []byte) error
	// describe names an object of the kind ("route blackhole 192.0.2.0/24").
	describe(obj any) (string, bool)
	// newTable makes the kind's table in db (outside the hive: agent diff).
	newTable(db *statedb.DB) (statedb.TableMeta, error)
	// fill writes objs into table (the kind's) as desired objects.
	fill(txn statedb.WriteTxn, table statedb.TableMeta, objs []any) error
	// constructs tells whether ctor is the kind's constructor.
	constructs(ctor any) bool
}

// object is what the agent needs of a kind's objects.
type object[T any] interface {
	*T
	Validate() error
	Equal(*T) bool
	GetStatus() reconciler.Status
	SetStatus(reconciler.Status) *T
	String() string
}

// kindOf is an agentKind of objects *T.
type kindOf[T any, PT object[T]] struct {
	file, table, noun string
	key               func(PT) string                                                        // the primary key's text
	newTbl            func(*statedb.DB, ...statedb.Indexer[PT]) (statedb.RWTable[PT], error) // its target package's NewTable
}

func (k kindOf[T, PT]) newTable(db *statedb.DB) (statedb.TableMeta, error) { return k.newTbl(db) }

func (k kindOf[T, PT]) fileKey() string   { return k.file }
func (k kindOf[T, PT]) tableName() string { return k.table }

func (k kindOf[T, PT]) decodeYAML(node *yaml.Node) ([]any, []int, error) {
	objs, lines, err := decodeList[T](k.file, node)
	return anys(objs), lines, err
}

func (k kindOf[T, PT]) directList() directList { return newDirectList[T]() }

func (k kindOf[T, PT]) decodeJSON(data json.RawMessage) ([]any, error) {
	var objs []*T
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&objs); err != nil {
		return nil, fmt.Errorf("%s: %w", k.file, err)
	}
	return anys(objs), nil
}

func anys[T any](objs []*T) []any {
	out := make([]any, len(objs))
	for i, o := range objs {
		if o != nil {
			out[i] = o
		}
	}
	return out
}

func (k kindOf[T, PT]) validate(objs []any, lines []int) ([]string, []error) {
	typed := make([]PT, len(objs))
	for i, o := range objs {
		if o != nil {
			typed[i] = PT(o.(*T))
		}
	}
	keys, errs := validateAll(k.file, typed, k.key, lines)
	if len(errs) > 0 {
		return nil, errs
	}
	for i, key := range keys {
		keys[i] = fleetName(key)
	}
	return keys, nil
}

func (k kindOf[T, PT]) encode(obj any) (string, []byte, error) {
	o := PT(obj.(*T))
	v, err := encodeObject(o)
	return fleetName(k.key(o)), v, err
}

func (k kindOf[T, PT]) name(obj any) string { return fleetName(k.key(PT(obj.(*T)))) }

func (k kindOf[T, PT]) same(a, b any) (equal, ok bool) {
	x, okA := a.(*T)
	y, okB := b.(*T)
	if !okA || !okB {
		return false, okA || okB
	}
	return PT(x).Equal(y), true
}

func (k kindOf[T, PT]) describe(obj any) (string, bool) {
	if o, ok := obj.(*T); ok {
		return k.noun + " " + PT(o).String(), true
	}
	return "", false
}

// decode is the reflector's transform of the kind, in either mode: the
// value decoded strictly, validated like a file's entry, under its name.
func (k kindOf[T, PT]) decode(name string, v []byte) (PT, error) {
	return decodeObject[T, PT](k.key)(name, v)
}

func (k kindOf[T, PT]) equal(a, b PT) bool                     { return a.Equal((*T)(b)) }
func (k kindOf[T, PT]) setStatus(o PT, s reconciler.Status) PT { return PT(o.SetStatus(s)) }

func (k kindOf[T, PT]) fill(txn statedb.WriteTxn, table statedb.TableMeta, objs []any) error {
	t, ok := table.(statedb.RWTable[PT])
	if !ok {
		return fmt.Errorf("table %s is not the %s table", table.Name(), k.file)
	}
	w := reconciler.DesiredWriter[PT]{Table: t, Equal: k.equal, SetObjectStatus: k.setStatus}
	for _, obj := range objs {
		if _, err := w.Upsert(txn, PT(obj.(*T))); err != nil {
			return err
		}
	}
	return nil
}

func (k kindOf[T, PT]) decodes(name string, v []byte) error {
	_, err := k.decode(name, v)
	return err
}

// into is the kind's table in the reflector of file mode.
func (k kindOf[T, PT]) into(t statedb.RWTable[PT]) reflector.TableSpec[fileObject] {
	return reflector.Into[fileObject, PT]{
		Table:     k.table,
		Writer:    reconciler.DesiredWriter[PT]{Table: t, Equal: k.equal, SetObjectStatus: k.setStatus},
		Transform: k.fileTransform,
	}
}

// fileTransform is the reflector's transform of the kind in file mode:
// the object the file source decoded and validated, as a copy of the
// table's own (the writer sets its status; the source keeps the original
// to compare the next version with). Its name is not checked against the
// object: the file mode names every object from the object itself (name,
// and decode for an edit), so a check would only spend, at 60,000 objects,
// 15-20 ms of a start's critical path formatting and escaping each key
// again. (Fleet mode's names come from etcd: decodeObject checks them.)
func (k kindOf[T, PT]) fileTransform(_ string, v fileObject) (PT, error) {
	o, ok := v.obj.(*T)
	if !ok {
		return nil, fmt.Errorf("%T is not a %s", v.obj, k.noun)
	}
	c := *o
	return &c, nil
}

// kindOut is what a kind provides to the agent's hive: its part of the
// file mode's reflector, of the status API and readiness, and its table
// for fleet mode (fleetcell).
type kindOut struct {
	cell.Out
	Kind  kindRuntime     `group:"agent-kinds"`
	Fleet fleetcell.Table `group:"fleet-tables"`
}

// kindRuntime is a kind in the running agent.
type kindRuntime struct {
	order    int // its place in kinds
	into     reflector.TableSpec[fileObject]
	status   func(statedb.ReadTxn) tableStatus
	ready    func(statedb.ReadTxn) error
	watch    func(statedb.ReadTxn) <-chan struct{} // closes on any change of the table
	progress func(jobs job.Group, db *statedb.DB, log *slog.Logger, started <-chan struct{}) error
}

func (k kindOf[T, PT]) constructs(ctor any) bool {
	_, ok := ctor.(func(statedb.RWTable[PT], reconciler.Reconciler[PT]) kindOut)
	return ok
}

// kindRuntimeOf is the constructor of the kind of *T in the agent's hive
// (a named function, so that `agent run cells` names it).
func kindRuntimeOf[T any, PT object[T]](t statedb.RWTable[PT], r reconciler.Reconciler[PT]) kindOut {
	for _, k := range kinds {
		if k, ok := k.(kindOf[T, PT]); ok {
			return k.runtime(t, r)
		}
	}
	panic(fmt.Sprintf("no kind of %T in kinds", new(T)))
}

// runtime is the kind's constructor in the agent's hive.
func (k kindOf[T, PT]) runtime(t statedb.RWTable[PT], r reconciler.Reconciler[PT]) kindOut {
	order := -1
	for i, kk := range kinds {
		if kk.fileKey() == k.file {
			order = i
		}
	}
	getStatus := PT.GetStatus
	untried := &untriedCount[PT]{table: t, getStatus: getStatus}
	{
		return kindOut{
			Kind: kindRuntime{
				order:  order,
				into:   k.into(t),
				status: func(txn statedb.ReadTxn) tableStatus { return countByStatus(txn, t, getStatus) },
				ready: func(txn statedb.ReadTxn) error {
					if ok, _ := t.Initialized(txn); !ok {
						return fmt.Errorf("table %s not initialized", t.Name())
					}
					if n := untried.count(txn); n > 0 {
						return fmt.Errorf("table %s: %d objects not reconciled yet", t.Name(), n)
					}
					return nil
				},
				watch: func(txn statedb.ReadTxn) <-chan struct{} {
					_, w := t.AllWatch(txn)
					return w
				},
				progress: func(jobs job.Group, db *statedb.DB, log *slog.Logger, started <-chan struct{}) error {
					return watchProgress(jobs, db, t, r, log, getStatus, started)
				},
			},
			Fleet: fleetcell.Kind[PT]{Table: t, Reconciler: r,
				Equal: k.equal, SetStatus: k.setStatus, GetStatus: getStatus,
				Decode: k.decode, Name: func(o PT) string { return fleetName(k.key(o)) }},
		}
	}
}

// kindsIn are the kinds of the running agent, in the order of kinds.
type kindsIn struct {
	cell.In
	Kinds []kindRuntime `group:"agent-kinds"`
}

// sorted returns the kinds in the order of kinds (a value group has none).
func (in kindsIn) sorted() []kindRuntime {
	out := make([]kindRuntime, len(kinds))
	for _, k := range in.Kinds {
		out[k.order] = k
	}
	return out
}

// kindCells are every kind's target package and runtime in the hive.
func kindCells() cell.Cell {
	if len(kindConstructors) != len(kinds) || len(kindTargets) != len(kinds) || len(kindDryRuns) != len(kinds) {
		panic("kindConstructors, kindTargets, kindDryRuns and kinds differ: give each kind its part of each, in order")
	}
	for i, k := range kinds {
		if !k.constructs(kindConstructors[i]) {
			panic(fmt.Sprintf("kindConstructors[%d] is not the constructor of %s", i, k.fileKey()))
		}
	}
	return cell.Group(append(kindTargets, kindRuntimes())...)
}

// kindRuntimes provide every kind's runtime from its table and reconciler
// (which kindTargets provide in the agent, and a test provides itself).
func kindRuntimes() cell.Cell { return cell.Provide(kindConstructors...) }

// describe names any of the agent's objects with its kind.
func describe(obj any) string {
	for _, k := range kinds {
		if s, ok := k.describe(obj); ok {
			return s
		}
	}
	return fmt.Sprint(obj)
}
